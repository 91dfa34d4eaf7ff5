"""The GitHub provider: issues as work items, pull requests as revisions, through githubkit."""

from adapters.github.config import GitHubSettings
from adapters.github.provider import GitHubProvider, create_github_provider

__all__ = ["GitHubProvider", "GitHubSettings", "create_github_provider"]

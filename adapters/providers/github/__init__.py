"""The GitHub provider: issues as work items, pull requests as revisions, through githubkit.

The provider is imported when first named, not with the package: the ``supervisor.toml`` schema
(adapters/cli/settings.py) embeds ``GitHubSettings``, and loading the file must not import
githubkit (about half a second), which only a running GitHub provider needs.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from adapters.providers.github.settings import GitHubSettings

if TYPE_CHECKING:
    from adapters.providers.github.provider import GitHubProvider, create_github_provider

__all__ = ["GitHubProvider", "GitHubSettings", "create_github_provider"]


def __getattr__(name: str) -> Any:
    if name in ("GitHubProvider", "create_github_provider"):
        return getattr(import_module("adapters.providers.github.provider"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

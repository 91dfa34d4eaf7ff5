"""The Jira provider: Jira issues as work items (a tracker only: revisions go to GitHub, GitLab
or the local forge), Cloud (REST v3, ADF bodies) and Data Center (REST v2, wiki markup).

The client is httpx, used directly: neither the ``jira`` package nor ``atlassian-python-api``
fits. cpe needs the new Cloud search (``/rest/api/3/search/jql`` with ``nextPageToken``; the old
``/search`` was removed), its own retries and write pacing (a write is sent once, never
re-sent by a library), every response's headers (``Retry-After``, ``X-RateLimit-*``) and no
request it did not ask for (``jira.JIRA()`` asks for ``serverInfo`` when built, and retries on
its own). httpx is already installed (githubkit's), so nothing new goes into pyproject.

The provider is imported when first named, not with the package: the ``supervisor.toml`` schema
embeds ``JiraSettings``, and loading the file must not import the HTTP machinery.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from adapters.providers.jira.settings import JiraSettings

if TYPE_CHECKING:
    from adapters.providers.jira.provider import JiraProvider, create_jira_provider

__all__ = ["JiraProvider", "JiraSettings", "create_jira_provider"]


def __getattr__(name: str) -> Any:
    if name in ("JiraProvider", "create_jira_provider"):
        return getattr(import_module("adapters.providers.jira.provider"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

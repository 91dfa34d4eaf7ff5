"""The GitLab provider: issues as work items, merge requests as revisions, through python-gitlab.

The provider is imported when first named, not with the package: the ``supervisor.toml`` schema
(adapters/cli/settings.py) embeds ``GitLabSettings``, and loading the file must not import
python-gitlab, which only a running GitLab provider needs.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from adapters.providers.gitlab.settings import GitLabSettings

if TYPE_CHECKING:
    from adapters.providers.gitlab.provider import GitLabProvider, create_gitlab_provider

__all__ = ["GitLabProvider", "GitLabSettings", "create_gitlab_provider"]


def __getattr__(name: str) -> Any:
    if name in ("GitLabProvider", "create_gitlab_provider"):
        return getattr(import_module("adapters.providers.gitlab.provider"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

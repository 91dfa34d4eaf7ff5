"""The Linear provider: a team's issues as work items (a tracker only: revisions go to GitHub,
GitLab or the local forge), through Linear's GraphQL API.

The client is httpx (installed with githubkit), the documents constant strings, not ``gql``: cpe
needs every response's headers (Linear's rate-limit budget, ``X-RateLimit-Requests-Remaining``
and ``-Reset``), its own retries (reads only, waiting as the reset header says, capped) and write
pacing (adapters/providers/pacing.py), and no schema download at start. gql's value, checking a
document against a fetched schema, is done by the tests instead: every document the provider
sends is validated against the schema the fake Linear serves, a subset of Linear's own.

The provider is imported when first named, not with the package: the ``supervisor.toml`` schema
(adapters/cli/settings.py) embeds ``LinearSettings``, and loading the file must not import httpx,
which only a running provider needs.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from adapters.providers.linear.settings import LinearSettings

if TYPE_CHECKING:
    from adapters.providers.linear.provider import LinearProvider, create_linear_provider

__all__ = ["LinearProvider", "LinearSettings", "create_linear_provider"]


def __getattr__(name: str) -> Any:
    if name in ("LinearProvider", "create_linear_provider"):
        return getattr(import_module("adapters.providers.linear.provider"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

"""The Jira provider: its composition, lifecycle and the interfaces it gives (being built: the
factory's signature is the agreed one, its body lands next)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from adapters.providers import ProviderRoles
from adapters.providers.jira.settings import JiraSettings
from domain.errors import ConfigError
from domain.ports import SpecProviderReader


class JiraProvider:
    """Work items in Jira (Cloud or Data Center). ``close()`` it at shutdown."""

    def __init__(self, settings: JiraSettings) -> None:
        self.settings = settings

    def close(self) -> None:
        return None


def create_jira_provider(
    settings: JiraSettings | Mapping[str, Any],
    spec_reader: SpecProviderReader,
    *,
    environ: Mapping[str, str] | None = None,
    state_dir: Path | None = None,
    roles: ProviderRoles | None = None,
) -> tuple[JiraProvider, None]:
    """The provider (Jira keeps work items only: the interfaces are its attributes)."""
    if not isinstance(settings, JiraSettings):
        settings = JiraSettings.model_validate(dict(settings))
    if roles is not None and roles.revisions:
        raise ConfigError(
            "Jira keeps work items only; choose github, gitlab or local for revisions",
            key_path="provider.revisions",
            expected="github, gitlab or local",
        )
    raise NotImplementedError("the Jira provider is being built (issue 38)")

"""The providers of a running engine: one per system ``[provider]`` names, each serving the
roles it holds (``ProviderRoles``), and the engine's ``ProviderInterfaces`` assembled from their
ports: the tracker's work item reader and writer, the forge's revision reader and writer, and
the specs read from the repository's checkout. A system that serves both roles is built once,
with both.

Every provider built is closed at shutdown (``closers``), and closed at once when a later one
cannot be built; the request meter sums what both went over the wire with (and keeps each remote
system's figures by its kind: github, gitlab, linear, jira); a reload hands each system's trust
its new settings. The read-only commands (cpe status, cpe work) open the local tracker alone
here (``open_local_tracker``), without a token or a forge.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from adapters.cli.provider_settings import ProviderKind, ProviderSection
from adapters.cli.settings import CpeConfig
from adapters.describe.items import (
    IssuePages,
    github_pages,
    gitlab_pages,
    jira_pages,
    linear_pages,
)
from adapters.host.metering import ProviderMeter
from adapters.providers import ProviderRoles
from domain.errors import ConfigError
from domain.models import Revision
from domain.ports import ProviderInterfaces, SpecProviderReader

if TYPE_CHECKING:
    from adapters.providers.local.provider import LocalProvider
    from adapters.providers.local.revisions import LocalRevisionReader
    from adapters.providers.local.work_items import LocalWorkItemReader, LocalWorkItemWriter


class _System(Protocol):
    """What the composition root needs of a provider, whatever its system."""

    work_item_reader: Any
    work_item_writer: Any
    revision_reader: Any
    revision_writer: Any

    def close(self) -> None: ...


@dataclass
class WireStats:
    """What went over the wire to every remote system, summed (the dashboard's ``/metrics``):
    requests, 304s, retries, rate-limited answers, and the least rate limit left."""

    requests: int = 0
    not_modified: int = 0
    retries: int = 0
    rate_limited: int = 0
    rate_remaining: int | None = None

    @property
    def counted(self) -> int:
        return self.requests - self.not_modified


def summed(sources: list[Callable[[], Any]]) -> Callable[[], WireStats]:
    def total() -> WireStats:
        out = WireStats()
        for source in sources:
            stats = source()
            for f in fields(WireStats):
                if f.name != "rate_remaining":
                    setattr(out, f.name, getattr(out, f.name) + getattr(stats, f.name))
            left = stats.rate_remaining
            if left is not None:
                out.rate_remaining = (
                    left if out.rate_remaining is None else min(out.rate_remaining, left)
                )
        return out

    return total


def _stats_of(system: object) -> Callable[[], Any]:
    """A remote system's ``TransportStats``, read when asked."""
    return lambda: getattr(system, "stats")  # noqa: B009 - every remote provider has it


def roles_of(section: ProviderSection, kind: ProviderKind) -> ProviderRoles:
    """What system ``kind`` serves under this ``[provider]``."""
    return ProviderRoles(
        work_items=section.work_items_kind == kind, revisions=section.revisions_kind == kind
    )


def build_providers(
    config: CpeConfig,
    root: Path,
    branch: str,
    state_dir: Path,
    closers: list[Any],
    *,
    meter: ProviderMeter,
    remote: str | None = None,
    reloaders: list[Callable[[CpeConfig], None]] | None = None,
    environ: Mapping[str, str] | None = None,
) -> ProviderInterfaces:
    """The engine's five interfaces from the systems ``config.provider`` names."""
    from adapters.providers.specs.reader import GitSpecReader  # noqa: PLC0415

    section = config.provider
    problem = section.problem()
    if problem is not None:
        raise ConfigError(problem)
    placeholder = section.placeholder()
    if placeholder is not None:
        key, value, expected = placeholder
        raise ConfigError(
            f"{value!r} is the placeholder cpe init wrote", key_path=key, expected=expected
        )
    env = os.environ if environ is None else environ
    specs = GitSpecReader(
        root,
        config.specs.globs,
        default_branch=branch,
        max_bytes=config.specs.max_bytes,
        remote=remote,
    )
    built: list[_System] = []
    wires: list[Callable[[], Any]] = []
    ports: dict[str, Any] = {}
    try:
        for kind in section.systems:
            roles = roles_of(section, kind)
            system = _build(kind, roles, config, root, branch, state_dir, specs, env)
            built.append(system)
            if kind != "local":
                wires.append(_stats_of(system))
                meter.wires[kind] = wires[-1]
                if reloaders is not None:
                    reloaders.append(_retrust(kind, system))
            if roles.work_items:
                ports["work_item_reader"] = system.work_item_reader
                ports["work_item_writer"] = system.work_item_writer
            if roles.revisions:
                ports["revision_reader"] = system.revision_reader
                ports["revision_writer"] = system.revision_writer
    except BaseException:
        for system in reversed(built):
            system.close()
        raise
    closers.extend(system.close for system in built)
    if wires:
        meter.wire = summed(wires)
    return ProviderInterfaces(**ports, spec_reader=specs)


def _build(  # noqa: PLR0917
    kind: ProviderKind,
    roles: ProviderRoles,
    config: CpeConfig,
    root: Path,
    branch: str,
    state_dir: Path,
    specs: SpecProviderReader,
    environ: Mapping[str, str],
) -> _System:
    if kind == "local":
        return _local(config, root, branch, state_dir, roles)
    if kind == "github":
        return _github(config, branch, state_dir, specs, roles, environ)
    if kind == "gitlab":
        return _gitlab(config, branch, state_dir, specs, roles, environ)
    return _tracker_only(kind, config, state_dir, specs, roles, environ)


def _local(
    config: CpeConfig, root: Path, branch: str, state_dir: Path, roles: ProviderRoles
) -> LocalProvider:
    from adapters.providers.local.provider import LocalProvider  # noqa: PLC0415

    local = config.provider.local
    pipeline = None
    if roles.revisions and local.pipeline_command:
        from adapters.providers.local.pipeline import LocalPipeline  # noqa: PLC0415

        pipeline = LocalPipeline(local.pipeline_command, local.pipeline_timeout)
    return LocalProvider(root, state_dir, branch, pipeline, baseline=local.baseline, roles=roles)


# What the variable ``token_env`` names holds, by system, as a refusal says it.
_TOKENS = {
    "github": "a GitHub token",
    "gitlab": "a GitLab token",
    "linear": "a Linear personal API key or OAuth access token",
    "jira": "a Jira API token (Cloud, with email) or personal access token (Data Center)",
}


def _token_set(kind: ProviderKind, token_env: str, environ: Mapping[str, str]) -> None:
    value = environ.get(token_env)
    if value is None or not value.strip():
        said = "is not set" if value is None else "is empty"
        raise ConfigError(
            f"the environment variable {token_env} {said}",
            key_path=f"provider.{kind}.token_env",
            expected=f"{_TOKENS[kind]} in that variable",
        )


def _github(  # noqa: PLR0917
    config: CpeConfig,
    branch: str,
    state_dir: Path,
    specs: SpecProviderReader,
    roles: ProviderRoles,
    environ: Mapping[str, str],
) -> _System:
    github = config.provider.github
    assert github is not None  # ProviderSection.problem: a system named has its section
    settings = github.model_copy(
        update={
            "default_branch": branch,
            # The implementors' branches are named with it: how a PR finds its work item.
            "branch_prefix": config.workflow.branch_prefix,
        }
    )
    if settings.app_id is None:
        _token_set("github", github.token_env, environ)
    from adapters.providers.github import create_github_provider  # noqa: PLC0415

    provider, _ = create_github_provider(
        settings, specs, environ=environ, state_dir=state_dir, roles=roles
    )
    return provider


def _gitlab(  # noqa: PLR0917
    config: CpeConfig,
    branch: str,
    state_dir: Path,
    specs: SpecProviderReader,
    roles: ProviderRoles,
    environ: Mapping[str, str],
) -> _System:
    gitlab = config.provider.gitlab
    assert gitlab is not None  # ProviderSection.problem: a system named has its section
    settings = gitlab.model_copy(
        update={"default_branch": branch, "branch_prefix": config.workflow.branch_prefix}
    )
    _token_set("gitlab", gitlab.token_env, environ)
    try:
        from adapters.providers.gitlab import create_gitlab_provider  # noqa: PLC0415

        provider, _ = create_gitlab_provider(
            settings, specs, environ=environ, state_dir=state_dir, roles=roles
        )
    except ImportError as exc:  # python-gitlab, a dependency, missing from this install
        raise ConfigError(
            f"the GitLab provider cannot be loaded ({exc})",
            key_path="provider.gitlab",
            expected="python-gitlab installed (pip install 'python-gitlab>=8.6,<9')",
        ) from exc
    return provider


def _tracker_only(  # noqa: PLR0917
    kind: ProviderKind,
    config: CpeConfig,
    state_dir: Path,
    specs: SpecProviderReader,
    roles: ProviderRoles,
    environ: Mapping[str, str],
) -> _System:
    """Linear or Jira: work items only (``ProviderSection.problem`` refused them as a forge)."""
    settings = getattr(config.provider, kind)
    assert settings is not None  # ProviderSection.problem: a system named has its section
    _token_set(kind, settings.token_env, environ)
    if kind == "linear":
        from adapters.providers.linear import create_linear_provider  # noqa: PLC0415

        factory: Callable[..., tuple[Any, Any]] = create_linear_provider
    else:
        from adapters.providers.jira import create_jira_provider  # noqa: PLC0415

        factory = create_jira_provider
    provider: _System
    provider, _ = factory(settings, specs, environ=environ, state_dir=state_dir, roles=roles)
    return provider


def _retrust(kind: ProviderKind, system: object) -> Callable[[CpeConfig], None]:
    """A reload (SIGHUP) hands the system's trust its new settings (who is trusted)."""

    def retrust(new: CpeConfig) -> None:
        settings = getattr(new.provider, kind)
        trust = getattr(system, "trust", None)
        if settings is not None and trust is not None:
            trust.configure(settings)

    return retrust


# ---------------------------------------------------------------------------- read-only


@dataclass
class LocalTracker:
    """The local tracker a read-only command opened: its work item ports, and the local forge's
    revision reader when the forge is local too."""

    provider: LocalProvider
    work_item_reader: LocalWorkItemReader
    work_item_writer: LocalWorkItemWriter
    revision_reader: LocalRevisionReader | None

    def close(self) -> None:
        self.provider.close()


def open_local_tracker(config: CpeConfig, root: Path, branch: str) -> LocalTracker | None:
    """The local tracker, when the work items are local (with its revisions when the forge is
    local too); None when they are kept elsewhere (GitHub, GitLab, Linear, Jira: the local
    forge of another system's items is the engine's to read). Close it after use."""
    section = config.provider
    if section.work_items_kind != "local":
        return None
    from adapters.providers.local.provider import LocalProvider  # noqa: PLC0415

    provider = LocalProvider(
        root, root / config.engine.state_dir, branch, roles=roles_of(section, "local")
    )
    assert provider.work_item_reader is not None  # it serves the work items
    assert provider.work_item_writer is not None
    return LocalTracker(
        provider, provider.work_item_reader, provider.work_item_writer, provider.revision_reader
    )


def local_forge_revisions(config: CpeConfig, root: Path, branch: str) -> list[Revision] | None:
    """The local forge's revisions as they are, when it keeps the revisions of another
    system's items (Linear, Jira); None otherwise (the local tracker's own provider reads them,
    or the forge is remote). No database yet: no revision yet, and none is made."""
    section = config.provider
    if section.revisions_kind != "local" or section.work_items_kind == "local":
        return None
    state_dir = root / config.engine.state_dir
    from adapters.providers.local.provider import DATABASE_NAME, LocalProvider  # noqa: PLC0415

    if not (state_dir / DATABASE_NAME).exists():
        return []
    with LocalProvider(root, state_dir, branch, roles=roles_of(section, "local")) as forge:
        assert forge.revision_reader is not None  # it serves the revisions
        return list(forge.revision_reader.list_revisions())


def issue_pages(config: CpeConfig) -> IssuePages | None:
    """Where the tracker shows its items, when it is not the local one."""
    section = config.provider
    kind = section.work_items_kind
    if kind == "github":
        return github_pages(section.github.repository if section.github else "")
    if kind == "gitlab":
        gitlab = section.gitlab
        return gitlab_pages(gitlab.base_url, gitlab.project) if gitlab else gitlab_pages("", "")
    if kind == "jira":
        return jira_pages(section.jira.base_url if section.jira else "")
    if kind == "linear":
        return linear_pages()
    return None

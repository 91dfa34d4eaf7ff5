"""``[provider]`` in ``supervisor.toml``: which system keeps the work items (the tracker) and
which keeps the revisions (the forge), and each system's own settings.

One system for both, as before::

    [provider]
    kind = "github"

or two apart::

    [provider.work_items]
    kind = "gitlab"
    [provider.revisions]
    kind = "github"

with ``[provider.local]``, ``[provider.github]``, ``[provider.gitlab]`` holding each system's
settings (the GitHub and GitLab models are their providers' own, embedded as they are). ``kind``
beside the two role sections is accepted only when they name the same system. The valid pairs
are local + local, and any tracker (local, github, gitlab) with a github or gitlab forge: the
local forge keeps the revisions of the local tracker's items, in the same database. Anything
else, or a system named without its section, is refused when the file loads, in one line
(``ProviderSection.problem``).
"""

from __future__ import annotations

from typing import Literal, get_args

from pydantic import BaseModel, ConfigDict, Field

from adapters.providers.github.settings import GitHubSettings
from adapters.providers.gitlab.settings import GitLabSettings
from adapters.runtime.common import Seconds

ProviderKind = Literal["local", "github", "gitlab"]
KINDS: tuple[ProviderKind, ...] = get_args(ProviderKind)
FORGES: tuple[ProviderKind, ...] = ("github", "gitlab")  # forges for any tracker
ROLES = ("work_items", "revisions")


class _Section(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class LocalProviderSection(_Section):
    pipeline_command: list[str] = Field(default_factory=lambda: ["python3", "-m", "pytest", "-q"])
    pipeline_timeout: Seconds = 900
    baseline: bool = Field(
        default=True, description="run the pipeline on the default branch's head too"
    )


class RoleSection(_Section):
    """``[provider.work_items]`` or ``[provider.revisions]``: the system that serves the role."""

    kind: ProviderKind


def valid_pair(work_items: ProviderKind, revisions: ProviderKind) -> bool:
    return revisions in FORGES or work_items == revisions == "local"


def allowed_pairs() -> str:
    """The valid pairs, as one phrase."""
    return "local with local, or work items on local, github or gitlab with revisions on " + (
        " or ".join(FORGES)
    )


class ProviderSection(_Section):
    kind: ProviderKind | None = None
    """One system for both roles (local when neither this nor the role sections are given)."""
    work_items: RoleSection | None = None
    revisions: RoleSection | None = None
    local: LocalProviderSection = LocalProviderSection()
    github: GitHubSettings | None = None
    gitlab: GitLabSettings | None = None

    @property
    def work_items_kind(self) -> ProviderKind:
        """The tracker: the system that keeps the work items."""
        return self._kind("work_items")

    @property
    def revisions_kind(self) -> ProviderKind:
        """The forge: the system that keeps the revisions."""
        return self._kind("revisions")

    def _kind(self, role: str) -> ProviderKind:
        section: RoleSection | None = getattr(self, role)
        if section is not None:
            return section.kind
        return self.kind or "local"

    @property
    def apart(self) -> bool:
        """Work items and revisions kept by two systems."""
        return self.work_items_kind != self.revisions_kind

    @property
    def systems(self) -> tuple[ProviderKind, ...]:
        """The systems named: the tracker's, then the forge's when it is another one."""
        return tuple(dict.fromkeys((self.work_items_kind, self.revisions_kind)))

    def key_of(self, role: str) -> str:
        """Where the role's kind is set in the file."""
        return f"provider.{role}.kind" if getattr(self, role) is not None else "provider.kind"

    def where(self, kind: ProviderKind) -> str:
        """The repository or project of a system, as a person names it ("" for local)."""
        if kind == "github" and self.github is not None:
            return self.github.repository
        if kind == "gitlab" and self.gitlab is not None:
            return self.gitlab.project
        return ""

    def describe(self) -> str:
        """``work items: gitlab acme/widgets · revisions: github acme/widgets``; one system
        for both: ``work items and revisions: github acme/widgets``."""

        def named(kind: ProviderKind) -> str:
            where = self.where(kind)
            return f"{kind} {where}" if where else kind

        if not self.apart:
            return f"work items and revisions: {named(self.work_items_kind)}"
        return (
            f"work items: {named(self.work_items_kind)} · revisions: {named(self.revisions_kind)}"
        )

    def problem(self) -> str | None:
        """Why this section cannot run, in one line (None: it can): the two forms disagreeing,
        a pair that is not valid, a system named without its own section."""
        if self.kind is not None:
            for role in ROLES:
                section: RoleSection | None = getattr(self, role)
                if section is not None and section.kind != self.kind:
                    return (
                        f'provider.kind = "{self.kind}" and provider.{role}.kind = '
                        f'"{section.kind}" disagree: [provider] kind names one system for both; '
                        "give it alone, or [provider.work_items] and [provider.revisions] alone"
                    )
        tracker, forge = self.work_items_kind, self.revisions_kind
        if not valid_pair(tracker, forge):
            return (
                f'{self.key_of("revisions")} = "{forge}": the local forge keeps revisions of '
                f"the local tracker's items only; with work items on {tracker} choose "
                f"{' or '.join(FORGES)} for revisions"
            )
        for role in ROLES:
            kind = self._kind(role)
            if kind != "local" and getattr(self, kind) is None:
                needs = "repository" if kind == "github" else "project"
                return (
                    f'provider.{kind}: missing, and {self.key_of(role)} = "{kind}" needs it; '
                    f"expected a [provider.{kind}] section with its {needs} (and token_env)"
                )
        return None

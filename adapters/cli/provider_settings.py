"""``[provider]`` in ``supervisor.toml``: which system keeps the work items (the tracker) and
which keeps the revisions (the forge), and each system's own settings.

One system for both, as before::

    [provider]
    kind = "github"

or two apart::

    [provider.work_items]
    kind = "jira"
    [provider.revisions]
    kind = "github"

with ``[provider.local]``, ``[provider.github]``, ``[provider.gitlab]``, ``[provider.linear]``,
``[provider.jira]`` holding each system's settings (the remote systems' models are their
providers' own, embedded as they are). ``kind`` beside the two role sections is accepted only
when they name the same system. Linear and Jira keep work items only. The valid pairs are any
tracker (local, github, gitlab, linear, jira) with a github or gitlab forge, and the local forge
with the local tracker, Linear or Jira (the local forge keeps a revision's item as the other
system's key). Anything else, or a system named without its section, is refused when the file
loads, in one line (``ProviderSection.problem``).
"""

from __future__ import annotations

from typing import Literal, get_args

from pydantic import BaseModel, ConfigDict, Field

from adapters.providers.github.settings import GitHubSettings
from adapters.providers.gitlab.settings import GitLabSettings
from adapters.providers.jira.settings import JiraSettings
from adapters.providers.linear.settings import LinearSettings
from adapters.runtime.common import Seconds

ProviderKind = Literal["local", "github", "gitlab", "linear", "jira"]
KINDS: tuple[ProviderKind, ...] = get_args(ProviderKind)
FORGES: tuple[ProviderKind, ...] = ("github", "gitlab")  # forges for any tracker
TRACKERS_ONLY: tuple[ProviderKind, ...] = ("linear", "jira")  # they keep no revisions
# The trackers whose items the local forge keeps: its own, and those of a system that has no
# forge (a revision keeps the item's key).
LOCAL_FORGE_TRACKERS: tuple[ProviderKind, ...] = ("local", *TRACKERS_ONLY)
ROLES = ("work_items", "revisions")
NAMES: dict[ProviderKind, str] = {
    "local": "local",
    "github": "GitHub",
    "gitlab": "GitLab",
    "linear": "Linear",
    "jira": "Jira",
}
# What cpe init writes where only a person knows the value: the file loads with it (cpe status
# works), and cpe run refuses it before anything is asked, saying what to put there.
PLACEHOLDERS: dict[tuple[ProviderKind, str], tuple[str, str]] = {
    ("github", "repository"): ("OWNER/NAME", "the repository, owner/name"),
    ("gitlab", "project"): ("GROUP/NAME", "the project's path, group/name"),
    ("jira", "base_url"): (
        "https://your-site.atlassian.net",
        "your Jira site's URL (https://SITE.atlassian.net), or your Data Center's",
    ),
    ("jira", "email"): ("you@example.com", "the e-mail of the account the API token belongs to"),
}
_NO_EMAIL = "no email on Data Center (its personal access token goes alone)"
# What a remote system's section needs at the least, as the refusal of a missing one says it.
_NEEDS = {
    "github": "its repository (and token_env)",
    "gitlab": "its project (and token_env)",
    "linear": "its team (and token_env)",
    "jira": "its base_url, project and, on Cloud, email (and token_env)",
}


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
    if revisions == "local":
        return work_items in LOCAL_FORGE_TRACKERS
    return revisions in FORGES


def pair_refusal(work_items: ProviderKind, revisions: ProviderKind, key: str) -> str | None:
    """Why the pair is not valid, in one line naming ``key`` (where the forge was set), or
    None."""
    if valid_pair(work_items, revisions):
        return None
    forges = f"{', '.join(FORGES)} or local"
    if revisions in TRACKERS_ONLY:
        return (
            f'{key} = "{revisions}": {NAMES[revisions]} keeps work items only; choose '
            f'{forges} for revisions ([provider.work_items] kind = "{revisions}" and '
            "[provider.revisions] kind = one of them)"
        )
    return (
        f'{key} = "{revisions}": the local forge keeps revisions of the local tracker\'s, '
        f"Linear's or Jira's items; with work items on {work_items} choose "
        f"{' or '.join(FORGES)} for revisions"
    )


class ProviderSection(_Section):
    kind: ProviderKind | None = None
    """One system for both roles (local when neither this nor the role sections are given)."""
    work_items: RoleSection | None = None
    revisions: RoleSection | None = None
    local: LocalProviderSection = LocalProviderSection()
    github: GitHubSettings | None = None
    gitlab: GitLabSettings | None = None
    linear: LinearSettings | None = None
    jira: JiraSettings | None = None

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
        if kind == "linear" and self.linear is not None:
            project = f" project {self.linear.project}" if self.linear.project else ""
            return f"team {self.linear.team}{project}"
        if kind == "jira" and self.jira is not None:
            return f"{self.jira.project} at {self.jira.base_url}"
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

    def placeholder(self) -> tuple[str, str, str] | None:
        """A value cpe init wrote for a person to replace, still there in a system named:
        (its key path, the value, what is expected there); None when there is none."""
        for (kind, key), (value, expected) in PLACEHOLDERS.items():
            settings = getattr(self, kind) if kind in self.systems else None
            if settings is None or getattr(settings, key) != value:
                continue
            if kind == "jira" and key == "email" and not settings.is_cloud:
                return f"provider.{kind}.{key}", value, _NO_EMAIL
            return f"provider.{kind}.{key}", value, expected
        return None

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
        refused = pair_refusal(tracker, forge, self.key_of("revisions"))
        if refused is not None:
            return refused
        for role in ROLES:
            kind = self._kind(role)
            if kind != "local" and getattr(self, kind) is None:
                return (
                    f'provider.{kind}: missing, and {self.key_of(role)} = "{kind}" needs it; '
                    f"expected a [provider.{kind}] section with {_NEEDS[kind]}"
                )
        return None

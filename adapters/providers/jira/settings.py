"""Settings of the Jira provider: what ``[provider.jira]`` in ``supervisor.toml`` holds, plus the
knobs tests and the benchmark turn (retry waits, pacing, polling cadence).

The ``supervisor.toml`` schema embeds this model, so the section is checked once, when the file
loads. It imports no vendor library and no HTTP client. Credentials never appear here:
``token_env`` names the environment variable that holds the token, read at start. Jira Cloud
takes an API token with the account's e-mail (HTTP Basic ``email:token``, so ``email`` is
required there); Jira Data Center takes a personal access token (``Authorization: Bearer``).

Jira keeps work items only: revisions go to GitHub, GitLab or the local forge.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from domain.models import STATUSES, Status

Deployment = Literal["cloud", "data_center"]

# Jira's status categories (``statusCategory.key``) and the cpe statuses each one gives by
# default; the other statuses are found by name (DEFAULT_STATUS_NAMES) in the workflow.
CATEGORY_DEFAULTS: dict[Status, str] = {
    "pending": "new",
    "in-progress": "indeterminate",
    "done": "done",
}
DEFAULT_STATUS_NAMES: dict[Status, tuple[str, ...]] = {
    "pending": ("To Do", "Open", "Backlog"),
    "in-progress": ("In Progress",),
    "in-review": ("In Review", "Review", "Code Review"),
    "approved": ("Approved", "Ready to Merge"),
    "needs-refinement": ("Needs Refinement", "Refinement"),
    "blocked": ("Blocked",),
    "done": ("Done", "Closed", "Resolved"),
}

_PROJECT_KEY = r"^[A-Z][A-Z0-9_]{0,254}$"
# A Jira label is one word: Jira refuses a label with a space in it.
_LABEL = re.compile(r"^\S{1,255}$")


class JiraSettings(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    base_url: str
    """The site: ``https://your-site.atlassian.net`` (Cloud) or a Data Center URL (with its
    context path, if any); the API is at ``<base_url>/rest/api/3`` (Cloud) or ``/rest/api/2``."""
    deployment: Deployment | None = None
    """None: Cloud when the host ends with ``.atlassian.net``, else Data Center."""
    project: str = Field(pattern=_PROJECT_KEY)
    """The project's key (``PROJ``): where planner items are created, whose workflow is used."""
    jql: str | None = None
    """Which issues are work items. None: ``project = <KEY> ORDER BY created ASC``. Given, it is
    sent as written (cpe ANDs nothing to it but its own ``updated >=`` bound when polling)."""
    email: str | None = None
    """Cloud: the account the API token belongs to (Basic auth ``email:token``)."""
    token_env: str = Field(default="JIRA_API_TOKEN", min_length=1)
    # finite and at most a day, as every duration in supervisor.toml
    request_timeout: float = Field(default=30, gt=0, le=86_400, allow_inf_nan=False)

    statuses: Mapping[Status, str] | None = None
    """cpe status -> the Jira status's name. Unnamed ones: pending, in-progress and done by the
    status category (To Do, In Progress, Done), the others by the usual names
    (DEFAULT_STATUS_NAMES); a status found nowhere is a configuration error at start listing the
    workflow's statuses."""
    issue_type: str = Field(default="Task", min_length=1)
    """The issue type of the items the planner creates."""
    blocks_link: str = Field(default="Blocks", min_length=1)
    """The issue link type whose outward issue blocks its inward one."""

    # Who may make work and put words in an agent's prompt (docs/security.md). An issue is a work
    # item only when its reporter holds ``trusted_permission`` on the project or belongs to one of
    # ``trusted_groups``, or such a person gave it ``admit_label`` (the changelog says who); and,
    # when ``required_labels`` is set, it carries them all. Comments by anyone else are left out
    # of every prompt. cpe's own account and ``trusted_users`` are always trusted.
    trusted_permission: str | None = "EDIT_ISSUES"
    """A project permission key (``EDIT_ISSUES``, ``TRANSITION_ISSUES``, ``ADMINISTER_PROJECTS``);
    empty (or None): nobody is trusted by permission, only by group or by name."""
    trusted_groups: tuple[str, ...] = ()
    trusted_users: tuple[str, ...] = ()
    """Account ids (Cloud) or user names (Data Center)."""
    admit_label: str = "cpe-admit"
    """Empty: no admission by label."""
    required_labels: tuple[str, ...] = ()
    permission_ttl: float = Field(default=600, gt=0, le=86_400, allow_inf_nan=False)
    """Seconds a person's looked-up trust is kept before it is asked again."""

    # Reads are retried on 5xx, 429 and connection failures; writes never are.
    read_attempts: int = Field(default=4, ge=1)
    max_retry_wait: float = Field(default=60, ge=0)
    """A wait longer than this is not slept: the error goes up with ``retry_after`` so the caller
    reschedules instead of blocking a thread."""
    backoff_initial: float = Field(default=1.0, ge=0)

    # Writes are paced (Jira Cloud's limits are a cost budget per hour, answered with 429 and
    # Retry-After): at most write_burst + writes_per_minute in any minute, and
    # 4 * write_burst + writes_per_hour in any hour.
    writes_per_minute: float = Field(default=30, gt=0)
    writes_per_hour: float = Field(default=600, gt=0)
    write_burst: int = Field(default=10, ge=1)

    page_size: int = Field(default=100, ge=1, le=5000)
    """Issues asked per search page (Jira may give fewer: 100 is Cloud's usual cap)."""
    full_resync_cycles: int = Field(default=720, ge=1)
    """Every this many cycles the issue index is rebuilt from scratch (deleted or moved issues,
    which no ``updated >=`` search reports)."""
    cache_entries: int = Field(default=4096, ge=16)

    @field_validator("base_url")
    @classmethod
    def _base_url(cls, value: str) -> str:
        url = value.strip().rstrip("/")
        parts = urlsplit(url)
        if parts.scheme not in ("https", "http") or not parts.hostname:
            raise ValueError(
                f"{value!r} is not a Jira site's URL: expected https://your-site.atlassian.net "
                "(Cloud) or your Data Center's URL"
            )
        if "/rest/" in f"{parts.path}/":
            raise ValueError(f"{value!r} names the API: give the site's URL, without /rest/api/...")
        if parts.query or parts.fragment:
            raise ValueError(f"{value!r}: a site's URL has no query or fragment")
        return url

    @field_validator("jql")
    @classmethod
    def _jql(cls, value: str | None) -> str | None:
        if value is None:
            return None
        jql = value.strip()
        if not jql:
            raise ValueError("jql is empty: leave it out for the project's issues")
        return jql

    @field_validator("email")
    @classmethod
    def _email(cls, value: str | None) -> str | None:
        if value is None:
            return None
        email = value.strip()
        if "@" not in email or any(c.isspace() for c in email):
            raise ValueError(f"{value!r} is not an e-mail address (the Cloud account's)")
        return email

    @field_validator("trusted_permission")
    @classmethod
    def _permission(cls, value: str | None) -> str | None:
        key = (value or "").strip()
        if not key:
            return None
        if not re.fullmatch(r"[A-Z][A-Z_]*", key):
            raise ValueError(
                f"{value!r} is not a Jira project permission key: expected one such as "
                "EDIT_ISSUES, TRANSITION_ISSUES or ADMINISTER_PROJECTS (empty: none)"
            )
        return key

    @field_validator("admit_label")
    @classmethod
    def _admit_label(cls, value: str) -> str:
        label = value.strip()
        if label and not _LABEL.match(label):
            raise ValueError(f"admit_label {value!r}: a Jira label is one word, without spaces")
        return label

    @field_validator("required_labels")
    @classmethod
    def _required_labels(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for label in value:
            if not _LABEL.match(label):
                raise ValueError(
                    f"required_labels: {label!r} is not a Jira label (one word, without spaces)"
                )
        return value

    @field_validator("trusted_groups", "trusted_users")
    @classmethod
    def _names(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        names = tuple(v.strip() for v in value)
        if any(not n for n in names):
            raise ValueError("an empty name")
        return names

    @model_validator(mode="after")
    def _checked(self) -> JiraSettings:
        if self.is_cloud and self.email is None:
            raise ValueError(
                "email is required on Jira Cloud: the API token is sent with its account's "
                "e-mail (Basic auth)"
            )
        if self.statuses is not None:
            given = dict(self.statuses)
            empty = [s for s, name in given.items() if not name.strip()]
            if empty:
                raise ValueError(f"statuses: an empty status name for {', '.join(empty)}")
            names = [n.strip().casefold() for n in given.values()]
            if len(set(names)) != len(names):
                raise ValueError("statuses: two cpe statuses have the same Jira status")
        return self

    @property
    def is_cloud(self) -> bool:
        """Cloud or Data Center, as given or by the host."""
        if self.deployment is not None:
            return self.deployment == "cloud"
        host = urlsplit(self.base_url).hostname or ""
        return host.endswith(".atlassian.net")

    @property
    def api_version(self) -> str:
        """``3`` on Cloud (ADF bodies, /search/jql), ``2`` on Data Center (wiki markup)."""
        return "3" if self.is_cloud else "2"

    @property
    def search_jql(self) -> str:
        """The JQL that selects the work items, with its ORDER BY."""
        return (
            self.jql if self.jql is not None else f"project = {self.project} ORDER BY created ASC"
        )

    def status_name(self, status: Status) -> str | None:
        """The Jira status named for ``status`` in the settings (None: found at start)."""
        if self.statuses is None:
            return None
        name = self.statuses.get(status)
        return name.strip() if name is not None else None


__all__ = [
    "CATEGORY_DEFAULTS",
    "DEFAULT_STATUS_NAMES",
    "STATUSES",
    "Deployment",
    "JiraSettings",
]

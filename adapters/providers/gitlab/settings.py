"""Settings of the GitLab provider: what ``[provider.gitlab]`` in ``supervisor.toml`` holds, plus
the knobs tests and the benchmark turn (retry waits, pacing, polling cadence).

The ``supervisor.toml`` schema (adapters/cli/settings.py) embeds this model, so the section is
checked once, when the file loads. It imports no vendor library: loading the file (``cpe status``)
does not import python-gitlab. Credentials never appear here: ``token_env`` names the environment
variable that holds the token (a personal, project or group access token, sent as
``PRIVATE-TOKEN``), and the provider reads it at start.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from domain.models import STATUSES, Status

DEFAULT_BASE_URL = "https://gitlab.com"

# GitLab's access levels (doc/api/members.md), by name and by the number its API gives.
ACCESS_LEVELS: dict[str, int] = {
    "guest": 10,
    "planner": 15,
    "reporter": 20,
    "developer": 30,
    "maintainer": 40,
    "owner": 50,
}
AccessLevel = Literal["reporter", "developer", "maintainer", "owner"]
BlockerSource = Literal["auto", "links", "text"]
# Statuses a label carries: ``done`` is a closed issue.
LABELLED: tuple[Status, ...] = tuple(s for s in STATUSES if s != "done")


class GitLabSettings(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    project: str = Field(pattern=r"^[A-Za-z0-9_.-]+(?:/[A-Za-z0-9_.-]+)+$")
    """The project's full path, ``group/subgroup/name``."""
    base_url: str = DEFAULT_BASE_URL
    """The instance (self-managed: its own URL); the API is at ``<base_url>/api/v4``."""
    token_env: str = Field(default="GITLAB_TOKEN", min_length=1)
    # finite and at most a day, as every duration in supervisor.toml
    request_timeout: float = Field(default=30, gt=0, le=86_400, allow_inf_nan=False)
    default_branch: str | None = None
    """None: asked of GitLab once at start (the project's ``default_branch``)."""
    branch_prefix: str = "cpe/"
    """Implementor branches are ``<prefix><work item id>-<slug>``: how a merge request finds its
    item."""

    # An issue's status is a label: ``<status_label_prefix><status>`` (GitLab's scoped labels,
    # ``status::pending``), or the label ``status_labels`` names for it (every status but done,
    # which is a closed issue).
    status_label_prefix: str = Field(default="status::", min_length=1)
    status_labels: Mapping[Status, str] | None = None
    blockers: BlockerSource = "auto"
    """Where an issue's blockers are: GitLab's issue links (``blocks``/``is_blocked_by``, not on
    every tier), "Blocked by #N" lines in its description, or (``auto``) links where GitLab
    offers them and lines always."""

    # Who may make work and put words in an agent's prompt (docs/security.md). An issue is a
    # work item only when its author's access level on the project is at least
    # ``trusted_access_level``, or such a member gave it ``admit_label`` (empty: no admission by
    # label); and, when ``required_labels`` is set, it carries them all. Notes and reviews by
    # anyone else are left out of every prompt. cpe's own user and ``trusted_bots`` (usernames)
    # are always trusted.
    trusted_access_level: AccessLevel = "developer"
    admit_label: str = "cpe:admit"
    required_labels: tuple[str, ...] = ()
    trusted_bots: tuple[str, ...] = ()
    permission_ttl: float = Field(default=600, gt=0, le=86_400, allow_inf_nan=False)
    """Seconds a member's looked-up access level is kept before it is asked again."""

    # Reads (GET) are retried on 5xx, 429 and connection failures; writes never are.
    read_attempts: int = Field(default=4, ge=1)
    max_retry_wait: float = Field(default=60, ge=0)
    """A wait longer than this (a limit resetting in an hour) is not slept: the error goes up
    with ``retry_after`` so the caller reschedules instead of blocking a thread."""
    backoff_initial: float = Field(default=1.0, ge=0)

    # Writes are paced under GitLab.com's limits (60 notes and 200 issues a minute per user;
    # on Free, 100 requests a minute of any kind): at most write_burst + writes_per_minute in
    # any minute (40), and 4 * write_burst + writes_per_hour in any hour (640).
    writes_per_minute: float = Field(default=30, gt=0)
    writes_per_hour: float = Field(default=600, gt=0)
    write_burst: int = Field(default=10, ge=1)

    # Polling cadence, in poll cycles.
    pipeline_grace_cycles: int = Field(default=10, ge=1)
    """A head with no pipeline yet is asked about every cycle for this many cycles; after that,
    like a finished pipeline, only every ``settled_recheck_cycles`` cycles."""
    settled_recheck_cycles: int = Field(default=10, ge=1)
    full_resync_cycles: int = Field(default=720, ge=1)
    """Every this many cycles the issue index is rebuilt from scratch (deleted or moved issues,
    which no incremental listing reports)."""
    cache_entries: int = Field(default=4096, ge=16)

    @field_validator("base_url")
    @classmethod
    def _base_url(cls, value: str) -> str:
        url = value.strip().rstrip("/")
        if not url.startswith(("https://", "http://")) or url[-3:] == "://":
            raise ValueError(
                f"{value!r} is not a GitLab instance's URL: expected https://host[/path] "
                "(the instance, without /api/v4)"
            )
        if url.endswith("/api/v4"):
            raise ValueError(f"{value!r} names the API: give the instance's URL, without /api/v4")
        return url

    @field_validator("status_label_prefix", "admit_label")
    @classmethod
    def _stripped(cls, value: str) -> str:
        return value.strip()

    @model_validator(mode="after")
    def _status_labels(self) -> GitLabSettings:
        if self.status_labels is None:
            return self
        given = dict(self.status_labels)
        if "done" in given:
            raise ValueError("status_labels: done is a closed issue and has no label")
        missing = [s for s in LABELLED if not given.get(s, "").strip()]
        if missing:
            raise ValueError(
                f"status_labels names no label for {', '.join(missing)}: expected one label "
                f"for each of {', '.join(LABELLED)}"
            )
        names = [given[s].strip().casefold() for s in LABELLED]
        if len(set(names)) != len(names):
            raise ValueError("status_labels: two statuses have the same label")
        return self

    def status_label(self, status: Status) -> str:
        """The label that says ``status`` (never ``done``: a closed issue)."""
        if self.status_labels is not None:
            return self.status_labels[status].strip()
        return f"{self.status_label_prefix}{status}"

    @property
    def trusted_level(self) -> int:
        return ACCESS_LEVELS[self.trusted_access_level]

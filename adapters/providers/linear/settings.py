"""Settings of the Linear provider: what ``[provider.linear]`` in ``supervisor.toml`` holds, plus
the knobs tests and the benchmark turn (retry waits, pacing, polling cadence).

The ``supervisor.toml`` schema (adapters/cli/settings.py) embeds this model, so the section is
checked once, when the file loads. It imports no vendor library. Credentials never appear here:
``token_env`` names the environment variable that holds the token, read at start. Linear takes
a personal API key as ``Authorization: <key>`` and an OAuth access token as
``Authorization: Bearer <token>``; ``auth`` says which the token is (None: an OAuth token by its
``lin_oauth_`` prefix, anything else an API key).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from domain.models import Status

DEFAULT_API_URL = "https://api.linear.app/graphql"
OAUTH_PREFIX = "lin_oauth_"

AuthKind = Literal["api_key", "oauth"]
# A workflow state's type in Linear (WorkflowState.type).
STATE_TYPES: tuple[str, ...] = (
    "triage",
    "backlog",
    "unstarted",
    "started",
    "completed",
    "canceled",
)
# Statuses a team has by its states' types, without naming them; the others (in-review,
# approved, needs-refinement, blocked) need a state of that name, or one given in ``states``.
DEFAULT_STATE_NAMES: dict[Status, str] = {
    "in-review": "In Review",
    "approved": "Approved",
    "needs-refinement": "Needs Refinement",
    "blocked": "Blocked",
}


class LinearSettings(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    team: str = Field(pattern=r"^[A-Za-z][A-Za-z0-9]{0,9}$")
    """The team's key (``ENG``): its issues are the work items, ``ENG-12`` their ids."""
    project: str | None = None
    """A project's name or id: only its issues (None: the whole team's)."""
    label: str | None = None
    """Only issues carrying this label (None: every issue of the team or project)."""
    api_url: str = DEFAULT_API_URL
    token_env: str = Field(default="LINEAR_API_KEY", min_length=1)
    auth: AuthKind | None = None
    # finite and at most a day, as every duration in supervisor.toml
    request_timeout: float = Field(default=30, gt=0, le=86_400, allow_inf_nan=False)

    states: Mapping[Status, str] | None = None
    """cpe status -> the name of the team's workflow state that says it. Statuses not given take
    the defaults: pending the team's first backlog/unstarted state (a triage state counts as
    pending too), in-progress its first started one, done its first completed one; in-review,
    approved, needs-refinement and blocked the states named as in ``DEFAULT_STATE_NAMES``. A
    status no state says is a configuration error at start, listing the team's states."""

    # Who may make work and put words in an agent's prompt (docs/security.md). An issue is a work
    # item only when its creator is a member of the team who is not a guest (or is listed in
    # ``trusted_users``, by email), or such a person gave it ``admit_label`` (empty: no admission
    # by label); and, when ``required_labels`` is set, it carries them all. Comments by anyone
    # else are left out of every prompt. cpe's own user is always trusted.
    admit_label: str = "cpe:admit"
    required_labels: tuple[str, ...] = ()
    trusted_users: tuple[str, ...] = ()
    trust_guests: bool = False
    """Guests of the workspace who are members of the team count as trusted too."""
    permission_ttl: float = Field(default=600, gt=0, le=86_400, allow_inf_nan=False)
    """Seconds the team's looked-up membership is kept before it is asked again."""

    # Reads are retried on 5xx, RATELIMITED and connection failures; writes never are.
    read_attempts: int = Field(default=4, ge=1)
    max_retry_wait: float = Field(default=60, ge=0)
    """A wait longer than this (a limit resetting in an hour) is not slept: the error goes up
    with ``retry_after`` so the caller reschedules instead of blocking a thread."""
    backoff_initial: float = Field(default=1.0, ge=0)

    # Writes are paced well under Linear's limits (an API key: 5,000 requests an hour, shared
    # with the reads): at most write_burst + writes_per_minute in any minute (40), and
    # 4 * write_burst + writes_per_hour in any hour (640).
    writes_per_minute: float = Field(default=30, gt=0)
    writes_per_hour: float = Field(default=600, gt=0)
    write_burst: int = Field(default=10, ge=1)

    # Polling cadence, in poll cycles.
    full_resync_cycles: int = Field(default=720, ge=1)
    """Every this many cycles the issue index is rebuilt from scratch (deleted, archived or moved
    issues, which no ``updatedAt`` listing reports)."""
    page_size: int = Field(default=50, ge=1, le=250)
    """Issues a page (Linear's ``first``: at most 250)."""
    cache_entries: int = Field(default=4096, ge=16)

    @field_validator("api_url")
    @classmethod
    def _api_url(cls, value: str) -> str:
        url = value.strip().rstrip("/")
        if not url.startswith(("https://", "http://")) or url[-3:] == "://":
            raise ValueError(
                f"{value!r} is not Linear's GraphQL endpoint: expected https://host/graphql "
                f"(Linear's is {DEFAULT_API_URL})"
            )
        return url

    @field_validator("team")
    @classmethod
    def _team(cls, value: str) -> str:
        return value.upper()

    @field_validator("project", "label")
    @classmethod
    def _optional_name(cls, value: str | None) -> str | None:
        if value is None:
            return None
        if not value.strip():
            raise ValueError("an empty name: leave the setting out to mean 'all'")
        return value.strip()

    @field_validator("admit_label")
    @classmethod
    def _stripped(cls, value: str) -> str:
        return value.strip()

    @field_validator("trusted_users")
    @classmethod
    def _emails(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        bad = [v for v in value if "@" not in v]
        if bad:
            raise ValueError(
                f"trusted_users holds {', '.join(map(repr, bad))}: expected the users' emails"
            )
        return tuple(v.strip().casefold() for v in value)

    @model_validator(mode="after")
    def _states(self) -> LinearSettings:
        if self.states is None:
            return self
        given = dict(self.states)
        empty = [s for s, name in given.items() if not name.strip()]
        if empty:
            raise ValueError(
                f"states names no workflow state for {', '.join(empty)}: expected a state's "
                "name, or leave the status out for its default"
            )
        names = [name.strip().casefold() for name in given.values()]
        if len(set(names)) != len(names):
            raise ValueError("states: two statuses have the same workflow state")
        return self

    def state_name(self, status: Status) -> str | None:
        """The workflow state named for ``status`` (None: found by the states' types)."""
        if self.states is not None and status in self.states:
            return self.states[status].strip()
        return DEFAULT_STATE_NAMES.get(status)

    def auth_kind(self, token: str) -> AuthKind:
        if self.auth is not None:
            return self.auth
        return "oauth" if token.startswith(OAUTH_PREFIX) else "api_key"

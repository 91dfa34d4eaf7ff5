"""What the fake Linear stores: plain records, mutated only under the fake's lock.

Ids are UUIDs, as Linear's are (made from a counter, so a run is reproducible); times are epoch
milliseconds, written as Linear writes them (``2026-01-01T00:00:01.000Z``).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Literal

from tests.fakes.clock import EPOCH_START

EPOCH_MS = EPOCH_START * 1000

# Linear's workflow state types (WorkflowState.type).
StateType = Literal["triage", "backlog", "unstarted", "started", "completed", "canceled"]
STATE_TYPES: tuple[str, ...] = (
    "triage",
    "backlog",
    "unstarted",
    "started",
    "completed",
    "canceled",
)
# Linear's IssueRelationType values.
RELATION_TYPES: tuple[str, ...] = ("blocks", "duplicate", "related", "similar")
# How a token is sent: a personal API key bare (``Authorization: <key>``), an OAuth access
# token as ``Authorization: Bearer <token>``.
TokenKind = Literal["api_key", "oauth"]

_NAMESPACE = uuid.UUID("6c1f1d0e-5a0b-4f7e-9a55-1e2a4c0ffee0")


def make_id(kind: str, n: int) -> str:
    """A reproducible UUID for the ``n``-th record of ``kind``."""
    return str(uuid.uuid5(_NAMESPACE, f"{kind}:{n}"))


def iso_ms(ms: int | None) -> str | None:
    """Linear's timestamps: UTC with milliseconds (``2026-01-01T00:00:00.000Z``)."""
    if ms is None:
        return None
    moment = datetime.fromtimestamp(ms / 1000, UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"


def parse_ms(text: str) -> int:
    """An ISO 8601 timestamp a client sent (any offset), as epoch milliseconds."""
    moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return round(moment.timestamp() * 1000)


@dataclass(frozen=True)
class Credential:
    """A token the fake accepts: whose it is and how it must be sent."""

    user_id: str
    kind: TokenKind


@dataclass
class Entity:
    id: str
    created_at: int
    updated_at: int
    archived_at: int | None = None


@dataclass
class User(Entity):
    name: str = ""
    email: str = ""
    guest: bool = False
    admin: bool = False
    active: bool = True

    @property
    def display_name(self) -> str:
        return self.email.partition("@")[0] or self.name


@dataclass
class Team(Entity):
    key: str = ""
    name: str = ""
    issue_count: int = 0  # the last issue number given in this team


@dataclass
class Membership(Entity):
    team_id: str = ""
    user_id: str = ""
    owner: bool = False


@dataclass
class State(Entity):
    team_id: str = ""
    name: str = ""
    type: str = "backlog"
    position: float = 0.0
    color: str = "#bec2c8"
    description: str | None = None


@dataclass
class Label(Entity):
    name: str = ""
    team_id: str | None = None  # None: a workspace label
    color: str = "#6e79d6"
    description: str | None = None
    is_group: bool = False
    creator_id: str | None = None


@dataclass
class Project(Entity):
    name: str = ""
    slug_id: str = ""


@dataclass
class Issue(Entity):
    team_id: str = ""
    number: int = 0
    identifier: str = ""
    title: str = ""
    description: str | None = None
    creator_id: str | None = None
    state_id: str = ""
    label_ids: list[str] = field(default_factory=list)
    project_id: str | None = None
    priority: int = 0
    started_at: int | None = None
    completed_at: int | None = None
    canceled_at: int | None = None
    trashed: bool = False


@dataclass
class Relation(Entity):
    type: str = "blocks"
    issue_id: str = ""  # the source: ``issue`` blocks ``related_issue``
    related_issue_id: str = ""


@dataclass
class History(Entity):
    issue_id: str = ""
    actor_id: str | None = None
    added_label_ids: list[str] | None = None
    removed_label_ids: list[str] | None = None
    from_state_id: str | None = None
    to_state_id: str | None = None


@dataclass
class Comment(Entity):
    issue_id: str = ""
    user_id: str | None = None
    body: str = ""
    edited_at: int | None = None

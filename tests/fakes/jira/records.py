"""What the fake Jira keeps: its people, workflow, issues, links, comments and change history,
and the record of each request it answered."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal
from urllib.parse import parse_qsl

from tests.fakes import http

Deployment = Literal["cloud", "data_center"]

# Status categories as Jira has them (id, key, name, colorName): every status belongs to one.
CATEGORIES: dict[str, tuple[int, str, str]] = {
    "new": (2, "To Do", "blue-gray"),
    "indeterminate": (4, "In Progress", "yellow"),
    "done": (3, "Done", "green"),
}

# The project permissions the fake knows (Jira's keys), and who holds them by default: the
# project's group of users. ADMINISTER_PROJECTS is the administrators'.
PROJECT_PERMISSIONS = (
    "BROWSE_PROJECTS",
    "CREATE_ISSUES",
    "EDIT_ISSUES",
    "TRANSITION_ISSUES",
    "RESOLVE_ISSUES",
    "ASSIGN_ISSUES",
    "ASSIGNABLE_USER",
    "LINK_ISSUES",
    "ADD_COMMENTS",
    "EDIT_OWN_COMMENTS",
    "SCHEDULE_ISSUES",
    "ADMINISTER_PROJECTS",
)
GLOBAL_PERMISSIONS = ("ADMINISTER", "USER_PICKER")
USERS_GROUP = "jira-software-users"
ADMINS_GROUP = "jira-administrators"


@dataclass
class User:
    """An account. ``name`` is how tests and Data Center name it (its username); Cloud names it
    by ``account_id`` only. ``time_zone`` is the profile's: JQL dates are read in it and the
    API writes dates with its offset."""

    name: str
    display_name: str
    email: str
    account_id: str
    key: str  # Data Center's user key (JIRAUSER10100)
    time_zone: str = "UTC"
    active: bool = True
    groups: set[str] = field(default_factory=set)
    account_type: str = "atlassian"  # "app" for an app's bot account


@dataclass
class Status:
    id: str
    name: str
    category: str  # a key of CATEGORIES


@dataclass
class Transition:
    """A workflow transition to ``to`` (a status id), from the statuses in ``sources`` (empty:
    a global transition, from any status but its own)."""

    id: str
    name: str
    to: str
    sources: tuple[str, ...] = ()

    def available_from(self, status_id: str) -> bool:
        if not self.sources:
            return status_id != self.to
        return status_id in self.sources


@dataclass
class IssueType:
    id: str
    name: str
    subtask: bool = False
    hierarchy: int = 0


@dataclass
class LinkType:
    id: str
    name: str
    inward: str
    outward: str


@dataclass
class Link:
    """``source`` [type.outward] ``destination``: for Blocks, the source blocks the
    destination (and the destination "is blocked by" the source)."""

    id: str
    type_id: str
    source: str  # issue key
    destination: str


@dataclass
class CommentRecord:
    id: str
    author: str  # user name
    body: Any  # ADF (Cloud) or a wiki-markup string (Data Center), as stored
    created: float
    updated: float


@dataclass
class ChangeItem:
    field: str
    from_id: str | None
    from_string: str | None
    to_id: str | None
    to_string: str | None
    field_id: str | None = None


@dataclass
class ChangeGroup:
    id: str
    author: str
    created: float
    items: list[ChangeItem]


@dataclass
class IssueRecord:
    id: str
    key: str
    summary: str
    description: Any  # None, ADF (Cloud) or a wiki-markup string (Data Center)
    type_id: str
    status_id: str
    reporter: str
    creator: str
    created: float
    updated: float
    labels: list[str] = field(default_factory=list)
    assignee: str | None = None
    resolution: str | None = None
    resolution_date: float | None = None
    comments: list[CommentRecord] = field(default_factory=list)
    history: list[ChangeGroup] = field(default_factory=list)


@dataclass(frozen=True)
class RecordedRequest(http.RecordedRequest):
    """One request as the fake Jira saw it: ``user`` is who it came as (a user name, None for
    no or bad credentials), ``scheme`` how (``basic``, ``bearer`` or ""), ``api`` the REST
    version of its path ("3", "2" or "")."""

    user: str | None = None
    scheme: str = ""
    api: str = ""
    body: Any = None  # the request's parsed JSON body

    @property
    def jql(self) -> str | None:
        """The JQL a search sent (query parameter or body), None for anything else."""
        if isinstance(self.body, dict) and isinstance(self.body.get("jql"), str):
            return str(self.body["jql"])
        found = [v for k, v in parse_qsl(self.query) if k == "jql"]
        return found[0] if found else None

    @property
    def write(self) -> bool:
        return self.method in ("POST", "PUT", "DELETE") and not self.path.endswith(
            ("/search/jql", "/search", "/permissions/check")
        )

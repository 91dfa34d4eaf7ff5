"""The fake Jira's state: one project (``PROJ``), its workflow, issue types and link types, the
site's people and groups, who holds which permission, and the issues with their links,
comments and change history. Every change goes through here, by the REST routes or by the
helpers that play people, and each is written in the issue's history as Jira writes it
(who changed which field from what to what), so a reader can tell who added a label.

Workflows (``workflow=``):

- ``simplified`` (Jira Cloud's default for a new company-managed project): every status has a
  global transition into it, named as the status, available from any other status.
- ``classic``: transitions between given statuses only (To Do -> In Progress -> In Review ->
  Done, back steps, Reopen); a transition not available from the issue's current status is
  refused with Jira's 400.

Time: the site's clock starts at ``EPOCH_START`` and moves one second an event (``advance``
jumps it); ``updated`` is the time of an issue's last change.
"""

from __future__ import annotations

import copy
import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from tests.fakes.clock import EPOCH_START
from tests.fakes.jira.records import (
    ADMINS_GROUP,
    PROJECT_PERMISSIONS,
    USERS_GROUP,
    ChangeGroup,
    ChangeItem,
    CommentRecord,
    Deployment,
    IssueRecord,
    IssueType,
    Link,
    LinkType,
    Status,
    Transition,
    User,
)

Workflow = Literal["simplified", "classic"]

STATUSES = (
    Status("10000", "To Do", "new"),
    Status("3", "In Progress", "indeterminate"),
    Status("10001", "In Review", "indeterminate"),
    Status("10002", "Done", "done"),
)
CLASSIC = (
    Transition("11", "Start Progress", "3", ("10000",)),
    Transition("21", "Stop Progress", "10000", ("3",)),
    Transition("31", "Request Review", "10001", ("3",)),
    Transition("41", "Rework", "3", ("10001",)),
    Transition("51", "Done", "10002", ("3", "10001")),
    Transition("61", "Reopen", "10000", ("10002",)),
)
ISSUE_TYPES = (
    IssueType("10001", "Task"),
    IssueType("10002", "Bug"),
    IssueType("10003", "Story"),
    IssueType("10000", "Epic", hierarchy=1),
    IssueType("10004", "Subtask", subtask=True, hierarchy=-1),
)
LINK_TYPES = (
    LinkType("10000", "Blocks", "is blocked by", "blocks"),
    LinkType("10001", "Cloners", "is cloned by", "clones"),
    LinkType("10002", "Duplicate", "is duplicated by", "duplicates"),
    LinkType("10003", "Relates", "relates to", "relates to"),
)


@dataclass
class Site:
    deployment: Deployment = "cloud"
    project_key: str = "PROJ"
    project_id: str = "10000"
    project_name: str = "Project"
    workflow: Workflow = "simplified"
    clock: float = float(EPOCH_START)
    users: dict[str, User] = field(default_factory=dict)
    groups: dict[str, str] = field(default_factory=dict)  # name -> groupId
    # permission key -> the groups holding it on the project
    scheme: dict[str, set[str]] = field(default_factory=dict)
    issues: dict[str, IssueRecord] = field(default_factory=dict)
    links: list[Link] = field(default_factory=list)
    statuses: list[Status] = field(default_factory=lambda: list(STATUSES))
    transitions: list[Transition] = field(default_factory=list)
    issue_types: list[IssueType] = field(default_factory=lambda: list(ISSUE_TYPES))
    link_types: list[LinkType] = field(default_factory=lambda: list(LINK_TYPES))
    counter: int = 10000
    # Search's eventual consistency: while ``lagging``, what is created or changed is not seen
    # by a JQL search (``unindexed``: key -> the issue as the index last saw it, None: not yet)
    lagging: bool = False
    unindexed: dict[str, IssueRecord | None] = field(default_factory=dict)
    # Told of each change a webhook reports (``hooks.py``): the event, the issue, who, and an
    # update's changelog or the comment created.
    listener: Callable[..., None] | None = None

    def __post_init__(self) -> None:
        for group in (USERS_GROUP, ADMINS_GROUP):
            self.add_group(group)
        for permission in PROJECT_PERMISSIONS:
            holders = {ADMINS_GROUP} if permission == "ADMINISTER_PROJECTS" else {USERS_GROUP}
            self.scheme[permission] = holders | {ADMINS_GROUP}
        if self.workflow == "classic":
            self.transitions = list(CLASSIC)
        else:
            self.transitions = [
                Transition(str(11 + 10 * n), s.name, s.id) for n, s in enumerate(self.statuses)
            ]

    # ------------------------------------------------------------------ time and ids

    def tick(self) -> float:
        self.clock += 1
        return self.clock

    def next_id(self) -> str:
        self.counter += 1
        return str(self.counter)

    # ------------------------------------------------------------------ people

    def add_group(self, name: str) -> str:
        if name not in self.groups:
            digest = hashlib.sha1(name.encode(), usedforsecurity=False).hexdigest()
            self.groups[name] = (
                f"{digest[:8]}-{digest[8:12]}-{digest[12:16]}-{digest[16:20]}-{digest[20:32]}"
            )
        return self.groups[name]

    def add_user(
        self,
        name: str,
        *,
        display_name: str | None = None,
        email: str | None = None,
        groups: tuple[str, ...] = (USERS_GROUP,),
        time_zone: str = "UTC",
        app: bool = False,
    ) -> User:
        if name in self.users:
            raise ValueError(f"there is a user {name!r} already")
        digest = hashlib.sha1(name.encode(), usedforsecurity=False).hexdigest()
        user = User(
            name=name,
            display_name=display_name or name.replace(".", " ").title(),
            email=email or f"{name}@example.com",
            account_id=("557058:" if not app else "") + digest[:24],
            key=f"JIRAUSER{10100 + len(self.users)}",
            time_zone=time_zone,
            account_type="app" if app else "atlassian",
        )
        for group in groups:
            self.add_group(group)
            user.groups.add(group)
        self.users[name] = user
        return user

    def user(self, name: str) -> User:
        found = self.users.get(name)
        if found is None:
            raise ValueError(f"no user {name!r}: the site has {sorted(self.users)}")
        return found

    def by_account(self, account_id: str) -> User | None:
        return next((u for u in self.users.values() if u.account_id == account_id), None)

    def by_username(self, name: str) -> User | None:
        """Data Center's ``username`` (matched ignoring case) or ``key``."""
        folded = name.casefold()
        return next(
            (u for u in self.users.values() if u.name.casefold() == folded or u.key == name), None
        )

    def may(self, name: str | None, permission: str) -> bool:
        """Whether ``name`` holds the project ``permission`` (by a group the scheme names)."""
        if name is None or name not in self.users or not self.users[name].active:
            return False
        return bool(self.users[name].groups & self.scheme.get(permission, set()))

    def is_admin(self, name: str | None) -> bool:
        return (
            name is not None
            and ADMINS_GROUP in self.users.get(name, User("", "", "", "", "")).groups
        )

    # ------------------------------------------------------------------ workflow

    def status(self, status_id: str) -> Status:
        return next(s for s in self.statuses if s.id == status_id)

    def status_named(self, name: str) -> Status | None:
        folded = name.casefold()
        return next((s for s in self.statuses if s.name.casefold() == folded), None)

    def issue_type(self, type_id: str) -> IssueType:
        return next(t for t in self.issue_types if t.id == type_id)

    def link_type(self, *, name: str | None = None, type_id: str | None = None) -> LinkType | None:
        for lt in self.link_types:
            if (name is not None and lt.name.casefold() == name.casefold()) or lt.id == type_id:
                return lt
        return None

    def available(self, issue: IssueRecord) -> list[Transition]:
        return [t for t in self.transitions if t.available_from(issue.status_id)]

    # ------------------------------------------------------------------ issues

    def issue(self, key_or_id: str) -> IssueRecord | None:
        found = self.issues.get(key_or_id.upper())
        if found is None:
            found = next((i for i in self.issues.values() if i.id == key_or_id), None)
        return found

    def create(
        self,
        by: str,
        summary: str,
        description: Any,
        type_id: str,
        labels: list[str],
    ) -> IssueRecord:
        now = self.tick()
        number = len(self.issues) + 1
        issue = IssueRecord(
            id=self.next_id(),
            key=f"{self.project_key}-{number}",
            summary=summary,
            description=description,
            type_id=type_id,
            status_id=self.statuses[0].id,
            reporter=by,
            creator=by,
            created=now,
            updated=now,
            labels=sorted(set(labels)),
        )
        self.issues[issue.key] = issue
        if self.lagging:
            self.unindexed.setdefault(issue.key, None)
        if self.listener is not None:
            self.listener("jira:issue_created", issue, by)
        return issue

    def change(self, issue: IssueRecord, by: str, items: list[ChangeItem]) -> None:
        """One change group in the issue's history (nothing if nothing changed)."""
        if not items:
            return
        self.stale(issue)
        now = self.tick()
        issue.history.append(ChangeGroup(self.next_id(), by, now, items))
        issue.updated = now
        if self.listener is not None:
            self.listener("jira:issue_updated", issue, by, items)

    def set_labels(self, issue: IssueRecord, by: str, labels: list[str]) -> None:
        new = sorted(set(labels))
        if new == issue.labels:
            return
        self.stale(issue)
        item = ChangeItem("labels", None, " ".join(issue.labels), None, " ".join(new), "labels")
        issue.labels = new
        self.change(issue, by, [item])

    def edit(self, issue: IssueRecord, by: str, summary: str | None, description: Any) -> None:
        self.stale(issue)
        items = []
        if summary is not None and summary != issue.summary:
            items.append(ChangeItem("summary", None, issue.summary, None, summary, "summary"))
            issue.summary = summary
        if description is not ... and description != issue.description:
            items.append(ChangeItem("description", None, None, None, None, "description"))
            issue.description = description
        self.change(issue, by, items)

    def move(self, issue: IssueRecord, by: str, transition: Transition) -> None:
        self.stale(issue)
        old, new = self.status(issue.status_id), self.status(transition.to)
        items = [ChangeItem("status", old.id, old.name, new.id, new.name, "status")]
        issue.status_id = new.id
        if new.category == "done" and issue.resolution is None:
            items.append(ChangeItem("resolution", None, None, "10000", "Done", "resolution"))
            issue.resolution = "Done"
        elif new.category != "done" and issue.resolution is not None:
            items.append(ChangeItem("resolution", "10000", "Done", None, None, "resolution"))
            issue.resolution = None
        self.change(issue, by, items)
        issue.resolution_date = issue.updated if issue.resolution else None

    def link(self, by: str, link_type: LinkType, source: IssueRecord, dest: IssueRecord) -> None:
        """``source`` [outward] ``dest`` (a duplicate link is a quiet success, as on Jira)."""
        for known in self.links:
            if (known.type_id, known.source, known.destination) == (
                link_type.id,
                source.key,
                dest.key,
            ):
                return
        self.stale(source)
        self.stale(dest)
        self.links.append(Link(self.next_id(), link_type.id, source.key, dest.key))
        out = f"This issue {link_type.outward} {dest.key}"
        inward = f"This issue {link_type.inward} {source.key}"
        self.change(source, by, [ChangeItem("Link", None, None, dest.key, out)])
        self.change(dest, by, [ChangeItem("Link", None, None, source.key, inward)])

    def comment(self, issue: IssueRecord, by: str, body: Any) -> CommentRecord:
        self.stale(issue)
        now = self.tick()
        record = CommentRecord(self.next_id(), by, body, now, now)
        issue.comments.append(record)
        issue.updated = now
        if self.listener is not None:
            self.listener("comment_created", issue, by, comment=record)
        return record

    def stale(self, issue: IssueRecord) -> None:
        """While search lags, the index keeps ``issue`` as it is now (before a change)."""
        if self.lagging and issue.key not in self.unindexed:
            self.unindexed[issue.key] = copy.deepcopy(issue)

    def indexed(self, issue: IssueRecord) -> IssueRecord | None:
        """``issue`` as JQL search sees it (None: not yet indexed)."""
        if issue.key in self.unindexed:
            return self.unindexed[issue.key]
        return issue

    def links_of(self, key: str) -> list[Link]:
        return [ln for ln in self.links if key in (ln.source, ln.destination)]

    def labels(self) -> list[str]:
        return sorted({label for issue in self.issues.values() for label in issue.labels})

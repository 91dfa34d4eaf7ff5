"""The fake Linear's workspace: its people, teams, workflow states, labels, projects, issues,
relations, history and comments; the lookups every resolver and helper shares. The writes, as
Linear does them, are ``edits.py``'s (``Edits``, which ``Workspace`` builds on).
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable
from typing import TypeVar

from tests.fakes.linear.edits import Edits, slug
from tests.fakes.linear.errors import invalid, not_found
from tests.fakes.linear.records import (
    EPOCH_MS,
    Comment,
    Entity,
    History,
    Issue,
    Label,
    Membership,
    Project,
    Relation,
    State,
    Team,
    User,
    make_id,
)

E = TypeVar("E", bound=Entity)
ORGANIZATION = "acme"  # the workspace's URL key: https://linear.app/acme/...
APP = "https://linear.app"
IDENTIFIER = re.compile(r"([A-Za-z][A-Za-z0-9_]*)-(\d+)")
UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")

# A new team's workflow: (name, type, color), in position order.
DEFAULT_STATES: tuple[tuple[str, str, str], ...] = (
    ("Triage", "triage", "#fc7840"),
    ("Backlog", "backlog", "#bec2c8"),
    ("Todo", "unstarted", "#e2e2e2"),
    ("In Progress", "started", "#f2c94c"),
    ("In Review", "started", "#0f783c"),
    ("Done", "completed", "#5e6ad2"),
    ("Canceled", "canceled", "#95a2b3"),
)


class Workspace(Edits):
    """All of a Linear workspace the fake serves. Not thread-safe: the fake's lock guards it."""

    def __init__(self) -> None:
        self.clock = EPOCH_MS
        self._serial = itertools.count(1)
        self.sync_id = 1000.0  # ``lastSyncId`` of payloads: grows with every write
        self.users: dict[str, User] = {}
        self.teams: dict[str, Team] = {}
        self.memberships: dict[str, Membership] = {}
        self.states: dict[str, State] = {}
        self.labels: dict[str, Label] = {}
        self.projects: dict[str, Project] = {}
        self.issues: dict[str, Issue] = {}
        self.relations: dict[str, Relation] = {}
        self.history: dict[str, History] = {}
        self.comments: dict[str, Comment] = {}

    # ------------------------------------------------------------------ plumbing

    def tick(self) -> int:
        """The next moment (one second after the last event): times are distinct and ordered."""
        self.clock += 1000
        return self.clock

    def new_id(self, kind: str) -> str:
        return make_id(kind, next(self._serial))

    def synced(self) -> float:
        self.sync_id += 1
        return self.sync_id

    def taken(self, entity_id: str) -> bool:
        stores: tuple[dict[str, Entity], ...] = (
            self.users,  # type: ignore[assignment]
            self.teams,  # type: ignore[assignment]
            self.states,  # type: ignore[assignment]
            self.labels,  # type: ignore[assignment]
            self.projects,  # type: ignore[assignment]
            self.issues,  # type: ignore[assignment]
            self.relations,  # type: ignore[assignment]
            self.comments,  # type: ignore[assignment]
        )
        return any(entity_id in store for store in stores)

    def chosen_id(self, kind: str, wanted: str | None) -> str:
        """A client may choose a new entity's id (a UUID v4), as Linear lets it."""
        if wanted is None:
            return self.new_id(kind)
        if not UUID.fullmatch(wanted.lower()):
            raise invalid(
                "Argument Validation Error",
                f"id must be a UUID (v4), not {wanted!r}",
            )
        if self.taken(wanted.lower()):
            raise invalid(
                f"{kind} with id {wanted} already exists",
                f"An entity with the id {wanted} already exists.",
            )
        return wanted.lower()

    # ------------------------------------------------------------------ people and teams

    def add_user(self, name: str, email: str, *, guest: bool = False, admin: bool = False) -> User:
        if any(u.email.casefold() == email.casefold() for u in self.users.values()):
            raise ValueError(f"a user with the email {email} exists already")
        now = self.tick()
        user = User(self.new_id("user"), now, now, None, name, email, guest, admin)
        self.users[user.id] = user
        return user

    def user_by_email(self, email: str) -> User:
        for user in self.users.values():
            if user.email.casefold() == email.casefold():
                return user
        raise ValueError(f"no user with the email {email}")

    def add_team(self, key: str, name: str) -> Team:
        now = self.tick()
        team = Team(self.new_id("team"), now, now, None, key, name)
        self.teams[team.id] = team
        for position, (state_name, state_type, color) in enumerate(DEFAULT_STATES):
            self.add_state(team, state_name, state_type, color=color, position=float(position))
        return team

    def add_state(
        self,
        team: Team,
        name: str,
        type: str,
        *,
        color: str = "#bec2c8",
        position: float | None = None,
    ) -> State:
        now = self.tick()
        if position is None:
            position = max((s.position for s in self.team_states(team)), default=-1.0) + 1
        state = State(self.new_id("state"), now, now, None, team.id, name, type, position, color)
        self.states[state.id] = state
        return state

    def join(self, team: Team, user: User, *, owner: bool = False) -> None:
        if self.is_member(team, user):
            return
        now = self.tick()
        membership = Membership(self.new_id("membership"), now, now, None, team.id, user.id, owner)
        self.memberships[membership.id] = membership

    def leave(self, team: Team, user: User) -> None:
        for key, m in list(self.memberships.items()):
            if m.team_id == team.id and m.user_id == user.id:
                del self.memberships[key]

    def is_member(self, team: Team, user: User) -> bool:
        return any(m.team_id == team.id and m.user_id == user.id for m in self.memberships.values())

    def team_by_key(self, key: str) -> Team:
        for team in self.teams.values():
            if team.key.casefold() == key.casefold():
                return team
        raise ValueError(f"no team {key}")

    def team_states(self, team: Team) -> list[State]:
        return sorted(
            (s for s in self.states.values() if s.team_id == team.id), key=lambda s: s.position
        )

    def can_see(self, user: User, team: Team) -> bool:
        """Members see every (public) team; a guest only the teams they were invited to."""
        return not user.guest or self.is_member(team, user)

    # ------------------------------------------------------------------ lookups

    def issue(self, ref: str) -> Issue:
        """An issue by its id or its identifier (``ENG-12``, any case), as ``issue(id:)``."""
        if ref in self.issues:
            return self.issues[ref]
        found = IDENTIFIER.fullmatch(ref.strip())
        if found:
            key, number = found.group(1).casefold(), int(found.group(2))
            for issue in self.issues.values():
                team = self.teams[issue.team_id]
                if team.key.casefold() == key and issue.number == number:
                    return issue
        raise not_found("Issue")

    def entity(self, store: dict[str, E], ref: str, kind: str) -> E:
        found = store.get(ref)
        if found is None:
            raise not_found(kind)
        return found

    def url(self, issue: Issue) -> str:
        return f"{APP}/{ORGANIZATION}/issue/{issue.identifier}/{slug(issue.title)}"

    def labels_named(self, team: Team, names: Iterable[str]) -> list[Label]:
        """The labels ``names`` of ``team`` (or the workspace's), in order."""
        found = []
        for name in names:
            label = self.find_label(team, name)
            if label is None:
                raise ValueError(f"no label {name!r} in team {team.key}")
            found.append(label)
        return found

    def find_label(self, team: Team, name: str) -> Label | None:
        for label in self.labels.values():
            same = label.name.casefold() == name.casefold()
            if same and label.team_id in (team.id, None) and label.archived_at is None:
                return label
        return None

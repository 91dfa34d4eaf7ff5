"""``FakeLinear``: one Linear workspace on a loopback GraphQL API (``POST /graphql``). Tests
drive it through the provider or plain HTTP and inspect it directly (``issue``, ``comments``,
its request log); helpers play the parts of other people.

Who is who: the workspace ``acme`` has a team ``ENG`` ("Engineering") with Linear's default
workflow (Triage, Backlog, Todo, In Progress, In Review, Done, Canceled); ``cpe@example.com``
("cpe bot", the default token's user) and ``someone@example.com`` ("Sam Teammate", the author
helpers use by default) are members of it; ``guest@example.com`` ("Gus Guest") is a guest
invited to it; ``outsider@example.com`` ("Olly Outsider") is a member of the workspace but of
no team. ``tokens`` maps each accepted token to its user's email; a token starting
``lin_oauth_`` is an OAuth access token (sent as ``Bearer``), any other an API key (sent bare).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from tests.fakes.http import Router, ServedFake
from tests.fakes.linear.hooks import LinearHooks
from tests.fakes.linear.records import Credential, Issue, iso_ms
from tests.fakes.linear.server import LinearCore
from tests.fakes.linear.wire import LinearFault
from tests.fakes.linear.workspace import Workspace

TEAM_KEY = "ENG"
BOT = "cpe@example.com"
TEAMMATE = "someone@example.com"
GUEST = "guest@example.com"
OUTSIDER = "outsider@example.com"
API_KEY = "lin_api_cpe_test_key"
OAUTH_TOKEN = "lin_oauth_cpe_test_token"


class FakeLinear(ServedFake):
    """Start with ``with FakeLinear() as linear:``; ``linear.url`` is the GraphQL endpoint.

    ``root`` is accepted for symmetry with the other fakes (Linear keeps no files); ``tokens``
    maps each accepted token to its user's email (default: ``API_KEY`` and ``OAUTH_TOKEN``,
    both the bot's); ``now`` is the clock the rate limits are judged by."""

    def __init__(
        self,
        root: Path | None = None,
        *,
        tokens: Mapping[str, str] | None = None,
        now: Callable[[], float] = time.time,
    ) -> None:
        self.lock = threading.RLock()
        self.workspace = ws = Workspace()
        self.team_key = TEAM_KEY
        team = ws.add_team(TEAM_KEY, "Engineering")
        self.team_id = team.id
        for name, email, guest in (
            ("cpe bot", BOT, False),
            ("Sam Teammate", TEAMMATE, False),
            ("Gus Guest", GUEST, True),
        ):
            ws.join(team, ws.add_user(name, email, guest=guest))
        ws.add_user("Olly Outsider", OUTSIDER)
        accepted = {}
        for token, email in (tokens or {API_KEY: BOT, OAUTH_TOKEN: BOT}).items():
            kind = "oauth" if token.startswith("lin_oauth_") else "api_key"
            accepted[token] = Credential(self._user(email), kind)
        self.router = Router()
        self.core = LinearCore(self.router, self.lock, ws, accepted, now)
        self.base_url = self.start(self.core)
        self.url = f"{self.base_url}/graphql"
        self.hooks = LinearHooks(self)  # webhooks: ``hooks.add(url, secret)`` (``hooks.py``)
        ws.listener = self.hooks.changed

    def close(self) -> None:
        self.hooks.close()
        super().close()

    # ------------------------------------------------------------------ who is who

    def _user(self, email: str) -> str:
        return self.workspace.user_by_email(email).id

    def add_user(
        self,
        name: str,
        email: str,
        *,
        guest: bool = False,
        admin: bool = False,
        teams: Iterable[str] = (TEAM_KEY,),
    ) -> str:
        """A new person of the workspace, member of ``teams`` (keys); returns their id."""
        with self.lock:
            user = self.workspace.add_user(name, email, guest=guest, admin=admin)
            for key in teams:
                self.workspace.join(self.workspace.team_by_key(key), user)
            return user.id

    def add_token(self, token: str, email: str) -> None:
        """``token`` is accepted from now on as ``email``'s (``lin_oauth_...``: OAuth)."""
        kind = "oauth" if token.startswith("lin_oauth_") else "api_key"
        with self.lock:
            self.core.tokens[token] = Credential(self._user(email), kind)

    def revoke(self, token: str) -> None:
        with self.lock:
            self.core.tokens.pop(token, None)

    def user_id(self, email: str) -> str:
        with self.lock:
            return self._user(email)

    def join(self, email: str, team: str = TEAM_KEY) -> None:
        with self.lock:
            ws = self.workspace
            ws.join(ws.team_by_key(team), ws.user_by_email(email))

    def leave(self, email: str, team: str = TEAM_KEY) -> None:
        with self.lock:
            ws = self.workspace
            ws.leave(ws.team_by_key(team), ws.user_by_email(email))

    def add_team(self, key: str, name: str, *, members: Iterable[str] = (BOT,)) -> str:
        """Another team with Linear's default workflow; returns its id."""
        with self.lock:
            team = self.workspace.add_team(key, name)
            for email in members:
                self.workspace.join(team, self.workspace.user_by_email(email))
            return team.id

    def add_state(self, name: str, type: str, *, team: str = TEAM_KEY) -> str:
        """A workflow state the team adds (``type``: one of Linear's state types)."""
        with self.lock:
            ws = self.workspace
            return ws.add_state(ws.team_by_key(team), name, type).id

    def remove_state(self, name: str, *, team: str = TEAM_KEY) -> None:
        """The team archives its workflow state ``name`` (no issue may be in it)."""
        with self.lock:
            ws = self.workspace
            state = self._state(name, team)
            if any(i.state_id == state.id for i in ws.issues.values()):
                raise ValueError(f"issues are in {name}: move them first")
            state.archived_at = ws.tick()

    def add_project(self, name: str) -> str:
        with self.lock:
            return self.workspace.add_project(name).id

    def create_label(
        self, name: str, *, team: str | None = TEAM_KEY, by: str = TEAMMATE, group: bool = False
    ) -> str:
        """A label of ``team`` (None: a workspace label); returns its id."""
        with self.lock:
            ws = self.workspace
            label = ws.create_label(
                ws.user_by_email(by), name, ws.team_by_key(team) if team else None
            )
            label.is_group = group
            return label.id

    # ------------------------------------------------------------------ acting as someone

    def open_issue(
        self,
        title: str,
        description: str = "",
        *,
        as_user: str = TEAMMATE,
        labels: Iterable[str] = (),
        state: str | None = None,
        project: str | None = None,
        team: str = TEAM_KEY,
    ) -> str:
        """``as_user`` files an issue (no request is made or recorded); ``labels`` are names
        (created in the team when missing), ``state`` a state's name; returns its identifier."""
        with self.lock:
            ws = self.workspace
            the_team = ws.team_by_key(team)
            actor = self._member(as_user, the_team.key)
            found = [
                ws.find_label(the_team, n) or ws.create_label(actor, n, the_team) for n in labels
            ]
            issue = ws.create_issue(
                actor,
                the_team,
                title,
                description or None,
                state=self._state(state, team) if state else None,
                labels=found,
                project=next(p for p in ws.projects.values() if p.name == project)
                if project
                else None,
            )
            return issue.identifier

    def add_label(self, identifier: str, name: str, *, by: str = TEAMMATE) -> None:
        """``by`` adds the label ``name`` (created in the team when missing) to the issue."""
        with self.lock:
            ws = self.workspace
            issue = ws.issue(identifier)
            team = ws.teams[issue.team_id]
            actor = self._member(by, team.key)
            label = ws.find_label(team, name) or ws.create_label(actor, name, team)
            ws.update_issue(actor, issue, label_ids=[*issue.label_ids, label.id])

    def remove_label(self, identifier: str, name: str, *, by: str = TEAMMATE) -> None:
        with self.lock:
            ws = self.workspace
            issue = ws.issue(identifier)
            team = ws.teams[issue.team_id]
            label = ws.find_label(team, name)
            if label is None or label.id not in issue.label_ids:
                raise ValueError(f"{identifier} has no label {name!r}")
            keep = [i for i in issue.label_ids if i != label.id]
            ws.update_issue(self._member(by, team.key), issue, label_ids=keep)

    def move_to_state(self, identifier: str, state: str, *, by: str = TEAMMATE) -> None:
        """``by`` moves the issue to the workflow state named ``state``."""
        with self.lock:
            ws = self.workspace
            issue = ws.issue(identifier)
            team = ws.teams[issue.team_id]
            ws.update_issue(self._member(by, team.key), issue, state=self._state(state, team.key))

    def edit(
        self,
        identifier: str,
        *,
        title: str | None = None,
        description: str | None = None,
        by: str = TEAMMATE,
    ) -> None:
        with self.lock:
            ws = self.workspace
            issue = ws.issue(identifier)
            actor = self._member(by, ws.teams[issue.team_id].key)
            ws.update_issue(actor, issue, title=title, description=description)

    def relate(
        self, blocker: str, blocked: str, type: str = "blocks", *, by: str = TEAMMATE
    ) -> str:
        """``by`` relates two issues (``blocks``: ``blocker`` blocks ``blocked``); returns the
        relation's id."""
        with self.lock:
            ws = self.workspace
            issue, related = ws.issue(blocker), ws.issue(blocked)
            actor = self._member(by, ws.teams[issue.team_id].key)
            return ws.relate(actor, issue, related, type).id

    def unrelate(self, blocker: str, blocked: str, *, by: str = TEAMMATE) -> None:
        with self.lock:
            ws = self.workspace
            a, b = ws.issue(blocker).id, ws.issue(blocked).id
            for relation in list(ws.relations.values()):
                if (relation.issue_id, relation.related_issue_id) == (a, b):
                    ws.unrelate(ws.user_by_email(by), relation)
                    return
            raise ValueError(f"{blocker} and {blocked} are not related")

    def comment(self, identifier: str, body: str, *, by: str = TEAMMATE) -> str:
        """``by`` comments on the issue; returns the comment's id."""
        with self.lock:
            ws = self.workspace
            issue = ws.issue(identifier)
            return ws.comment(self._member(by, ws.teams[issue.team_id].key), issue, body).id

    def archive(self, identifier: str, *, trash: bool = False) -> None:
        with self.lock:
            self.workspace.archive_issue(self.workspace.issue(identifier), trash=trash)

    def _member(self, email: str, team: str) -> Any:
        ws = self.workspace
        user = ws.user_by_email(email)
        if not ws.can_see(user, ws.team_by_key(team)):
            raise ValueError(f"{email} is a guest who cannot see the team {team}")
        return user

    def _state(self, name: str, team: str) -> Any:
        ws = self.workspace
        for state in ws.team_states(ws.team_by_key(team)):
            if state.name.casefold() == name.casefold() and state.archived_at is None:
                return state
        raise ValueError(f"team {team} has no workflow state {name!r}")

    # ------------------------------------------------------------------ looking

    def issue(self, identifier: str) -> dict[str, Any]:
        """The stored issue, for assertions: names rather than ids."""
        with self.lock:
            ws = self.workspace
            issue = ws.issue(identifier)
            state = ws.states[issue.state_id]
            return {
                "id": issue.id,
                "identifier": issue.identifier,
                "title": issue.title,
                "description": issue.description,
                "state": state.name,
                "state_type": state.type,
                "labels": sorted(ws.labels[i].name for i in issue.label_ids),
                "creator": ws.users[issue.creator_id].email if issue.creator_id else None,
                "blocks": sorted(self._related(issue, outward=True)),
                "blocked_by": sorted(self._related(issue, outward=False)),
                "created_at": iso_ms(issue.created_at),
                "updated_at": iso_ms(issue.updated_at),
                "archived": issue.archived_at is not None,
                "trashed": issue.trashed,
            }

    def _related(self, issue: Issue, *, outward: bool) -> list[str]:
        ws = self.workspace
        found = []
        for rel in ws.relations.values():
            if rel.type != "blocks":
                continue
            if outward and rel.issue_id == issue.id:
                found.append(ws.issues[rel.related_issue_id].identifier)
            elif not outward and rel.related_issue_id == issue.id:
                found.append(ws.issues[rel.issue_id].identifier)
        return found

    def identifiers(self) -> list[str]:
        """Every issue's identifier (archived ones too), oldest first."""
        with self.lock:
            return [i.identifier for i in self.workspace.issues.values()]

    def comments(self, identifier: str) -> list[tuple[str, str]]:
        """The issue's comments as ``(author email, body)``, oldest first."""
        with self.lock:
            ws = self.workspace
            issue = ws.issue(identifier)
            return [
                (ws.users[c.user_id].email if c.user_id else "", c.body)
                for c in ws.comments.values()
                if c.issue_id == issue.id
            ]

    def operations(self) -> list[str]:
        """The operation names (or else the first root field) of the requests so far."""
        return [r.operation_name or (r.fields[0] if r.fields else "") for r in self.requests]

    # ------------------------------------------------------------------ limits and faults

    def rate_limit(self, *, requests: int | None = None, complexity: int | None = None) -> None:
        """New hourly limits (the buckets start full at them)."""
        with self.lock:
            if requests is not None:
                self.core.request_limit = requests
            if complexity is not None:
                self.core.complexity_limit = complexity
            self.core.budgets.clear()

    def ratelimit_next(self, times: int = 1, *, seconds: float | None = None) -> None:
        """The next ``times`` requests get Linear's RATELIMITED answer, whatever the buckets:
        the buckets' resets as they are, or with ``seconds`` a ``Retry-After`` of that many
        seconds (and the requests' reset no sooner)."""
        with self.lock:
            self.core.throttled += times
            self.core.throttle_seconds = seconds

    def ratelimit_operation(
        self, operation: str, *, times: int = 1, seconds: int = 1
    ) -> LinearFault:
        """The next ``times`` requests whose operation name or a root field matches
        ``operation`` (a regex) get Linear's RATELIMITED answer (nothing done), announcing a
        wait of ``seconds``."""
        fault = LinearFault(
            "POST",
            r"^/graphql$",
            400,
            times,
            retry_after=seconds,
            message="RATELIMITED",
            operation=operation,
        )
        self.fail(fault)
        return fault

    def fail_operation(
        self,
        operation: str,
        status: int = 502,
        *,
        times: int = 1,
        apply_first: bool = False,
        drop: bool = False,
    ) -> LinearFault:
        """The next ``times`` requests whose operation name or root field matches
        ``operation`` (a regex) fail with ``status`` (or ``drop``: the connection closes);
        ``apply_first``: the write is done, then its answer lost."""
        fault = LinearFault(
            "POST", r"^/graphql$", status, times, apply_first, drop=drop, operation=operation
        )
        self.fail(fault)
        return fault

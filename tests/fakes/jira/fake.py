"""``FakeJira``: one project's issues on a loopback Jira, Cloud (``/rest/api/3``, ADF, account
ids, Basic email:API-token) or Data Center (``/rest/api/2``, wiki markup, usernames, Bearer
personal access tokens). Tests drive it through HTTP (the provider, or plain httpx) and look at
it directly (``issue``, ``requests``); helpers play the people around the project.

Who is who: ``cpe-bot`` (the default token's user) and ``alice`` (the teammate the helpers act
as by default; also in the ``developers`` group) and ``bob`` (a user of the site outside it)
are in ``jira-software-users``, which the project's permission scheme gives every project
permission but *Administer projects*; ``admin`` is in ``jira-administrators`` too (*Administer
Jira*). A helper acting as someone does only what Jira lets that person do, and refuses the
rest with a ValueError.
"""

from __future__ import annotations

import base64
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from tests.fakes.http import Handler, Router, ServedFake
from tests.fakes.jira import routes_issues, routes_meta, routes_search
from tests.fakes.jira.hooks import JiraHooks
from tests.fakes.jira.payloads import View, jira_date
from tests.fakes.jira.records import (
    ADMINS_GROUP,
    CATEGORIES,
    PROJECT_PERMISSIONS,
    USERS_GROUP,
    Deployment,
    IssueRecord,
    Status,
    Transition,
)
from tests.fakes.jira.richtext import adf, text_of
from tests.fakes.jira.server import Call, JiraCore
from tests.fakes.jira.site import Site, Workflow

BOT = "cpe-bot"
TEAMMATE = "alice"
OUTSIDER = "bob"
ADMIN = "admin"
DEVELOPERS = "developers"


class FakeJira(ServedFake):
    """Start with ``with FakeJira() as jira:``; ``jira.base_url`` is the site's root.

    ``tokens`` maps each accepted API token (Cloud) or personal access token (Data Center) to
    its user's name (a user it names that does not exist yet is made, in the users group).
    ``now``: the clock the rate limit's window is judged by. ``workflow``: ``simplified``
    (global transitions) or ``classic`` (see ``site.py``)."""

    def __init__(
        self,
        root: Path | None = None,
        *,
        deployment: Deployment = "cloud",
        tokens: Mapping[str, str] | None = None,
        now: Callable[[], float] = time.time,
        workflow: Workflow = "simplified",
        project_key: str = "PROJ",
    ) -> None:
        if deployment not in ("cloud", "data_center"):
            raise ValueError(f"deployment {deployment!r}: 'cloud' or 'data_center'")
        self.root = root
        self.lock = threading.RLock()
        self.router = Router()
        self.site = Site(deployment=deployment, project_key=project_key, workflow=workflow)
        self.project_key = project_key
        self.deployment = deployment
        self.api = "3" if deployment == "cloud" else "2"
        self.api_prefix = f"/rest/api/{self.api}"
        self.site.add_user(BOT, display_name="cpe bot")
        self.site.add_user(TEAMMATE, display_name="Alice Example", groups=(USERS_GROUP, DEVELOPERS))
        self.site.add_user(OUTSIDER, display_name="Bob Outside")
        self.site.add_user(ADMIN, display_name="Site Admin", groups=(USERS_GROUP, ADMINS_GROUP))
        self.tokens = dict(tokens or {"test-token": BOT})
        for name in self.tokens.values():
            if name not in self.site.users:
                self.site.add_user(name)
        for module in (routes_meta, routes_issues, routes_search):
            module.register(self)
        self.core = JiraCore(self.router, self.site, self.tokens, self.lock, now)
        self.base_url = self.start(self.core)
        self.hooks = JiraHooks(self)  # admin webhooks: ``hooks.add(url, secret)``
        self.site.listener = self.hooks.changed

    def close(self) -> None:
        self.hooks.close()
        super().close()

    def route(self, method: str, pattern: str, handler: Handler, op: str) -> None:
        self.router.add(method, pattern, handler, op)

    def view(self, call: Call | None = None, *, as_user: str | None = None) -> View:
        who = as_user or (call.user if call is not None else None)
        zone = self.site.users[who].time_zone if who in self.site.users else "UTC"
        return View(self.site, self.base_url, self.api, zone)

    # ------------------------------------------------------------------ for clients

    @property
    def rest_url(self) -> str:
        return f"{self.base_url}{self.api_prefix}"

    def email(self, name: str) -> str:
        with self.lock:
            return self.site.user(name).email

    def account_id(self, name: str) -> str:
        with self.lock:
            return self.site.user(name).account_id

    def auth_header(self, token: str = "test-token") -> dict[str, str]:
        """The ``Authorization`` header a client sends with ``token``: Cloud's Basic
        ``email:token`` (the email of the token's user), Data Center's Bearer."""
        if self.deployment == "data_center":
            return {"Authorization": f"Bearer {token}"}
        user = self.tokens.get(token)
        email = self.email(user) if user else "nobody@example.com"
        raw = base64.b64encode(f"{email}:{token}".encode()).decode()
        return {"Authorization": f"Basic {raw}"}

    def rate_limit(self, limit: int) -> None:
        """``limit`` requests a minute from now on; those past it in a window get a 429."""
        with self.lock:
            self.core.rate.limit = limit

    def lag_search(self) -> None:
        """From now on JQL search lags: what is created or changed is matched as it was
        before (a new issue not at all) until ``catch_up``, as Jira's eventually consistent
        search may (a search's ``reconcileIssues`` sees the issues it names as they are)."""
        with self.lock:
            self.site.lagging = True

    def catch_up(self) -> None:
        """The search index catches up with every change, and lags no more."""
        with self.lock:
            self.site.lagging = False
            self.site.unindexed.clear()

    def advance(self, seconds: float) -> None:
        """The site's clock jumps ``seconds`` (what happens next is that much later)."""
        with self.lock:
            self.site.clock += seconds

    # ------------------------------------------------------------------ people and rules

    def add_user(
        self,
        name: str,
        *,
        groups: Iterable[str] = (USERS_GROUP,),
        time_zone: str = "UTC",
        email: str | None = None,
        display_name: str | None = None,
    ) -> str:
        """An account ``name`` in ``groups``; returns its account id (Cloud) or name (DC)."""
        with self.lock:
            user = self.site.add_user(
                name,
                groups=tuple(groups),
                time_zone=time_zone,
                email=email,
                display_name=display_name,
            )
            return user.account_id if self.deployment == "cloud" else user.name

    def add_to_group(self, name: str, group: str) -> None:
        with self.lock:
            self.site.add_group(group)
            self.site.user(name).groups.add(group)

    def remove_from_group(self, name: str, group: str) -> None:
        with self.lock:
            self.site.user(name).groups.discard(group)

    def deactivate(self, name: str) -> None:
        with self.lock:
            self.site.user(name).active = False

    def grant(self, permission: str, group: str) -> None:
        """The project's permission scheme gives ``permission`` to ``group`` too."""
        with self.lock:
            self._permission(permission)
            self.site.add_group(group)
            self.site.scheme[permission].add(group)

    def revoke(self, permission: str, group: str) -> None:
        with self.lock:
            self._permission(permission)
            self.site.scheme[permission].discard(group)

    def _permission(self, permission: str) -> None:
        if permission not in PROJECT_PERMISSIONS:
            raise ValueError(f"no project permission {permission!r}: {PROJECT_PERMISSIONS}")

    def add_status(self, name: str, category: str) -> str:
        """A status in the workflow (``category``: new, indeterminate or done); returns its
        id. In the simplified workflow it gets its global transition."""
        with self.lock:
            if category not in CATEGORIES:
                raise ValueError(f"no status category {category!r}: {sorted(CATEGORIES)}")
            status = Status(str(10003 + len(self.site.statuses)), name, category)
            self.site.statuses.append(status)
            if self.site.workflow == "simplified":
                number = 11 + 10 * len(self.site.transitions)
                self.site.transitions.append(Transition(str(number), name, status.id))
            return status.id

    def add_transition(self, name: str, to: str, sources: Iterable[str] = ()) -> str:
        """A transition named ``name`` into the status named ``to`` from the statuses named
        in ``sources`` (none: global); returns its id."""
        with self.lock:
            target = self._status(to)
            ids = tuple(self._status(s).id for s in sources)
            number = str(11 + 10 * (len(self.site.transitions) + 10))
            self.site.transitions.append(Transition(number, name, target.id, ids))
            return number

    def _status(self, name: str) -> Status:
        found = self.site.status_named(name)
        if found is None:
            names = [s.name for s in self.site.statuses]
            raise ValueError(f"no status {name!r} in the workflow: {names}")
        return found

    # ------------------------------------------------------------------ acting as someone

    def _require(self, who: str, permission: str, doing: str) -> None:
        if not self.site.may(who, permission):
            raise ValueError(f"{who} cannot {doing} on Jira: that takes {permission}")

    def _rich(self, text: str | dict[str, Any]) -> Any:
        if isinstance(text, dict) or self.deployment == "data_center":
            return text
        return adf(text)

    def open_issue(
        self,
        title: str,
        description: str | dict[str, Any] = "",
        *,
        by: str = TEAMMATE,
        labels: Iterable[str] = (),
        issue_type: str = "Task",
    ) -> str:
        """``by`` creates an issue (no request is made or recorded); returns its key. Plain
        text becomes an ADF document on Cloud and stays wiki markup on Data Center."""
        with self.lock:
            self._require(by, "CREATE_ISSUES", "create issues")
            kind = next((t for t in self.site.issue_types if t.name == issue_type), None)
            if kind is None:
                raise ValueError(f"no issue type {issue_type!r}")
            for label in labels:
                if any(ch.isspace() for ch in label):
                    raise ValueError(f"Jira refuses the label {label!r}: labels hold no spaces")
            body = self._rich(description) if description else None
            return self.site.create(by, title, body, kind.id, list(labels)).key

    def add_label(self, key: str, label: str, *, by: str = TEAMMATE) -> None:
        with self.lock:
            issue = self._issue(key)
            self._require(by, "EDIT_ISSUES", "edit issues")
            if any(ch.isspace() for ch in label):
                raise ValueError(f"Jira refuses the label {label!r}: labels hold no spaces")
            self.site.set_labels(issue, by, [*issue.labels, label])

    def remove_label(self, key: str, label: str, *, by: str = TEAMMATE) -> None:
        with self.lock:
            issue = self._issue(key)
            self._require(by, "EDIT_ISSUES", "edit issues")
            if label not in issue.labels:
                raise ValueError(f"{key} has no label {label!r}")
            self.site.set_labels(issue, by, [x for x in issue.labels if x != label])

    def edit(
        self,
        key: str,
        *,
        by: str = TEAMMATE,
        summary: str | None = None,
        description: str | dict[str, Any] | None = None,
    ) -> None:
        with self.lock:
            issue = self._issue(key)
            self._require(by, "EDIT_ISSUES", "edit issues")
            body = ... if description is None else self._rich(description)
            self.site.edit(issue, by, summary, body)

    def transition(self, key: str, status: str, *, by: str = TEAMMATE) -> None:
        """``by`` moves issue ``key`` to the status named ``status`` through a transition
        available from where it is (a ValueError naming those otherwise)."""
        with self.lock:
            issue = self._issue(key)
            self._require(by, "TRANSITION_ISSUES", "transition issues")
            target = self._status(status)
            available = self.site.available(issue)
            chosen = next((t for t in available if t.to == target.id), None)
            if chosen is None:
                names = [f"{t.name} -> {self.site.status(t.to).name}" for t in available]
                raise ValueError(f"no transition from {self.status_of(key)} to {status}: {names}")
            self.site.move(issue, by, chosen)

    def link(self, blocker: str, blocked: str, *, by: str = TEAMMATE, kind: str = "Blocks") -> None:
        """``by`` records that ``blocker`` [blocks] ``blocked`` (another ``kind``'s outward
        description likewise)."""
        with self.lock:
            source, dest = self._issue(blocker), self._issue(blocked)
            self._require(by, "LINK_ISSUES", "link issues")
            link_type = self.site.link_type(name=kind)
            if link_type is None:
                raise ValueError(f"no issue link type {kind!r}")
            self.site.link(by, link_type, source, dest)

    def comment(self, key: str, body: str | dict[str, Any], *, by: str = TEAMMATE) -> str:
        """``by`` comments on ``key``; returns the comment's id."""
        with self.lock:
            issue = self._issue(key)
            self._require(by, "ADD_COMMENTS", "comment")
            return self.site.comment(issue, by, self._rich(body)).id

    def delete_issue(self, key: str, *, by: str = ADMIN) -> None:
        """Someone deletes ``key`` (and its links): it is gone, as on Jira."""
        with self.lock:
            issue = self._issue(key)
            self.hooks.changed("jira:issue_deleted", issue, by)
            del self.site.issues[issue.key]
            self.site.links = [
                ln for ln in self.site.links if issue.key not in (ln.source, ln.destination)
            ]

    # ------------------------------------------------------------------ looking

    def _issue(self, key: str) -> IssueRecord:
        found = self.site.issue(key)
        if found is None:
            raise ValueError(f"no issue {key}")
        return found

    def status_of(self, key: str) -> str:
        with self.lock:
            return self.site.status(self._issue(key).status_id).name

    def issue_keys(self) -> list[str]:
        with self.lock:
            return list(self.site.issues)

    def issue(self, key: str) -> dict[str, Any]:
        """The stored issue, for assertions: its fields, the description's and comments' text,
        its blockers (``blocked_by``) and what it blocks (``blocks``), its history."""
        with self.lock:
            issue = self._issue(key)
            status = self.site.status(issue.status_id)
            blocks = self.site.link_type(name="Blocks")
            assert blocks is not None
            mine = [ln for ln in self.site.links if ln.type_id == blocks.id]
            return {
                "id": issue.id,
                "key": issue.key,
                "summary": issue.summary,
                "description": issue.description,
                "text": text_of(issue.description),
                "status": status.name,
                "category": status.category,
                "type": self.site.issue_type(issue.type_id).name,
                "labels": list(issue.labels),
                "reporter": issue.reporter,
                "resolution": issue.resolution,
                "updated": jira_date(issue.updated),
                "blocked_by": sorted(ln.source for ln in mine if ln.destination == issue.key),
                "blocks": sorted(ln.destination for ln in mine if ln.source == issue.key),
                "comments": [
                    {"id": c.id, "author": c.author, "body": c.body, "text": text_of(c.body)}
                    for c in issue.comments
                ],
                "history": [
                    {
                        "author": g.author,
                        "items": [(i.field, i.from_string, i.to_string) for i in g.items],
                    }
                    for g in issue.history
                ],
            }

"""The provider's picture of the issues the JQL selects, kept current with few requests.

The first sync, and every ``full_resync_cycles``-th, lists the issues not done (``(<jql>) AND
statusCategory != Done``): deleted issues, and issues that no longer match, which no search
for changes reports, drop out then; a known issue not listed is asked for once by key (done
meanwhile, or gone). In between, a sync asks only for what changed: ``(<jql>) AND updated >=
"<the newest update seen, less a minute>"``. JQL dates have minute precision and are read in
the time zone of cpe's Jira user (``/myself``'s ``timeZone``), so the bound is written there,
and the minute's overlap makes an issue updated in the same minute as the newest seen listed
again (harmlessly) rather than missed. An idle poll is one request.

Blockers are the issue's links of type ``blocks_link`` whose other side is inward ("is blocked
by" it). A link carries its blocker's status: a blocker that is no listed issue (another
project, or left out by the JQL) blocks while that status is not done, as last read with the
blocked issue (a change of the blocker alone does not touch the blocked issue's ``updated``:
it is read again at the next full sync).
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from adapters.providers.jira import bodies
from adapters.providers.jira.api import JiraApi, Json, person_id, person_name
from adapters.providers.jira.statuses import JiraStatus, jira_status
from domain.errors import NotFoundError

log = logging.getLogger(__name__)

EPOCH = datetime.fromtimestamp(0, UTC)
OVERLAP = timedelta(minutes=1)
RECENT_DAYS = 7  # how far back a lost create is looked for outside the JQL
_ORDER = re.compile(r"ORDER\s+BY\s", re.IGNORECASE)
_KEY = re.compile(r"^[A-Z][A-Z0-9_]*-[1-9][0-9]*$")


def is_key(value: str) -> bool:
    return _KEY.match(value) is not None


@dataclass(frozen=True)
class IssueView:
    key: str
    title: str
    body: str  # Markdown, without cpe's key line
    token: str | None  # the idempotency key token it carries
    status: JiraStatus
    labels: tuple[str, ...]
    updated: datetime
    version: str  # ``updated`` as Jira wrote it
    creator_id: str | None = None
    creator: str | None = None
    blockers: tuple[str, ...] = ()
    done_blockers: frozenset[str] = frozenset()
    issue_type: str = ""


def parse_time(value: object) -> datetime:
    """Jira's ``2026-11-29T12:00:00.000+0000`` (or ISO 8601) as an aware datetime."""
    if not isinstance(value, str) or not value:
        return EPOCH
    for form in ("%Y-%m-%dT%H:%M:%S.%f%z", "%Y-%m-%dT%H:%M:%S%z"):
        try:
            return datetime.strptime(value, form)
        except ValueError:
            continue
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return EPOCH
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def split_jql(jql: str) -> tuple[str, str]:
    """(the condition, `` ORDER BY ...`` or ""): the last ORDER BY outside a quoted string."""
    quote: str | None = None
    cut = -1
    for at, char in enumerate(jql):
        if quote is not None:
            if char == "\\":
                continue
            if char == quote and (at == 0 or jql[at - 1] != "\\"):
                quote = None
        elif char in "\"'":
            quote = char
        elif (at == 0 or jql[at - 1].isspace()) and _ORDER.match(jql, at):
            cut = at
    if cut < 0:
        return jql.strip(), ""
    return jql[:cut].strip(), " " + jql[cut:].strip()


def and_jql(where: str, clause: str) -> str:
    return f"({where}) AND {clause}" if where else clause


def zone_of(myself: Json) -> ZoneInfo | None:
    name = myself.get("timeZone")
    if not isinstance(name, str) or not name:
        return None
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        log.warning("Jira's time zone %r is unknown here: JQL dates are written in UTC", name)
        return None


def jql_time(moment: datetime, zone: ZoneInfo | None) -> str:
    """``moment`` as JQL reads a date: ``"yyyy-MM-dd HH:mm"`` in the user's time zone."""
    return moment.astimezone(zone or UTC).strftime("%Y-%m-%d %H:%M")


class IssueIndex:
    def __init__(
        self,
        api: JiraApi,
        *,
        blocks_link: str,
        zone: ZoneInfo | None,
        full_resync_cycles: int,
        page_size: int,
    ) -> None:
        self._api = api
        self._blocks = blocks_link.casefold()
        self._zone = zone
        self._full_every = full_resync_cycles
        self._size = page_size
        self._where, self._order = split_jql(api.settings.search_jql)
        self._lock = threading.RLock()
        self._issues: dict[str, IssueView] = {}
        self._since: datetime | None = None
        self._syncs = 0

    # ------------------------------------------------------------------ reading

    def sync(self) -> list[IssueView]:
        with self._lock:
            if self._since is None or self._syncs % self._full_every == 0:
                self._full()
            else:
                self._incremental()
            self._syncs += 1
            return list(self._issues.values())

    def get(self, key: str) -> IssueView:
        """One issue, fresh from Jira; recorded when the index holds it already (only a search
        says which issues the JQL selects: one cpe just made is listed by the next poll)."""
        view = self.view(self._api.get_issue(key))
        with self._lock:
            if key in self._issues:
                self._issues[key] = view
        return view

    def made(self, view: IssueView) -> None:
        """Record an issue cpe made, when the JQL selects it: the project's issues by default,
        else as one search of it says."""
        if self._api.settings.jql is not None:
            issues, _ = self._api.search(and_jql(self._where, f"key = {view.key}"), None, 1)
            if not issues:
                return
        with self._lock:
            self._issues[view.key] = view

    def known(self, key: str) -> IssueView | None:
        with self._lock:
            return self._issues.get(key)

    def listed(self) -> set[str]:
        with self._lock:
            return set(self._issues)

    def find_key(
        self, token: str, made_by: Callable[[IssueView], bool] = lambda view: True
    ) -> IssueView | None:
        """The issue carrying the key ``token``, after a sync (so a lost write is found); only
        one ``made_by`` accepts (anyone can copy a key line into an issue they file). A JQL of
        one's own may leave out what cpe made: then the project's issues made in the last week
        are looked through too (one more search)."""
        with self._lock:
            self.sync()
            for view in sorted(self._issues.values(), key=_order):
                if view.token == token and made_by(view):
                    return view
            if self._api.settings.jql is None:
                return None
            project = self._api.settings.project
            jql = f"project = {project} AND created >= -{RECENT_DAYS}d ORDER BY created DESC"
            issues, _ = self._api.search(jql, None, self._size)
            for issue in issues:
                view = self.view(issue)
                if view.token == token and made_by(view):
                    return view
        return None

    def note(self, issue: Json) -> IssueView:
        """Record an issue a search or a read returned."""
        view = self.view(issue)
        with self._lock:
            self._issues[view.key] = view
        return view

    def view(self, issue: Json) -> IssueView:
        fields: Any = issue.get("fields") or {}
        body, token = bodies.from_jira(fields.get("description"))
        blockers: list[str] = []
        done: set[str] = set()
        for link in fields.get("issuelinks") or []:
            if not isinstance(link, dict):
                continue
            kind: Any = link.get("type") or {}
            other: Any = link.get("inwardIssue")
            if str(kind.get("name") or "").casefold() != self._blocks or not isinstance(
                other, dict
            ):
                continue
            key = other.get("key")
            if not isinstance(key, str):
                continue
            blockers.append(key)
            linked: Any = other.get("fields") or {}
            if jira_status(linked.get("status")).done:
                done.add(key)
        creator = fields.get("creator") or fields.get("reporter")
        issue_type: Any = fields.get("issuetype") or {}
        return IssueView(
            key=str(issue["key"]),
            title=str(fields.get("summary") or ""),
            body=body,
            token=token,
            status=jira_status(fields.get("status")),
            labels=tuple(str(n) for n in fields.get("labels") or [] if isinstance(n, str)),
            updated=parse_time(fields.get("updated")),
            version=str(fields.get("updated") or ""),
            creator_id=person_id(creator),
            creator=person_name(creator),
            blockers=tuple(dict.fromkeys(blockers)),
            done_blockers=frozenset(done),
            issue_type=str(issue_type.get("name") or "") if isinstance(issue_type, dict) else "",
        )

    def open_blockers(self, view: IssueView) -> tuple[str, ...]:
        """``view``'s blockers, less those that are no listed issue and are done as linked."""
        with self._lock:
            return tuple(
                b for b in view.blockers if b in self._issues or b not in view.done_blockers
            )

    # ------------------------------------------------------------------ syncing

    def _full(self) -> None:
        known_open = {k for k, v in self._issues.items() if not v.status.done}
        self._issues = {k: v for k, v in self._issues.items() if v.status.done}
        jql = and_jql(self._where, "statusCategory != Done") + (self._order or " ORDER BY key ASC")
        for issue in self._api.search_all(jql, self._size):
            self.note(issue)
        # Known open and not listed now: done meanwhile (kept, as done), or gone: deleted, or
        # no longer selected by the JQL. Asked one by one: a JQL ``key in (...)`` naming a
        # deleted issue is refused whole.
        for key in sorted(known_open - set(self._issues), key=_key_order):
            try:
                view = self.view(self._api.get_issue(key))
            except NotFoundError:
                continue
            if view.status.done:
                self._issues[key] = view
        stamps = [v.updated for v in self._issues.values()]
        self._since = max(stamps) if stamps else EPOCH

    def _incremental(self) -> None:
        assert self._since is not None
        since = self._since
        bound = jql_time(max(since - OVERLAP, EPOCH), self._zone)
        jql = and_jql(self._where, f'updated >= "{bound}"') + " ORDER BY updated ASC"
        newest = since
        for issue in self._api.search_all(jql, self._size):
            newest = max(newest, self.note(issue).updated)
        self._since = newest


def _key_order(key: str) -> tuple[str, int]:
    project, _, number = key.rpartition("-")
    return project, int(number) if number.isdigit() else 0


def _order(view: IssueView) -> tuple[str, int]:
    return _key_order(view.key)

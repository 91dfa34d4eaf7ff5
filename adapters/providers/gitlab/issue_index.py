"""The provider's picture of the project's issues, kept current with few requests.

The first sync lists the open issues. After that, each sync asks only for issues updated since
a watermark (``state=all&updated_after=…``, oldest first), with the ETag of the last answer, so
an unchanged page is not parsed again. The watermark stays put until the window holds a page of
changes (GitLab's ``updated_after`` is inclusive: an issue at the watermark is listed again,
harmlessly). Every ``full_resync_cycles`` syncs the index is rebuilt from the open issues
(deleted or moved issues, which no incremental listing reports). Closed issues stay known (as
``done``) once seen, and a closed blocker an open issue names is fetched once, so its dependents
unblock.

Blockers are "Blocked by #N" lines in the description and, where GitLab has them (``blockers``
``auto`` or ``links``), the issue's links of type ``is_blocked_by``. Links are read when an
issue is first seen or has changed (a new link adds a system note, which moves the issue's
``updated_at``), and at each full resync. A blocker in another project (``group/project#12``)
is no work item: its state is read on each sync, and once it is closed it no longer blocks.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from adapters.providers import markers
from adapters.providers.gitlab.api import PER_PAGE, GitLabApi, Json
from domain.errors import NotFoundError, ProviderError

log = logging.getLogger(__name__)

EPOCH = datetime.fromtimestamp(0, UTC)
_WEB_ISSUE = re.compile(r"^https?://[^/]+/(.+?)/(?:-/)?(?:issues|work_items)/(\d+)")


@dataclass(frozen=True)
class IssueView:
    iid: int
    id: int
    title: str
    body: str
    closed: bool
    labels: tuple[str, ...]
    updated_at: datetime
    author_id: int | None = None
    author: str | None = None
    body_blockers: tuple[str, ...] = ()
    link_blockers: tuple[str, ...] = ()
    links_read: bool = False
    closed_links: frozenset[str] = field(default_factory=frozenset)
    """Blockers of another project, linked here, that the link says are closed."""

    @property
    def blocked_by(self) -> tuple[str, ...]:
        """Description lines first, then links the description does not name."""
        return tuple(dict.fromkeys([*self.body_blockers, *self.link_blockers]))


def parse_time(value: object) -> datetime:
    if not isinstance(value, str) or not value:
        return EPOCH
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return EPOCH
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def _path_of(issue: Json) -> str | None:
    """The ``group/project`` an issue (as a link lists it) belongs to."""
    references = issue.get("references")
    if isinstance(references, dict) and isinstance(references.get("full"), str):
        path, _, _ = str(references["full"]).rpartition("#")
        if path:
            return path
    found = _WEB_ISSUE.match(str(issue.get("web_url") or ""))
    return found.group(1) if found else None


class IssueIndex:
    def __init__(
        self, api: GitLabApi, full_resync_cycles: int, *, links: Callable[[], bool]
    ) -> None:
        self._api = api
        self._here = api.settings.project
        self._full_every = full_resync_cycles
        self._links = links  # whether links are read (``blockers`` auto or links)
        self._lock = threading.RLock()
        self._issues: dict[int, IssueView] = {}
        self._absent: set[int] = set()  # iids named as blockers that are no issue
        self._foreign_closed: dict[str, bool] = {}  # other projects' blockers: closed?
        self._since: datetime | None = None
        self._etags: dict[int, tuple[str, int]] = {}  # page -> (ETag applied, issues on it)
        self._syncs = 0
        self._full_sync = False

    # ------------------------------------------------------------------ reading

    def sync(self) -> list[IssueView]:
        with self._lock:
            if self._since is None or self._syncs % self._full_every == 0:
                self._full()
            else:
                self._incremental()
            self._syncs += 1
            self._fetch_missing_blockers()
            self._read_foreign_blockers()
            return list(self._issues.values())

    def open_blockers(self, view: IssueView) -> tuple[str, ...]:
        """``view``'s blockers less those of other projects that are closed."""
        with self._lock:
            return tuple(
                b
                for b in view.blocked_by
                if b not in view.closed_links and not self._foreign_closed.get(b, False)
            )

    def get(self, iid: int, *, links: bool | None = None) -> IssueView:
        """One issue, fresh from GitLab, recorded in the index; its links read afresh when
        ``links``, else as ``note`` decides (when the issue changed)."""
        return self.note(self._api.get_issue(iid), links=links)

    def known(self, iid: int) -> IssueView | None:
        with self._lock:
            return self._issues.get(iid)

    def find_key(
        self, key: str, made_by: Callable[[IssueView], bool] = lambda view: True
    ) -> IssueView | None:
        """The issue whose description carries ``key``, after a sync (so a lost write is
        found); only one ``made_by`` accepts (anyone can copy a key into an issue they file)."""
        with self._lock:
            self.sync()
            for view in sorted(self._issues.values(), key=lambda v: v.iid):
                if markers.has_key(view.body, key) and made_by(view):
                    return view
        return None

    def note(self, issue: Json, *, links: bool | None = None) -> IssueView:
        """Record an issue a read or a write returned. Its links are read when ``links`` says
        so, or (None) when the issue is open and new or changed since it was last read; else
        the links last read are kept."""
        iid = int(issue["iid"])
        body = issue.get("description") if isinstance(issue.get("description"), str) else ""
        author: Any = issue.get("author") or {}
        view = IssueView(
            iid=iid,
            id=int(issue.get("id") or 0),
            title=str(issue.get("title") or ""),
            body=str(body),
            closed=issue.get("state") == "closed",
            labels=tuple(str(n) for n in issue.get("labels") or [] if isinstance(n, str)),
            updated_at=parse_time(issue.get("updated_at")),
            author_id=int(author["id"]) if isinstance(author.get("id"), int) else None,
            author=str(author["username"]) if author.get("username") else None,
            body_blockers=tuple(markers.blocked_by(str(body), self._here)),
        )
        with self._lock:
            before = self._issues.get(iid)
        reread = links
        if links is None:
            fresh = before is None or before.updated_at != view.updated_at or not before.links_read
            reread = fresh or self._full_sync
        if self._links() and not view.closed and reread:
            view = self._with_links(view)
        elif before is not None:
            view = replace(
                view,
                link_blockers=before.link_blockers,
                closed_links=before.closed_links,
                links_read=before.links_read,
            )
        with self._lock:
            self._issues[iid] = view
            self._absent.discard(iid)
        return view

    def _with_links(self, view: IssueView) -> IssueView:
        try:
            listed = self._api.issue_links(view.iid)
        except ProviderError as exc:
            if exc.transient:
                raise
            log.info("the links of #%s cannot be read (%s): description lines only", view.iid, exc)
            return replace(view, links_read=True)
        blockers: list[str] = []
        closed: set[str] = set()
        for link in listed:
            if link.get("link_type") != "is_blocked_by" or not isinstance(link.get("iid"), int):
                continue
            if link.get("project_id") == self._api.project_id:
                blocker = str(link["iid"])
            else:
                path = _path_of(link)
                if path is None:
                    continue
                blocker = markers.blocker_id(path, int(link["iid"]), self._here)
                if link.get("state") == "closed":
                    closed.add(blocker)
            blockers.append(blocker)
        return replace(
            view, link_blockers=tuple(blockers), closed_links=frozenset(closed), links_read=True
        )

    # ------------------------------------------------------------------ syncing

    def _full(self) -> None:
        known_open = {n for n, v in self._issues.items() if not v.closed}
        self._issues = {n: v for n, v in self._issues.items() if v.closed}
        self._full_sync = True
        try:
            page: int | None = 1
            while page is not None:
                listed = self._api.issues_page(state="opened", page=page)
                for issue in listed.items or []:
                    self._note_listed(issue)
                page = listed.next_page
        finally:
            self._full_sync = False
        # An issue open when last seen and not listed open now was closed meanwhile (it is
        # done), or deleted or moved (it is gone): asked one by one, so neither is missed.
        for iid in sorted(known_open - set(self._issues)):
            try:
                self.note(self._api.get_issue(iid), links=False)
            except NotFoundError:
                continue
        stamps = [v.updated_at for v in self._issues.values()]
        self._since = max(stamps) if stamps else EPOCH
        self._etags.clear()

    def _incremental(self) -> None:
        assert self._since is not None
        since = self._since.isoformat().replace("+00:00", "Z")
        page: int | None = 1
        seen, newest = 0, self._since
        while page is not None:
            applied = self._etags.get(page)
            listed = self._api.issues_page(
                state="all",
                page=page,
                updated_after=since,
                known_etag=applied[0] if applied else None,
            )
            count = applied[1] if applied else 0
            if listed.items is not None:
                for issue in listed.items:
                    view = self._note_listed(issue)
                    if view is not None:
                        newest = max(newest, view.updated_at)
                count = len(listed.items)
                if listed.etag:
                    self._etags[page] = (listed.etag, count)
            seen += count
            page = listed.next_page
        if seen >= PER_PAGE and newest > self._since:
            # A full page of changes: move the window on, so polls stay one page long.
            self._since = newest
            self._etags.clear()

    def _note_listed(self, issue: object) -> IssueView | None:
        if not isinstance(issue, dict) or not isinstance(issue.get("iid"), int):
            return None
        if issue.get("issue_type") not in (None, "issue", "incident"):
            return None  # a task or test case: no work item
        return self.note(issue)

    def _fetch_missing_blockers(self) -> None:
        wanted = {
            int(b)
            for view in self._issues.values()
            if not view.closed
            for b in view.blocked_by
            if b.isdecimal() and int(b) not in self._issues and int(b) not in self._absent
        }
        for iid in sorted(wanted):
            try:
                self.note(self._api.get_issue(iid), links=False)
            except NotFoundError:
                self._absent.add(iid)

    def _read_foreign_blockers(self) -> None:
        named = sorted(
            {
                b
                for view in self._issues.values()
                if not view.closed
                for b in view.blocked_by
                if not b.isdecimal() and b not in view.closed_links
            }
        )
        for blocker in named:
            path, _, number = blocker.rpartition("#")
            try:
                issue = self._api.get_issue_of(path, int(number))
            except NotFoundError:  # gone, or the token may not see that project
                if blocker not in self._foreign_closed:
                    log.warning("blocker %s cannot be read: it keeps blocking", blocker)
                self._foreign_closed[blocker] = False
                continue
            self._foreign_closed[blocker] = issue.get("state") == "closed"

"""The provider's picture of the repository's issues, kept current with few counted requests.

The first sync lists the open issues. After that, each sync asks only for issues updated since
a watermark (``state=all&since=…``), with the ETag of the last answer: when nothing changed,
GitHub answers ``304`` and the poll costs no rate limit, however many issues there are. The
watermark stays put until the window holds a page of changes, so one change costs one counted
request, not two. Closed issues stay known (as ``done``) once seen, and a closed blocker that
an open issue names is fetched once, so its dependents unblock.

A blocker is keyed by repository and number: ``12`` here, ``other/repo#12`` in another
repository (GitHub's native dependencies may cross repositories, and so may a "Blocked by"
line). An issue of another repository is no work item: its state is read on each sync (a
conditional read, free while it is unchanged), and once it is closed it no longer blocks.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

from githubkit_schemas.latest.models import Issue

from adapters.providers.github import markers
from adapters.providers.github.api import PER_PAGE, GitHubApi
from domain.errors import NotFoundError

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class IssueView:
    number: int
    database_id: int
    title: str
    body: str
    closed: bool
    labels: tuple[str, ...]
    updated_at: datetime
    is_pull: bool
    body_blockers: tuple[str, ...] = ()
    native_blockers: tuple[str, ...] = ()
    author: str | None = None
    association: str | None = None

    @property
    def blocked_by(self) -> tuple[str, ...]:
        """Body lines first, then GitHub's native dependencies the body does not name."""
        return tuple(dict.fromkeys([*self.body_blockers, *self.native_blockers]))


def _repository(issue: Issue) -> str | None:
    """The "owner/name" an issue belongs to (its ``repository_url`` ends with it)."""
    parts = issue.repository_url.rstrip("/").split("/")
    return "/".join(parts[-2:]) if len(parts) >= 2 and parts[-3:-2] == ["repos"] else None


def _labels(issue: Issue) -> tuple[str, ...]:
    names = [label if isinstance(label, str) else label.name for label in issue.labels]
    return tuple(name for name in names if isinstance(name, str))


class IssueIndex:
    def __init__(self, api: GitHubApi, full_resync_cycles: int) -> None:
        self._api = api
        self._here = f"{api.owner}/{api.repo}"
        self._full_every = full_resync_cycles
        self._lock = threading.RLock()
        self._issues: dict[int, IssueView] = {}
        self._absent: set[int] = set()  # numbers named as blockers that are no issue
        self._foreign_closed: dict[str, bool] = {}  # other repositories' blockers: closed?
        self._since: datetime | None = None
        # page -> (ETag applied, issues on it), for the current window
        self._etags: dict[int, tuple[str, int]] = {}
        self._syncs = 0

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
            return [i for i in self._issues.values() if not i.is_pull]

    def open_blockers(self, view: IssueView) -> tuple[str, ...]:
        """``view``'s blockers less those of other repositories that are closed."""
        with self._lock:
            return tuple(b for b in view.blocked_by if not self._foreign_closed.get(b, False))

    def get(self, number: int) -> IssueView:
        """One issue, fresh from GitHub (a conditional read), recorded in the index."""
        view = self.note(self._api.get_issue(number))
        if view.is_pull:
            raise NotFoundError(f"work item {number} is a pull request, not an issue")
        return view

    def find_key(
        self, key: str, made_by: Callable[[IssueView], bool] = lambda view: True
    ) -> IssueView | None:
        """The issue whose body carries ``key``, after a sync (so a lost write is found);
        only one ``made_by`` accepts (anyone can copy a key into an issue they file)."""
        with self._lock:
            self.sync()
            for view in self._issues.values():
                if markers.has_key(view.body, key) and made_by(view):
                    return view
        return None

    def note(self, issue: Issue) -> IssueView:
        """Record an issue a read or a write returned."""
        native: tuple[str, ...] = ()
        summary = issue.issue_dependencies_summary
        body = issue.body if isinstance(issue.body, str) else ""
        total = getattr(summary, "total_blocked_by", 0) or 0
        if total:
            # The summary counts native dependencies but does not name them: a body naming #A
            # and a native #B count the same as a body and a native both naming #A, so any
            # native one means asking which. The list is a conditional read: when it is as it
            # was, GitHub answers 304 and this costs no rate limit; and an idle poll notes no
            # issue at all (its listing is a 304 too).
            native = tuple(
                markers.blocker_id(_repository(b), b.number, self._here)
                for b in self._api.blocked_by(issue.number)
            )
        view = IssueView(
            number=issue.number,
            database_id=issue.id,
            title=issue.title,
            body=body,
            closed=issue.state == "closed",
            labels=_labels(issue),
            updated_at=issue.updated_at,
            is_pull=bool(issue.pull_request),
            body_blockers=tuple(markers.blocked_by(body, self._here)),
            native_blockers=native,
            author=issue.user.login if issue.user else None,
            association=a if isinstance(a := issue.author_association, str) else None,
        )
        with self._lock:
            self._issues[issue.number] = view
            self._absent.discard(issue.number)
        return view

    # ------------------------------------------------------------------ syncing

    def _full(self) -> None:
        known_open = {n for n, v in self._issues.items() if not v.closed}
        self._issues = {n: v for n, v in self._issues.items() if v.closed}
        page = 1
        while True:
            listed = self._api.issues_page(state="open", page=page)
            for issue in listed.items or []:
                self.note(issue)
            if not listed.has_next:
                break
            page += 1
        # An issue open at the last sync and not listed now was closed (or deleted, or
        # transferred) meanwhile: asked for, it reads done, not gone (a conditional read each).
        for number in sorted(known_open - self._issues.keys()):
            try:
                self.note(self._api.get_issue(number))
            except NotFoundError:
                log.info("issue #%s is gone (deleted or transferred)", number)
        stamps = [v.updated_at for v in self._issues.values()]
        self._since = max(stamps) if stamps else datetime.fromtimestamp(0, UTC)
        self._etags.clear()

    def _incremental(self) -> None:
        assert self._since is not None
        since = self._since.isoformat().replace("+00:00", "Z")
        page, seen, newest = 1, 0, self._since
        while True:
            applied = self._etags.get(page)
            listed = self._api.issues_page(
                state="all", page=page, since=since, known_etag=applied[0] if applied else None
            )
            count = applied[1] if applied else 0
            if listed.items is not None:
                for issue in listed.items:
                    newest = max(newest, self.note(issue).updated_at)
                count = len(listed.items)
                if listed.etag:
                    self._etags[page] = (listed.etag, count)
            seen += count
            if not listed.has_next:
                break
            page += 1
        if seen >= PER_PAGE and newest > self._since:
            # A full page of changes: move the window on, so polls stay one page long.
            self._since = newest
            self._etags.clear()

    def _fetch_missing_blockers(self) -> None:
        wanted = {
            int(b)
            for view in self._issues.values()
            if not view.closed
            for b in view.blocked_by
            if b.isdecimal() and int(b) not in self._issues and int(b) not in self._absent
        }
        for number in sorted(wanted):
            try:
                self.note(self._api.get_issue(number))
            except NotFoundError:
                self._absent.add(number)

    def _read_foreign_blockers(self) -> None:
        named = sorted(
            {
                b
                for view in self._issues.values()
                if not view.closed
                for b in view.blocked_by
                if not b.isdecimal()
            }
        )
        for blocker in named:
            repository, _, number = blocker.rpartition("#")
            owner, _, name = repository.partition("/")
            try:
                issue = self._api.get_issue_of(owner, name, int(number))
            except NotFoundError:  # gone, or the token may not see that repository
                if blocker not in self._foreign_closed:
                    log.warning("blocker %s cannot be read: it keeps blocking", blocker)
                self._foreign_closed[blocker] = False
                continue
            self._foreign_closed[blocker] = issue.state == "closed"

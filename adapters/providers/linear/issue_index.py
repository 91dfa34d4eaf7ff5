"""The provider's picture of the team's issues, kept current with as few requests as Linear
allows.

The first sync lists the team's issues that are not completed or canceled (cursor pages of
``page_size``). After that, each sync first asks whether any issue was updated since the newest
``updatedAt`` seen (``updatedAt: {gt: …}``, one issue asked for: a few complexity points), and
only then lists the issues updated since (``gte``, any state): an idle poll is **one** small
request, a poll after a change two (more for a page of changes). Every ``full_resync_cycles``
syncs the index is rebuilt from scratch (archived, deleted or moved issues, which no
``updatedAt`` listing reports): an issue known open and not listed any more is asked for by id,
and dropped when it is gone or archived. Completed and canceled issues stay known (as ``done``)
once seen.

Blockers are Linear's ``blocks`` relations: an issue's ``inverseRelations`` of type ``blocks``
name the issues that block it, each with its state when listed. An issue the index knows is
judged by its state here (fresher); one it does not (another team's, or done long ago) by the
state the relation carried. A relation people add by hand is seen when either issue next
changes, or at the next full resync.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from adapters.providers.linear.api import LinearApi, nodes
from adapters.providers.linear.transport import Json
from domain.errors import NotFoundError

EPOCH = datetime.fromtimestamp(0, UTC)
CLOSED_TYPES = frozenset({"completed", "canceled"})
CHANGES_PAGE = 10  # changes are few: a smaller page costs a fifth of the complexity points


@dataclass(frozen=True)
class IssueView:
    id: str
    identifier: str
    title: str
    body: str
    updated: str  # as Linear wrote it: a verdict is kept per version
    updated_at: datetime
    team_id: str
    project: tuple[str, str] | None  # (id, name)
    state_id: str
    state_type: str
    labels: tuple[tuple[str, str], ...]  # (id, name)
    creator_id: str | None
    creator_email: str | None
    creator_guest: bool
    blockers: tuple[tuple[str, str], ...]  # (identifier, state type as the relation said)
    archived: bool = False

    @property
    def closed(self) -> bool:
        return self.state_type in CLOSED_TYPES

    @property
    def label_names(self) -> tuple[str, ...]:
        return tuple(name for _, name in self.labels)


def parse_time(value: object) -> datetime:
    if not isinstance(value, str) or not value:
        return EPOCH
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return EPOCH
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def linear_time(when: datetime) -> str:
    return when.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def view_of(issue: Json, names: Mapping[str, str] | None = None) -> IssueView:
    """An issue as the index keeps it; ``names``: label names by id (an issue lists its
    labels' ids, cheaper than the labels)."""
    state: Any = issue.get("state") or {}
    creator: Any = issue.get("creator") or {}
    project: Any = issue.get("project")
    blockers = []
    for relation in nodes(issue.get("inverseRelations")):
        source: Any = relation.get("issue") or {}
        if relation.get("type") == "blocks" and source.get("identifier"):
            blockers.append(
                (str(source["identifier"]), str((source.get("state") or {}).get("type") or ""))
            )
    return IssueView(
        id=str(issue["id"]),
        identifier=str(issue.get("identifier") or ""),
        title=str(issue.get("title") or ""),
        body=str(issue.get("description") or ""),
        updated=str(issue.get("updatedAt") or ""),
        updated_at=parse_time(issue.get("updatedAt")),
        team_id=str((issue.get("team") or {}).get("id") or ""),
        project=(str(project.get("id")), str(project.get("name")))
        if isinstance(project, dict)
        else None,
        state_id=str(state.get("id") or ""),
        state_type=str(state.get("type") or ""),
        labels=_labels(issue, names or {}),
        creator_id=str(creator["id"]) if creator.get("id") else None,
        creator_email=str(creator["email"]) if creator.get("email") else None,
        creator_guest=bool(creator.get("guest")),
        blockers=tuple(dict.fromkeys(blockers)),
        archived=bool(issue.get("archivedAt")),
    )


def _labels(issue: Json, names: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    if isinstance(issue.get("labelIds"), list):
        ids = [str(i) for i in issue["labelIds"]]
        return tuple((i, names[i]) for i in ids if i in names)  # a deleted label: none
    return tuple((str(n.get("id")), str(n.get("name"))) for n in nodes(issue.get("labels")))


def label_ids(issues: Iterable[Json]) -> set[str]:
    return {str(i) for issue in issues for i in issue.get("labelIds") or []}


class IssueIndex:
    def __init__(
        self,
        api: LinearApi,
        *,
        scope: dict[str, Any],
        in_scope: Callable[[IssueView], bool],
        create_fields: dict[str, Any],
        scope_labels: tuple[str, ...],
        label_names: Callable[[set[str]], Mapping[str, str]],
        page_size: int,
        full_resync_cycles: int,
    ) -> None:
        self._api = api
        self._scope = scope  # the IssueFilter of the team (project, label)
        self._in_scope = in_scope
        self._create_fields = create_fields  # what an issue cpe makes needs to be in scope
        self.scope_labels = scope_labels
        self._names = label_names
        self._page = page_size
        self._full_every = full_resync_cycles
        self._lock = threading.RLock()
        self._issues: dict[str, IssueView] = {}  # by identifier
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

    def get(self, identifier: str) -> IssueView:
        """One issue of this team and scope, fresh from Linear, recorded in the index;
        ``NotFoundError`` for any other."""
        try:
            view = self._view(self._api.issue(identifier))
        except NotFoundError:
            raise NotFoundError(f"work item {identifier!r} does not exist in Linear") from None
        if view.identifier != identifier or view.archived or not self._in_scope(view):
            # Linear also answers an issue's old identifier (moved from another team).
            raise NotFoundError(
                f"work item {identifier!r} is not an issue of this team (and scope)"
            )
        return self.note_view(view)

    def scope_fields(self) -> dict[str, Any]:
        return dict(self._create_fields)

    def known(self, identifier: str) -> IssueView | None:
        with self._lock:
            return self._issues.get(identifier)

    def note(self, issue: Json) -> IssueView:
        return self.note_view(self._view(issue))

    def _view(self, issue: Json) -> IssueView:
        return view_of(issue, self._names(label_ids([issue])))

    def note_view(self, view: IssueView) -> IssueView:
        with self._lock:
            if view.archived or not self._in_scope(view):
                self._issues.pop(view.identifier, None)
            else:
                self._issues[view.identifier] = view
        return view

    def open_blockers(self, view: IssueView) -> tuple[str, ...]:
        """The issues blocking ``view`` that are not completed or canceled."""
        with self._lock:
            found = []
            for identifier, state_type in view.blockers:
                known = self._issues.get(identifier)
                closed = known.closed if known is not None else state_type in CLOSED_TYPES
                if not closed:
                    found.append(identifier)
            return tuple(found)

    # ------------------------------------------------------------------ syncing

    def _listed(self, extra: dict[str, Any], first: int) -> list[IssueView]:
        filter_ = {**self._scope, **extra}
        views: list[IssueView] = []
        for page in self._api.issue_pages(filter_, first):
            names = self._names(label_ids(page))
            views.extend(view_of(issue, names) for issue in page if issue.get("id"))
        return views

    def _full(self) -> None:
        known_open = {n for n, v in self._issues.items() if not v.closed}
        listed = self._listed({"state": {"type": {"nin": sorted(CLOSED_TYPES)}}}, self._page)
        self._issues = {n: v for n, v in self._issues.items() if v.closed}
        for view in listed:
            self.note_view(view)
        # Open when last seen, not listed open now: completed or canceled meanwhile (done),
        # or archived, deleted, moved (gone). Asked one by one, so neither is missed.
        for identifier in sorted(known_open - set(self._issues)):
            try:
                self.note(self._api.issue(identifier))
            except NotFoundError:
                continue
        stamps = [v.updated_at for v in self._issues.values()]
        self._since = max(stamps) if stamps else EPOCH

    def _incremental(self) -> None:
        assert self._since is not None
        since = linear_time(self._since)
        if not self._api.changed({**self._scope, "updatedAt": {"gt": since}}):
            return  # the idle poll: one request of a few points
        # ``gte``: an issue changed in the very millisecond of the newest seen is not missed.
        listed = self._listed({"updatedAt": {"gte": since}}, min(self._page, CHANGES_PAGE))
        for view in listed:
            self.note_view(view)
            self._since = max(self._since, view.updated_at)

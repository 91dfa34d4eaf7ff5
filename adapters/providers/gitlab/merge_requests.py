"""The provider's picture of the project's merge requests into the default branch, with the heads
cpe reviewed and their pipelines.

A revision is a merge request whose target is the default branch; its id is the merge request's
``iid``. At start the open ones are listed (every page) with the most recently updated of all
states (one page: what merged or closed lately); after that each sync asks only for what changed
since the newest ``updated_at`` seen (``updated_after``, sorted ascending: normally one short
page). A merge request's notes are read again only when its ``updated_at`` moved (a note moves
it) or cpe itself just wrote to it; they tell which head cpe last reviewed (its own review note's
hidden head marker: a note by anyone else proves nothing). Pipelines are per head commit: asked
every cycle while pending (or while a new head has no CI yet), then only every
``settled_recheck_cycles`` cycles, staggered, to catch a re-run.

The work item a merge request is for is its neutral marker (``markers.work_item_reference``),
else, when the tracker is this project's own (``closing``), "Closes #N" in its description, else
its branch name; and only when a trusted person (cpe among them) opened it: anyone who can open a
merge request could name an item, and a merge request linked to an item is reviewed and merged.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

from adapters.providers import markers, revision_index
from adapters.providers.checks import PipelineWatches
from adapters.providers.gitlab.api import GitLabApi, Json
from adapters.providers.gitlab.pipeline import PipelineReader
from adapters.providers.gitlab.reviews import reviewed_head
from adapters.providers.gitlab.settings import GitLabSettings
from domain.errors import NotFoundError
from domain.models import Revision, RevisionId, RevisionState, WorkItemId

_STATES: dict[str, RevisionState] = {"opened": "open", "locked": "open", "merged": "merged"}

Trusted = Callable[[Json | None], bool]
"""Whether a GitLab user (as an API answer embeds one: ``id``, ``username``) is trusted."""


def mr_iid(revision_id: str) -> int:
    if not revision_id.isdecimal():
        raise NotFoundError(f"revision {revision_id!r} does not exist: ids are merge request iids")
    return int(revision_id)


def _time(value: object) -> datetime:
    if not isinstance(value, str) or not value:
        return datetime.fromtimestamp(0, UTC)
    parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


@dataclass(frozen=True)
class MrView:
    iid: int
    title: str
    description: str
    branch: str
    target: str
    head_sha: str
    state: RevisionState
    updated_at: datetime
    updated_text: str
    work_item: str | None
    merge_commit: str | None
    """What landed on the target: the merge commit, else the squash commit, else (a
    fast-forward) the head itself; None until merged."""


class MrIndex:
    def __init__(
        self,
        api: GitLabApi,
        settings: GitLabSettings,
        default_branch: str,
        pipelines: PipelineReader,
        trusted: Trusted,
        *,
        closing: bool,
    ) -> None:
        self._api = api
        self._settings = settings
        self._default = default_branch
        self._pipelines = pipelines
        self._trusted = trusted
        self._closing = closing
        self._lock = threading.RLock()
        self._mrs: dict[int, MrView] = {}
        self._reviewed: dict[int, str | None] = {}
        self._stale_notes: set[int] = set()
        self._watches = PipelineWatches(
            settings.pipeline_grace_cycles, settings.settled_recheck_cycles
        )
        self._newest: MrView | None = None
        self._primed = False
        self._top_etag: str | None = None

    # ------------------------------------------------------------------ reading

    def sync(self, *, pipelines: bool) -> list[Revision]:
        with self._lock:
            if not self._primed:
                self._prime()
            else:
                self._poll()
            for iid in sorted(self._stale_notes):
                view = self._mrs.get(iid)
                if view is not None and view.state == "open":  # a closed one's matters no more
                    self._read_notes(iid)
            if pipelines:
                self._watches.cycle += 1
                for view in self._mrs.values():
                    if view.state == "open" and self._pipeline_due(view):
                        self._read_pipeline(view)
            return [self._revision(view) for view in self._mrs.values()]

    def get(self, iid: int, **query: Any) -> Json:
        """The merge request as GitLab has it now (noted in the index)."""
        found = dict(self._api.get(f"get merge request !{iid}", f"/merge_requests/{iid}", query))
        with self._lock:
            self.note(found)
        return found

    def view(self, iid: int) -> MrView:
        """The merge request read fresh; ``NotFoundError`` for one not into the default branch
        (no revision)."""
        found = self.get(iid)
        view = self._view(found)
        if view.target != self._default:
            raise NotFoundError(
                f"merge request !{iid} targets {view.target}, not {self._default}: no revision"
            )
        return view

    def revision(self, iid: int, head_sha: str | None = None) -> Revision:
        """One merge request as a revision, read fresh (review and pipeline included).
        ``head_sha``: the head cpe itself just committed; GitLab brings a merge request's
        ``sha`` up to date a moment after a commit to its branch, so a read right after may
        still name the old one: the revision is given the new head, and its pipeline."""
        with self._lock:
            view = self.view(iid)
            if head_sha is not None and view.head_sha != head_sha:
                view = replace(view, head_sha=head_sha)
                self._mrs[iid] = view
            self._read_notes(iid)
            self._read_pipeline(view)
            return self._revision(view)

    def linked_revisions(self) -> dict[str, RevisionId]:
        """Each work item's revision: its newest open merge request, else its newest one."""
        with self._lock:
            return revision_index.linked_revisions(self._mrs)

    def find(self, *, key: str | None, branch: str, work_item: str) -> tuple[MrView | None, str]:
        """After a sync: the merge request that carries ``key``, else the open one from
        ``branch``, else the open one for ``work_item`` — and which of the three it was."""
        with self._lock:
            self.sync(pipelines=False)
            return revision_index.find_revision(
                self._mrs, lambda v: v.description, key=key, branch=branch, work_item=work_item
            )

    def mark_dirty(self, iid: int) -> None:
        """cpe wrote to this merge request: read its notes and pipeline again next time."""
        with self._lock:
            self._stale_notes.add(iid)
            self._watches.forget(iid)

    def note(self, mr: Json) -> MrView | None:
        """Take a merge request as GitLab answered it; None (not kept) when it targets another
        branch than the default."""
        view = self._view(mr)
        if view.target != self._default:
            return None
        with self._lock:
            old = self._mrs.get(view.iid)
            if old is None or old.updated_at != view.updated_at or old.head_sha != view.head_sha:
                self._stale_notes.add(view.iid)
            self._mrs[view.iid] = view
            if self._newest is None or view.updated_at > self._newest.updated_at:
                self._newest = view
        return view

    def _view(self, mr: Json) -> MrView:
        state = _STATES.get(str(mr.get("state")), "closed")
        head = str(mr.get("sha") or "")
        description = str(mr.get("description") or "")
        branch = str(mr.get("source_branch") or "")
        landed = mr.get("merge_commit_sha") or mr.get("squash_commit_sha") or head
        return MrView(
            iid=int(mr["iid"]),
            title=str(mr.get("title") or ""),
            description=description,
            branch=branch,
            target=str(mr.get("target_branch") or ""),
            head_sha=head,
            state=state,
            updated_at=_time(mr.get("updated_at")),
            updated_text=str(mr.get("updated_at") or ""),
            work_item=self._linked_item(mr, description, branch),
            merge_commit=str(landed) if state == "merged" and landed else None,
        )

    def _linked_item(self, mr: Json, description: str, branch: str) -> str | None:
        item = markers.linked_item(
            description, branch, self._settings.branch_prefix, closing=self._closing
        )
        if item is None:
            return None
        author = mr.get("author")
        return item if self._trusted(author if isinstance(author, dict) else None) else None

    # ------------------------------------------------------------------ syncing

    def _list(self, query: dict[str, Any], *, etag_first: bool = False) -> bool:
        """Note every merge request of a listing (every page); False when its first page was
        the one already seen (its ETag unchanged)."""
        page: int | None = 1
        while page is not None:
            listed = self._api.page(
                "list merge requests",
                "/merge_requests",
                {**query, "target_branch": self._default},
                page=page,
                known_etag=self._top_etag if etag_first and page == 1 else None,
            )
            if listed.items is None:
                return False
            if etag_first and page == 1:
                self._top_etag = listed.etag
            for mr in listed.items:
                if isinstance(mr, dict):
                    self.note(mr)
            page = listed.next_page
        return True

    def _prime(self) -> None:
        self._list({"state": "opened", "order_by": "updated_at", "sort": "desc"})
        recent = self._api.page(
            "list merge requests",
            "/merge_requests",
            {
                "state": "all",
                "order_by": "updated_at",
                "sort": "desc",
                "target_branch": self._default,
            },
        )
        for mr in recent.items or []:
            if isinstance(mr, dict):
                self.note(mr)
        self._primed = True

    def _poll(self) -> None:
        query: dict[str, Any] = {"state": "all", "order_by": "updated_at", "sort": "asc"}
        if self._newest is not None:
            query["updated_after"] = self._newest.updated_text
        self._list(query, etag_first=True)

    def _read_notes(self, iid: int) -> None:
        own = self._api.own_user()[0]
        reviewed: str | None = None
        for note in self._api.all_pages(
            f"list the notes of !{iid}",
            f"/merge_requests/{iid}/notes",
            {"sort": "asc", "order_by": "created_at"},
        ):
            author = note.get("author")
            if note.get("system") or not isinstance(author, dict) or author.get("id") != own:
                continue  # a marker anyone can copy is no proof of cpe's review
            head = reviewed_head(str(note.get("body") or ""))
            if head is not None:
                reviewed = head
        self._reviewed[iid] = reviewed
        self._stale_notes.discard(iid)

    def _pipeline_due(self, view: MrView) -> bool:
        return self._watches.due(view.iid, view.head_sha)

    def _read_pipeline(self, view: MrView) -> None:
        self._watches.record(view.iid, view.head_sha, self._pipelines.read(view.head_sha))

    def _revision(self, view: MrView) -> Revision:
        return Revision(
            id=RevisionId(str(view.iid)),
            title=view.title,
            work_item_id=WorkItemId(view.work_item) if view.work_item else None,
            branch=view.branch,
            head_sha=view.head_sha,
            state=view.state,
            pipeline=self._watches.pipeline(view.iid, view.head_sha, view.state),
            reviewed_sha=self._reviewed.get(view.iid),
        )

"""The provider's picture of the repository's pull requests, their reviews and pipelines.

Pull requests cannot be listed "since", but sorted by ``updated`` (newest first) the first page
changes whenever any pull request does: an idle sync is that one page, asked with its ETag
(``304``, no rate limit). Reviews are read again only for a pull request whose ``updated_at``
moved (a review moves it) or that cpe itself just wrote to. Pipelines are per head commit:
asked every cycle while pending (or while a new head has no CI yet), then only every
``settled_recheck_cycles`` cycles, staggered, to catch a re-run.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, replace
from datetime import UTC, datetime

from githubkit_schemas.latest.models import PullRequest, PullRequestSimple

from adapters.providers import revision_index
from adapters.providers.checks import PipelineWatches
from adapters.providers.github import markers
from adapters.providers.github.api import GitHubApi
from adapters.providers.github.pipeline import PipelineReader
from adapters.providers.github.settings import GitHubSettings
from adapters.providers.github.trust import Trust
from domain.models import Revision, RevisionId, RevisionState, WorkItemId


@dataclass(frozen=True)
class PullView:
    number: int
    title: str
    body: str
    branch: str
    head_sha: str
    state: RevisionState
    updated_at: datetime
    work_item: str | None


class PullIndex:
    """``closing``: the work items are this repository's issues, and "Closes #N" in a pull
    request names one; False when they are kept in another system (its item 3 is no issue
    #3 here), where only cpe's marker and the branch name do."""

    def __init__(
        self,
        api: GitHubApi,
        settings: GitHubSettings,
        pipelines: PipelineReader,
        trust: Trust,
        *,
        closing: bool = True,
    ) -> None:
        self._api = api
        self.closing = closing
        self._trust = trust
        self._settings = settings
        self._pipelines = pipelines
        self._lock = threading.RLock()
        self._pulls: dict[int, PullView] = {}
        self._reviewed: dict[int, str | None] = {}
        self._stale_reviews: set[int] = set()
        self._watches = PipelineWatches(
            settings.pipeline_grace_cycles, settings.settled_recheck_cycles
        )
        self._top_etag: str | None = None
        self._newest: datetime | None = None

    # ------------------------------------------------------------------ reading

    def sync(self, *, pipelines: bool) -> list[Revision]:
        with self._lock:
            if self._newest is None:
                self._prime()
            else:
                self._poll()
            for number in sorted(self._stale_reviews):
                self._read_reviews(number)
            if pipelines:
                self._watches.cycle += 1
                for view in self._pulls.values():
                    if view.state == "open" and self._pipeline_due(view):
                        self._read_pipeline(view)
            return [self._revision(view) for view in self._pulls.values()]

    def prime(self) -> None:
        """List the pull requests once, if no sync has yet."""
        with self._lock:
            if self._newest is None:
                self.sync(pipelines=False)

    def revision(self, number: int, head_sha: str | None = None) -> Revision:
        """One pull request as a revision, read fresh (reviews and pipeline included).
        ``head_sha``: the head cpe itself just moved its branch to. GitHub brings a pull
        request's head up to date a moment after a push to its branch, so a read right after
        may still name the old one: the revision is given the new head, and its pipeline."""
        with self._lock:
            view = self.note(self._api.get_pull(number))
            if head_sha is not None and view.head_sha != head_sha:
                view = replace(view, head_sha=head_sha)
            self._read_reviews(number)
            self._read_pipeline(view)
            return self._revision(view)

    def view(self, number: int) -> PullView:
        with self._lock:
            return self.note(self._api.get_pull(number))

    def linked_revisions(self) -> dict[str, RevisionId]:
        """Each work item's revision: its newest open pull request, else its newest one."""
        with self._lock:
            return revision_index.linked_revisions(self._pulls)

    def find(self, *, key: str | None, branch: str, work_item: str) -> tuple[PullView | None, str]:
        """After a sync: the pull request that carries ``key``, else the open one from
        ``branch``, else the open one for ``work_item`` — and which of the three it was."""
        with self._lock:
            self.sync(pipelines=False)
            return revision_index.find_revision(
                self._pulls, lambda v: v.body, key=key, branch=branch, work_item=work_item
            )

    def mark_dirty(self, number: int) -> None:
        """cpe wrote to this pull request: read its reviews and pipeline again next time."""
        with self._lock:
            self._stale_reviews.add(number)
            self._watches.forget(number)

    def note(self, pr: PullRequest | PullRequestSimple) -> PullView:
        body = pr.body or ""
        merged = bool(pr.merged_at)
        state: RevisionState = "merged" if merged else ("open" if pr.state == "open" else "closed")
        view = PullView(
            number=pr.number,
            title=pr.title,
            body=body,
            branch=pr.head.ref,
            head_sha=pr.head.sha,
            state=state,
            updated_at=pr.updated_at,
            work_item=self._linked_item(pr, body),
        )
        with self._lock:
            old = self._pulls.get(pr.number)
            if old is None or old.updated_at != view.updated_at or old.head_sha != view.head_sha:
                self._stale_reviews.add(pr.number)
            self._pulls[pr.number] = view
        return view

    def _linked_item(self, pr: PullRequest | PullRequestSimple, body: str) -> str | None:
        """The work item a pull request is for, when a trusted person (cpe among them) opened
        it: anyone can open one saying "Closes #5" from a branch named like cpe's, and a pull
        request linked to an item is reviewed and, with auto_merge, merged."""
        item = markers.linked_item(
            body, pr.head.ref, self._settings.branch_prefix, closing=self.closing
        )
        if item is None:
            return None
        login = pr.user.login if pr.user else None
        association: str | None = pr.author_association
        return item if self._trust.trusted(login, association) else None

    # ------------------------------------------------------------------ syncing

    def _prime(self) -> None:
        page = 1
        while True:
            listed = self._api.pulls_page(state="open", page=page)
            for pr in listed.items or []:
                self.note(pr)
            if not listed.has_next:
                break
            page += 1
        self._poll()

    def _poll(self) -> None:
        page, newest = 1, self._newest
        while True:
            listed = self._api.pulls_page(
                state="all", page=page, known_etag=self._top_etag if page == 1 else None
            )
            if listed.items is None:
                return  # the newest page is as it was: nothing changed anywhere
            if page == 1:
                self._top_etag = listed.etag
            older_seen = False
            for pr in listed.items:
                view = self.note(pr)
                if self._newest is not None and view.updated_at <= self._newest:
                    older_seen = True
                newest = view.updated_at if newest is None else max(newest, view.updated_at)
            if older_seen or not listed.has_next or self._newest is None:
                break
            page += 1
        self._newest = newest or datetime.fromtimestamp(0, UTC)

    def _read_reviews(self, number: int) -> None:
        reviewed: str | None = None
        for review in self._api.reviews(number):
            if (
                markers.review_digest(review.body) is not None
                and review.commit_id
                and self._own(review.user.login if review.user else None)
            ):
                reviewed = review.commit_id
        self._reviewed[number] = reviewed
        self._stale_reviews.discard(number)

    def _own(self, login: str | None) -> bool:
        """Written by cpe: a review marker anyone can copy is not proof of it."""
        own = self._trust.own_login()
        return login is not None and own is not None and login.casefold() == own.casefold()

    def _pipeline_due(self, view: PullView) -> bool:
        return self._watches.due(view.number, view.head_sha)

    def _read_pipeline(self, view: PullView) -> None:
        self._watches.record(view.number, view.head_sha, self._pipelines.read(view.head_sha))

    def _revision(self, view: PullView) -> Revision:
        return Revision(
            id=RevisionId(str(view.number)),
            title=view.title,
            work_item_id=WorkItemId(view.work_item) if view.work_item else None,
            branch=view.branch,
            head_sha=view.head_sha,
            state=view.state,
            pipeline=self._watches.pipeline(view.number, view.head_sha, view.state),
            reviewed_sha=self._reviewed.get(view.number),
        )

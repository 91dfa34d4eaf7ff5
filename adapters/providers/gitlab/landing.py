"""The merge queue's two writes on GitLab (``RevisionLander``, offered by the revision writer).

``update_branch`` brings the merge request up to date with GitLab's own rebase
(``PUT /merge_requests/:iid/rebase``): GitLab replays the branch's commits on the default
branch's head, server-side, and the new head's pipeline runs as after any push. Why a rebase
and not a merge commit: GitLab's API makes no merge commit on a source branch (the Commits API
writes single-parent commits; a second merge request, from the default branch into the source
branch, would be a merge request people see, with its own pipeline and notifications), and a
rebase is what GitLab itself asks of a merge request on a fast-forward or semi-linear project.
The rebase is asynchronous: it is polled (``include_rebase_in_progress``) until it is done; one
that takes longer than ``REBASE_WAIT`` is a transient error, and calling ``update_branch`` again
polls the same rebase. When the branch already contains the default branch's head nothing is
written, so calling it again, or after an answer that was lost, changes nothing. A rebase that
conflicts (GitLab's ``merge_error``) leaves the branch as it was; the files are found with
``ConflictFinder``. cpe's commits keep their messages (and ``Cpe-Key`` trailers) through the
rebase, so an update from a later patch still finds the revision's base.

``land`` merges the tested head only while the default branch is still where the test had it.
The merge's ``sha`` guards the head; nothing in GitLab's merge endpoint guards the base, so the
base is read just before the merge. How close that is to atomic depends on the project's merge
method: with **fast-forward** or **merge commit with semi-linear history**, GitLab itself
refuses to merge a branch that does not contain the default branch's head (``need_rebase``),
so a push to the default branch between cpe's read and its merge is refused, and the revision
is tested again: atomic. With plain merge commits (GitLab's default) a push in that instant
lands an untested combination; choose one of the other two methods to close the gap. Whatever
refused it, a merge that fails while the default branch has moved is a ``BaseMovedError``.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from adapters.providers.gitlab.api import GitLabApi, Json
from adapters.providers.gitlab.commits import Repository
from adapters.providers.gitlab.conflicts import ConflictFinder
from adapters.providers.gitlab.merge_requests import MrIndex, MrView
from adapters.providers.gitlab.merging import Merger, landed, refusal_kind, refused, settled
from adapters.support.crashpoints import crashpoint
from domain.errors import BaseMovedError, ConflictError, ProviderError
from domain.ports import BranchUpdate

REBASE_WAIT = 120.0  # seconds a rebase is polled before update_branch gives up for now
_FIRST_POLL = 0.2
_LONGEST_POLL = 5.0


class Lander:
    def __init__(
        self,
        api: GitLabApi,
        mrs: MrIndex,
        repository: Repository,
        merger: Merger,
        default_branch: str,
        *,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._api = api
        self._mrs = mrs
        self._repository = repository
        self._merger = merger
        self._default = default_branch
        self._conflicts = ConflictFinder(api, repository, default_branch)
        self._sleep = sleep
        self._clock = clock

    # ------------------------------------------------------------------ update_branch

    def update_branch(self, iid: int) -> BranchUpdate:
        view = self._mrs.view(iid)
        if view.state != "open":
            raise ConflictError(f"revision !{iid} is {view.state}; it cannot be updated")
        base = self._repository.head(self._default)
        if self._repository.contains(view.head_sha, base):
            return BranchUpdate(revision=self._mrs.revision(iid), base_sha=base)
        mr, failure = self._rebase(iid)
        head = self._repository.head(view.branch)  # GitLab's ``sha`` may lag the branch
        for candidate in dict.fromkeys([self._repository.head(self._default), base]):
            if self._repository.contains(head, candidate):
                self._mrs.mark_dirty(iid)
                return BranchUpdate(revision=self._mrs.revision(iid, head), base_sha=candidate)
        if mr.get("merge_error"):
            raise self._conflicts.error(iid, view.head_sha, view.branch, base)
        if failure is not None:
            raise failure  # the rebase was not made after all: asked again next time
        raise ProviderError(
            f"revision !{iid}: GitLab's rebase did not bring in {self._default} at {base[:12]}",
            transient=True,
        )

    def _rebase(self, iid: int) -> tuple[Json, ProviderError | None]:
        """Start GitLab's rebase of ``iid`` and wait for it: the merge request after it, and
        the transient failure of the request that started it (its answer lost: it may have
        started all the same, so it is waited for too)."""
        failure: ProviderError | None = None
        try:
            self._api.put(f"rebase !{iid}", f"/merge_requests/{iid}/rebase", {})
        except ConflictError:
            pass  # 409: one is under way already (a retry): wait for it
        except ProviderError as exc:
            if not exc.transient:
                raise
            failure = exc
        crashpoint("gitlab.update.after_rebase")
        deadline = self._clock() + REBASE_WAIT
        wait = _FIRST_POLL
        while True:
            mr = self._mrs.get(iid, include_rebase_in_progress="true")
            if not mr.get("rebase_in_progress"):
                return mr, failure
            if self._clock() >= deadline:
                raise ProviderError(
                    f"revision !{iid}: GitLab's rebase is still running after {REBASE_WAIT:g} s",
                    transient=True,
                    retry_after=_LONGEST_POLL,
                )
            self._sleep(wait)
            wait = min(wait * 2, _LONGEST_POLL)

    # ------------------------------------------------------------------ land

    def land(self, iid: int, expected_base: str, head_sha: str) -> str:
        view = self._mrs.view(iid)
        if view.state == "merged" and view.merge_commit:
            return view.merge_commit  # landed before; the answer was lost
        if view.state != "open":
            raise ConflictError(f"revision !{iid} is closed without a merge")
        current = self._repository.head(self._default)
        if current != expected_base:
            raise self._base_moved(iid, expected_base, current)
        if view.head_sha != head_sha:
            raise self._head_moved(iid, head_sha, view.head_sha, expected_base, current)
        if not self._repository.contains(head_sha, expected_base):
            raise ConflictError(
                f"revision !{iid}'s head {head_sha[:12]} does not contain {self._default} "
                f"at {expected_base[:12]}: it was not tested on it"
            )
        try:
            sha = self._merger.merge(iid, head_sha)
        except ProviderError as exc:
            sha = self._landed_after(view, exc, expected_base, head_sha)
        self._mrs.mark_dirty(iid)
        return sha

    def _landed_after(
        self, view: MrView, exc: ProviderError, expected_base: str, head_sha: str
    ) -> str:
        mr = settled(lambda: self._mrs.get(view.iid), sleep=self._sleep, clock=self._clock)
        found = landed(mr)
        if found is not None:
            return found  # it went through; the answer was lost
        current = self._repository.branch_head(self._default)
        if current != expected_base:
            # Whatever GitLab said (need_rebase, not mergeable), the tree it was asked to land
            # is no longer the tested one: test again on the new head.
            raise self._base_moved(view.iid, expected_base, current) from exc
        now = str(mr.get("sha") or "")
        if exc.status == 409 or (now and now != head_sha):
            raise self._head_moved(view.iid, head_sha, now, expected_base, current) from exc
        status = str(mr.get("detailed_merge_status") or "")
        if refusal_kind(status, str(mr.get("state"))) == "conflict":
            raise self._conflicts.error(view.iid, head_sha, view.branch, expected_base) from exc
        raise refused(exc, mr, self._default) from exc

    def _base_moved(self, iid: int, expected: str, actual: str | None) -> BaseMovedError:
        now = actual[:12] if actual else "nowhere"
        return BaseMovedError(
            f"{self._default} moved from {expected[:12]} to {now} since revision !{iid} was "
            "tested; it is tested again",
            expected=expected,
            actual=actual,
        )

    def _head_moved(
        self, iid: int, tested: str, now: str, expected: str, actual: str | None
    ) -> BaseMovedError:
        return BaseMovedError(
            f"revision !{iid} moved from {tested[:12]} to {now[:12]} since it was tested; "
            "it is tested again",
            expected=expected,
            actual=actual,
        )

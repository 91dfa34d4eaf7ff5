"""Revisions as merge requests: the reader (pollers, runtimes) and the writer (executor).

A revision is a merge request into the default branch; its id is the merge request's iid. It is
built from a patch as ONE commit made through the Commits API (``patches``: the patch applied to
a stand-in of its base, turned into create/update/delete/move/chmod actions), on the run's fork
point when GitLab's default branch holds it, else on the default branch's head; then the merge
request. Nothing is pushed from anyone's checkout. Every write is found before it is made: the
idempotency key rides in the merge request's description (a hidden marker) and in the commit's
``Cpe-Key`` trailer; an open merge request from the same branch or for the same work item is
updated instead of duplicated; a write whose answer was lost (a 502) is looked for, never resent
blindly; GitLab's 409 for a second merge request from one branch finds the first.

An update commits ``base + patch`` on top of the revision's head (the patch is the full diff
against its base, not an increment). When the default branch has moved past the revision's
base, GitLab offers no way to record it as a second parent (the Commits API makes
single-parent commits), so the branch is rewritten instead (``force``): one commit of the patch
on the new base, as GitLab's own rebase would rewrite it; the merge request then shows exactly
the patch.

The work item a revision names: with this project's own tracker, "Closes #N" (GitLab closes the
issue on merge); with a tracker elsewhere (``closing`` false) the neutral marker, never a
closing reference, and the item is not looked up here.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence

from adapters.providers import markers
from adapters.providers.gitlab.api import GitLabApi, Json
from adapters.providers.gitlab.commits import Repository
from adapters.providers.gitlab.conflicts import ConflictFinder
from adapters.providers.gitlab.landing import Lander
from adapters.providers.gitlab.merge_requests import MrIndex, MrView, Trusted, mr_iid
from adapters.providers.gitlab.merging import Merger, landed, refusal_kind, refused, settled
from adapters.providers.gitlab.patches import ActionBuilder
from adapters.providers.gitlab.pipeline import PipelineReader
from adapters.providers.gitlab.reviews import ReviewPoster, review_history
from adapters.providers.idempotency import made_after_all
from adapters.support.crashpoints import crashpoint
from domain.errors import ConflictError, NotFoundError, PatchError, ProviderError
from domain.models import (
    Baseline,
    ReviewHistory,
    Revision,
    RevisionFile,
    RevisionId,
    WorkItemId,
)
from domain.ports import BranchUpdate
from domain.results import AgentReview

log = logging.getLogger(__name__)


def _file_status(diff: Json) -> str:
    if diff.get("new_file"):
        return "added"
    if diff.get("deleted_file"):
        return "removed"
    if diff.get("renamed_file"):
        return "renamed"
    return "modified"


def _hunks(diff: Json) -> str | None:
    """A file's diff as text, None for a binary or oversized one (GitLab sends no hunks)."""
    text = diff.get("diff")
    if not isinstance(text, str) or not text.startswith("@@"):
        return None
    return None if diff.get("too_large") or diff.get("collapsed") else text


class GitLabRevisionReader:
    """``RevisionProviderReader`` (and ``BaselineReader``) over the project's merge requests."""

    def __init__(
        self,
        api: GitLabApi,
        mrs: MrIndex,
        repository: Repository,
        default_branch: str,
        pipelines: PipelineReader,
        *,
        trusted: Trusted,
    ) -> None:
        self._api = api
        self._mrs = mrs
        self._repository = repository
        self._default = default_branch
        self._pipelines = pipelines
        self._trusted = trusted

    def list_revisions(self) -> Sequence[Revision]:
        return sorted(self._mrs.sync(pipelines=True), key=lambda r: int(r.id))

    def baseline(self) -> Baseline | None:
        """The pipeline of the default branch's head."""
        head = self._repository.branch_head(self._default)
        if head is None:
            return None
        return Baseline(sha=head, pipeline=self._pipelines.read(head))

    def get_revision_files(self, revision_id: RevisionId) -> Sequence[RevisionFile]:
        iid = mr_iid(revision_id)
        self._mrs.view(iid)
        return [
            RevisionFile(
                path=str(d.get("new_path") or d.get("old_path")),
                status=_file_status(d),  # type: ignore[arg-type]  # values are FileStatus
                patch=_hunks(d),
            )
            for d in self._api.all_pages(
                f"list the diffs of !{iid}", f"/merge_requests/{iid}/diffs"
            )
        ]

    def get_review_history(self, revision_id: RevisionId) -> ReviewHistory:
        """The notes and approvals of trusted people (cpe's own among them): anyone who can
        comment on a merge request could otherwise put words in an agent's prompt. How many
        were left out is counted, and the prompt says so."""
        iid = mr_iid(revision_id)
        self._mrs.view(iid)
        return review_history(self._api, iid, self._trusted)


class GitLabRevisionWriter:
    """``RevisionProviderWriter``: merge requests from patches, reviews, merges; and
    ``RevisionLander``, the merge queue's writes (``landing``)."""

    def __init__(
        self,
        api: GitLabApi,
        mrs: MrIndex,
        repository: Repository,
        default_branch: str,
        *,
        closing: bool,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._api = api
        self._mrs = mrs
        self._repository = repository
        self._default = default_branch
        self._closing = closing
        self._sleep = sleep
        self._clock = clock
        self._actions = ActionBuilder(repository)
        self._reviews = ReviewPoster(api)
        self._merger = Merger(api, default_branch)
        self._conflicts = ConflictFinder(api, repository, default_branch)
        self._lander = Lander(
            api, mrs, repository, self._merger, default_branch, sleep=sleep, clock=clock
        )

    # ------------------------------------------------------------------ creating

    def create_from_patch(
        self,
        work_item_id: WorkItemId,
        branch_name: str,
        title: str,
        body: str,
        patch: str,
        *,
        idempotency_key: str | None = None,
        base_sha: str | None = None,
    ) -> Revision:
        """The merge request's branch is the patch on ``base_sha`` (the run's fork point) where
        the default branch holds that commit on GitLab, else on the default branch's head."""
        item = self._work_item(work_item_id)
        found, how = self._mrs.find(key=idempotency_key, branch=branch_name, work_item=item)
        if found is not None and how == "key":
            return self._mrs.revision(found.iid)
        if found is not None:
            if found.work_item != item:
                raise ConflictError(
                    f"branch {branch_name!r} carries merge request !{found.iid} of work item "
                    f"{found.work_item}"
                )
            head = self._update(found, patch, idempotency_key, base_sha)
            return self._mrs.revision(found.iid, head)
        base = self._base(base_sha)
        actions = self._actions.actions(base, patch)
        if not actions:
            raise PatchError(f"the patch changes nothing on {self._default} at {base[:12]}")
        message = markers.commit_message(title, body, idempotency_key)
        head = self._publish(branch_name, base, actions, message)
        crashpoint("gitlab.revision.after_commit")
        text = markers.pull_body(body, item, idempotency_key, closing=self._closing)
        data = {
            "source_branch": branch_name,
            "target_branch": self._default,
            "title": title,
            "description": text,
        }
        try:
            made = self._api.post("create a merge request", "/merge_requests", data)
            iid = int(made["iid"])
        except ProviderError as exc:
            iid = self._mr_after(exc, idempotency_key, branch_name, item)
        crashpoint("gitlab.revision.after_mr")
        return self._mrs.revision(iid, head)

    def _work_item(self, work_item_id: WorkItemId) -> str:
        """The item's id as the revision names it; with this project's own tracker, an issue
        that must exist (``NotFoundError``)."""
        item = str(work_item_id).strip()
        if not item:
            raise NotFoundError("a revision needs a work item id")
        if self._closing:
            if not item.isdecimal():
                raise NotFoundError(f"work item {item!r} does not exist: ids are issue iids")
            self._api.get(f"get issue #{item}", f"/issues/{item}")
        return item

    def _mr_after(self, exc: ProviderError, key: str | None, branch: str, item: str) -> int:
        """The merge request a failed create made after all (a lost answer), or the open one
        GitLab's 409 says this branch has already."""

        def look() -> int | None:
            found, how = self._mrs.find(key=key, branch=branch, work_item=item)
            return found.iid if found is not None and how != "work item" else None

        return made_after_all(exc, look, what="merge request", name=lambda n: f"!{n}", exists=409)

    def _publish(self, branch: str, base: str, actions: list[Json], message: str) -> str:
        """The branch as one commit of ``actions`` on ``base``: made, or found made."""
        existing = self._repository.branch_head(branch)
        if existing is not None and self._made(existing, base, message):
            return existing  # made by an attempt whose merge request never opened
        try:
            return self._repository.create_commit(
                branch, message, actions, start_sha=base, force=existing is not None
            )
        except ProviderError as exc:
            now = self._repository.branch_head(branch)
            if now is not None and now != existing and self._made(now, base, message):
                return now  # it went through; the answer was lost
            if exc.transient or isinstance(exc, NotFoundError):
                raise
            raise ConflictError(f"cannot commit the patch to branch {branch!r}: {exc}") from exc

    def _made(self, head: str, base: str, message: str) -> bool:
        commit = self._repository.commit(head)
        return (
            self._repository.parents(head) == [base]
            and str(commit.get("message") or "").strip() == message.strip()
        )

    # ------------------------------------------------------------------ updating

    def update_from_patch(
        self,
        revision_id: RevisionId,
        patch: str,
        *,
        idempotency_key: str | None = None,
        base_sha: str | None = None,
    ) -> Revision:
        view = self._mrs.view(mr_iid(revision_id))
        head = self._update(view, patch, idempotency_key, base_sha)
        return self._mrs.revision(view.iid, head)

    def _update(self, view: MrView, patch: str, key: str | None, base_sha: str | None) -> str:
        """Commit ``base + patch`` on the merge request's branch; its head after."""
        if view.state != "open":
            raise ConflictError(f"revision !{view.iid} is {view.state}; it cannot be updated")
        head = self._repository.head(view.branch)
        if key is not None and markers.commit_has_key(self._repository.message(head), key):
            return head
        base = self._base(base_sha)
        message = markers.commit_message(view.title, "Update from a new patch.", key)
        if base in self._bases(head):
            actions = self._actions.actions(base, patch, onto=head)
            if not actions:
                return head  # the same patch again: nothing to commit
            start, force = None, False
        else:
            # The default branch moved past the revision's base: rewrite the branch as the
            # patch on the new base (GitLab cannot record the base as a second parent).
            actions = self._actions.actions(base, patch)
            start, force = base, True
        try:
            made = self._repository.create_commit(
                view.branch, message, actions, start_sha=start, force=force
            )
        except ProviderError as exc:
            now = self._repository.branch_head(view.branch)
            if now is None or now == head or not self._ours(now, key):
                if exc.transient:
                    raise
                raise ConflictError(f"cannot commit the update to {view.branch!r}: {exc}") from exc
            made = now  # it went through; the answer was lost
        self._mrs.mark_dirty(view.iid)
        return made

    def _ours(self, sha: str, key: str | None) -> bool:
        """Whether commit ``sha`` is the one cpe just asked for (its key, or without a key,
        cpe's trailer)."""
        message = self._repository.message(sha)
        return markers.commit_has_key(message, key) if key else markers.commit_is_cpe(message)

    def _bases(self, head: str, depth: int = 50) -> set[str]:
        """Default-branch commits the revision's history is built on: the first parent of its
        first cpe commit (a rebase keeps cpe's messages, so after one it is the new base)."""
        sha: str | None = head
        for _ in range(depth):
            if sha is None:
                break
            if not markers.commit_is_cpe(self._repository.message(sha)):
                return {sha}  # someone else's commit: build on it as it is
            parents = self._repository.parents(sha)
            sha = parents[0] if parents else None
        return set()

    def _base(self, base_sha: str | None) -> str:
        """Where a revision is built: ``base_sha`` when the default branch holds it on GitLab
        (the run forked there), else the default branch's head."""
        head = self._repository.head(self._default)
        if not base_sha or base_sha == head:
            return head
        return base_sha if self._repository.contains(head, base_sha) else head

    # ------------------------------------------------------------------ reviews and merges

    def post_review(
        self,
        revision_id: RevisionId,
        head_sha: str,
        review: AgentReview,
        *,
        idempotency_key: str | None = None,
    ) -> None:
        # The review's own digest (head and content, in a hidden marker) is its key on GitLab:
        # a review already posted with it is not posted again (``ReviewPoster.post``).
        iid = mr_iid(revision_id)
        mr = self._mrs.get(iid)
        self._mrs.view(iid)
        self._reviews.post(iid, mr, head_sha, review)
        self._mrs.mark_dirty(iid)

    def merge(self, revision_id: RevisionId) -> str:
        view = self._mrs.view(mr_iid(revision_id))
        if view.state == "merged" and view.merge_commit:
            return view.merge_commit
        if view.state != "open":
            raise ConflictError(f"revision !{view.iid} is closed without a merge")
        try:
            sha = self._merger.merge(view.iid, view.head_sha)
        except ProviderError as exc:
            sha = self._merged_after(view, exc)
        self._mrs.mark_dirty(view.iid)
        self._mrs.view(view.iid)
        return sha

    def _merged_after(self, view: MrView, exc: ProviderError) -> str:
        mr = settled(lambda: self._mrs.get(view.iid), sleep=self._sleep, clock=self._clock)
        found = landed(mr)
        if found is not None:
            return found  # it went through; the answer was lost
        status = str(mr.get("detailed_merge_status") or "")
        if refusal_kind(status, str(mr.get("state"))) == "conflict":
            base = self._repository.head(self._default)
            raise self._conflicts.error(view.iid, view.head_sha, view.branch, base) from exc
        files = ", ".join(self._conflicts.changed_files(view.iid))
        raise refused(exc, mr, self._default, files) from exc

    def update_branch(
        self, revision_id: RevisionId, *, idempotency_key: str | None = None
    ) -> BranchUpdate:
        return self._lander.update_branch(mr_iid(revision_id))

    def land(self, revision_id: RevisionId, *, expected_base: str, head_sha: str) -> str:
        return self._lander.land(mr_iid(revision_id), expected_base, head_sha)

"""Revisions as pull requests: the reader (pollers, runtimes) and the writer (executor).

A revision is built from a patch through the Git Data API (``TreeBuilder``): blobs, a tree, a
commit, a branch ref, then the pull request — nothing is pushed. Every write is found before it
is made: the idempotency key rides in the pull request body and in commit trailers, an open pull
request from the same branch or for the same work item is updated instead of duplicated, and a
write whose response was lost (a 502) is looked for, never resent blindly.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence

from adapters.providers.github import markers
from adapters.providers.github.api import GitHubApi
from adapters.providers.github.issue_index import IssueIndex
from adapters.providers.github.landing import Lander
from adapters.providers.github.merging import Merger, refused
from adapters.providers.github.patches import TreeBuilder
from adapters.providers.github.pipeline import PipelineReader
from adapters.providers.github.pull_index import PullIndex, PullView
from adapters.providers.github.reviews import ReviewPoster
from adapters.providers.github.trust import Trust
from adapters.providers.github.work_items import issue_number
from adapters.providers.idempotency import made_after_all
from adapters.support.crashpoints import crashpoint
from domain.errors import ConflictError, NotFoundError, ProviderError
from domain.models import (
    Baseline,
    ReviewHistory,
    ReviewInlineComment,
    ReviewSubmission,
    Revision,
    RevisionFile,
    RevisionId,
    WorkItemId,
)
from domain.ports import BranchUpdate
from domain.results import AgentReview

log = logging.getLogger(__name__)

# A work item id of another tracker, as a pull request's marker carries it ("7", "ENG-12").
_FOREIGN_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")
_FILE_STATUSES = {"added": "added", "removed": "removed", "renamed": "renamed", "copied": "added"}


def pull_number(revision_id: str) -> int:
    if not revision_id.isdecimal():
        raise NotFoundError(f"revision {revision_id!r} does not exist: ids are PR numbers")
    return int(revision_id)


class GitHubRevisionReader:
    """``RevisionProviderReader`` over the repository's pull requests."""

    def __init__(
        self,
        api: GitHubApi,
        pulls: PullIndex,
        default_branch: str,
        pipelines: PipelineReader,
        trust: Trust,
    ) -> None:
        self._api = api
        self._pulls = pulls
        self._default = default_branch
        self._pipelines = pipelines
        self._trust = trust

    def list_revisions(self) -> Sequence[Revision]:
        return sorted(self._pulls.sync(pipelines=True), key=lambda r: int(r.id))

    def baseline(self) -> Baseline | None:
        """``BaselineReader``: the check runs and statuses of the default branch's head (conditional
        requests: an unchanged answer costs no rate limit)."""
        head = self._api.branch_head(self._default)
        if head is None:
            return None
        return Baseline(sha=head, pipeline=self._pipelines.read(head))

    def get_revision_files(self, revision_id: RevisionId) -> Sequence[RevisionFile]:
        return [
            RevisionFile(
                path=f.filename,
                status=_FILE_STATUSES.get(f.status, "modified"),  # type: ignore[arg-type]  # values are FileStatus
                patch=f.patch if isinstance(f.patch, str) else None,
            )
            for f in self._api.pull_files(pull_number(revision_id))
        ]

    def get_review_history(self, revision_id: RevisionId) -> ReviewHistory:
        """The reviews and inline comments of trusted people (cpe's own among them): anyone
        can review a public repository's pull request, and an agent would act on it. How many
        were left out is counted, and the prompt says so."""
        number = pull_number(revision_id)
        trusted = self._trust.trusted
        reviews = [
            r
            for r in self._api.reviews(number)
            if r.state != "PENDING"  # a draft only its author sees
        ]
        comments = self._api.review_comments(number)
        kept_reviews = [r for r in reviews if trusted(_login(r.user), _association(r))]
        kept_comments = [c for c in comments if trusted(_login(c.user), _association(c))]
        # A lone inline comment comes in a review of its own with no body: counted once.
        left_out = sum(1 for r in reviews if r not in kept_reviews and (r.body or "").strip())
        left_out += len(comments) - len(kept_comments)
        return ReviewHistory(
            reviews=tuple(
                ReviewSubmission(
                    author=_login(r.user) or "ghost",
                    state=r.state,
                    body=markers.strip_markers(r.body),
                )
                for r in kept_reviews
            ),
            inline_comments=tuple(
                ReviewInlineComment(
                    path=c.path,
                    line=c.line if isinstance(c.line, int) else None,
                    author=_login(c.user) or "ghost",
                    body=c.body,
                )
                for c in kept_comments
            ),
            left_out=left_out,
        )


def _login(user: object) -> str | None:
    login = getattr(user, "login", None)
    return login if isinstance(login, str) else None


def _association(entry: object) -> str | None:
    found = getattr(entry, "author_association", None)
    return found if isinstance(found, str) else None


class GitHubRevisionWriter:
    """``RevisionProviderWriter``: pull requests from patches, reviews, merges; and
    ``RevisionLander``, the merge queue's writes (``landing``).

    ``issues``: the repository's issues when they are the work items (a pull request then says
    "Closes #N", and closes its issue on merge); None when the work items are kept in another
    system: a pull request then names its item with a marker and a visible line, and the item
    is never looked up among this repository's issues."""

    def __init__(
        self, api: GitHubApi, pulls: PullIndex, issues: IssueIndex | None, default_branch: str
    ) -> None:
        self._api = api
        self._pulls = pulls
        self._issues = issues
        self._default = default_branch
        self._trees = TreeBuilder(api)
        self._reviews = ReviewPoster(api)
        self._merger = Merger(api)
        self._lander = Lander(api, pulls, self._merger, default_branch)

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
        """The pull request's branch is the patch on ``base_sha`` (the run's fork point) where
        the default branch holds that commit on GitHub, else on the default branch's head."""
        item = self._work_item(work_item_id)
        found, how = self._pulls.find(key=idempotency_key, branch=branch_name, work_item=item)
        if found is not None and how == "key":
            return self._pulls.revision(found.number)
        if found is not None:
            if found.work_item != item:
                raise ConflictError(
                    f"branch {branch_name!r} carries pull request #{found.number} of work item "
                    f"#{found.work_item}"
                )
            self._update(found, patch, idempotency_key, base_sha)
            return self._pulls.revision(found.number)
        base = self._base(base_sha)
        tree = self._trees.tree_for(base, patch)
        message = markers.commit_message(title, body, idempotency_key)
        self._publish_branch(branch_name, base, tree, message)
        crashpoint("github.revision.after_branch")
        text = markers.pull_body(body, item, idempotency_key, closing=self._issues is not None)
        try:
            number = self._pulls.note(
                self._api.create_pull(title, branch_name, self._default, text)
            ).number
        except ProviderError as exc:
            number = self._pull_after(exc, idempotency_key, branch_name, item)
        return self._pulls.revision(number)

    def _work_item(self, work_item_id: WorkItemId) -> str:
        """The work item's id as a pull request names it: the issue's number, checked to exist,
        when the work items are this repository's issues; else the other tracker's id as it
        is (one word: it is written into a marker and a visible line)."""
        if self._issues is not None:
            return str(self._issues.get(issue_number(work_item_id)).number)
        if not _FOREIGN_ID.fullmatch(work_item_id):
            raise NotFoundError(
                f"work item {work_item_id!r} cannot be named in a pull request: expected an id "
                "of letters, digits, '.', '_' and '-' (a tracker's item id)"
            )
        return str(work_item_id)

    def _pull_after(self, exc: ProviderError, key: str | None, branch: str, item: str) -> int:
        """The pull request a failed create made after all (a lost response, or a race)."""

        def look() -> int | None:
            found, how = self._pulls.find(key=key, branch=branch, work_item=item)
            return found.number if found is not None and how != "work item" else None

        return made_after_all(exc, look, what="pull request", name=lambda n: f"#{n}", exists=422)

    def _publish_branch(self, branch: str, base: str, tree: str, message: str) -> None:
        existing = self._api.branch_head(branch)
        if existing is not None:
            # A branch left by an attempt whose pull request never opened: reuse it when it
            # already holds this change, else point it at the new commit.
            commit = self._api.commit(existing)
            if commit.tree.sha == tree and [p.sha for p in commit.parents] == [base]:
                return
            self._api.move_branch(
                branch, self._api.create_commit(message, tree, [base]), force=True
            )
            return
        head = self._api.create_commit(message, tree, [base])
        try:
            self._api.create_branch(branch, head)
        except ProviderError as exc:
            if self._api.branch_head(branch) != head:
                raise ConflictError(f"cannot create branch {branch!r}: {exc}") from exc

    def update_from_patch(
        self,
        revision_id: RevisionId,
        patch: str,
        *,
        idempotency_key: str | None = None,
        base_sha: str | None = None,
    ) -> Revision:
        view = self._pulls.view(pull_number(revision_id))
        self._update(view, patch, idempotency_key, base_sha)
        return self._pulls.revision(view.number)

    def _update(
        self, view: PullView, patch: str, key: str | None, base_sha: str | None = None
    ) -> None:
        """Commit ``base + patch`` on top of the pull request's head (the patch is the full diff
        against its base, not an increment; the base is the run's fork point where GitHub's
        default branch holds it, else the default branch's head)."""
        if view.state != "open":
            raise ConflictError(f"revision #{view.number} is {view.state}; it cannot be updated")
        head = self._api.commit(view.head_sha)
        if key is not None and markers.commit_has_key(head.message, key):
            return
        base = self._base(base_sha)
        tree = self._trees.tree_for(base, patch)
        parents = [view.head_sha]
        if base not in self._bases(view.head_sha):
            # The default branch moved: record it as a second parent, so the merge base is
            # today's default head and the pull request's files are exactly the patch.
            parents.append(base)
        if len(parents) == 1 and tree == head.tree.sha:
            return  # the same patch again: nothing to commit
        message = markers.commit_message(view.title, "Update from a new patch.", key)
        new_head = self._api.create_commit(message, tree, parents)
        try:
            self._api.move_branch(view.branch, new_head)
        except ProviderError as exc:
            if self._api.branch_head(view.branch) != new_head:
                raise ConflictError(f"cannot move {view.branch!r} to the update: {exc}") from exc
        self._pulls.mark_dirty(view.number)

    def _bases(self, head: str, depth: int = 50) -> set[str]:
        """Default-branch commits the revision's history is built on: the first parent of its
        first cpe commit, and the second parents of cpe's update commits."""
        bases: set[str] = set()
        sha: str | None = head
        for _ in range(depth):
            if sha is None:
                break
            commit = self._api.commit(sha)
            if not markers.commit_is_cpe(commit.message):
                bases.add(sha)  # someone else's commit: build on it as it is
                break
            bases.update(p.sha for p in commit.parents[1:])
            first = commit.parents[0].sha if commit.parents else None
            if first is not None and not markers.commit_is_cpe(self._api.commit(first).message):
                bases.add(first)
                break
            sha = first
        return bases

    def _base(self, base_sha: str | None) -> str:
        """Where a revision is built: ``base_sha`` when the default branch holds it on GitHub
        (the run forked there), else the default branch's head."""
        head = self._head(self._default)
        if not base_sha or base_sha == head:
            return head
        try:
            status = self._api.compare(base_sha, head).status
        except ProviderError as exc:
            if not isinstance(exc, NotFoundError) and exc.status != 422:
                raise
            return head  # a commit GitHub does not have (the run forked from an unpushed one)
        return base_sha if status in ("ahead", "identical") else head

    def _head(self, branch: str) -> str:
        sha = self._api.branch_head(branch)
        if sha is None:
            raise NotFoundError(f"branch {branch!r} does not exist on GitHub")
        return sha

    def post_review(
        self,
        revision_id: RevisionId,
        head_sha: str,
        review: AgentReview,
        *,
        idempotency_key: str | None = None,
    ) -> None:
        # The review's own digest (head and content, in a hidden marker) is its key on GitHub:
        # a review already posted with it is not posted again (``ReviewPoster.post``).
        number = pull_number(revision_id)
        self._pulls.view(number)
        self._reviews.post(number, head_sha, review)
        self._pulls.mark_dirty(number)

    def merge(self, revision_id: RevisionId) -> str:
        view = self._pulls.view(pull_number(revision_id))
        if view.state == "merged":
            return self._merger.merge_commit(view.number)
        if view.state != "open":
            raise ConflictError(f"revision #{view.number} is closed without a merge")
        try:
            sha = self._merger.merge(view.number, view.head_sha)
        except ProviderError as exc:
            sha = self._merged_after(view, exc)
        self._pulls.mark_dirty(view.number)
        self._pulls.view(view.number)
        return sha

    def _merged_after(self, view: PullView, exc: ProviderError) -> str:
        after = self._pulls.view(view.number)
        if after.state == "merged":
            return self._merger.merge_commit(view.number)  # it went through; the answer was lost

        def files() -> str:
            return ", ".join(f.filename for f in self._api.pull_files(view.number))

        raise refused(exc, view.number, files, self._default) from exc

    def update_branch(
        self, revision_id: RevisionId, *, idempotency_key: str | None = None
    ) -> BranchUpdate:
        return self._lander.update_branch(pull_number(revision_id), idempotency_key)

    def land(self, revision_id: RevisionId, *, expected_base: str, head_sha: str) -> str:
        return self._lander.land(pull_number(revision_id), expected_base, head_sha)

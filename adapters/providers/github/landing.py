"""The merge queue's two writes on GitHub (``RevisionLander``, offered by the revision writer).

``update_branch`` merges the default branch's head into the pull request's branch with GitHub's
"Merge a branch" (``POST /merges``), naming that head by its sha so that the branch gets exactly
the head that was read. The new head arrives as a push does: the pull request follows it and CI
runs on it. When the branch already contains the head (a comparison says so) nothing is written,
so calling it again — or again after a write whose answer was lost — changes nothing. A conflict
leaves the branch as it was and names the files (``ConflictFinder``).

``land`` merges the tested head only while the default branch is still where the test had it.
GitHub's merge endpoint guards the head (``sha``) but has no guard for the base: the base is read
just before the merge, and a push to the default branch in between would land a tree no pipeline
ran on. Where branch protection requires branches to be up to date, GitHub itself refuses that
merge ("Head branch is not up to date"); whatever refused it, a merge that fails while the
default branch has moved is a ``BaseMovedError``, as the check before it.
"""

from __future__ import annotations

from adapters.providers.github import markers
from adapters.providers.github.api import GitHubApi
from adapters.providers.github.conflicts import ConflictFinder
from adapters.providers.github.merging import Merger, refused
from adapters.providers.github.pull_index import PullIndex, PullView
from domain.errors import BaseMovedError, ConflictError, NotFoundError, ProviderError
from domain.ports import BranchUpdate

# A comparison's ``status`` when its head contains its base.
_CONTAINS = frozenset({"ahead", "identical"})


class Lander:
    def __init__(
        self, api: GitHubApi, pulls: PullIndex, merger: Merger, default_branch: str
    ) -> None:
        self._api = api
        self._pulls = pulls
        self._merger = merger
        self._default = default_branch
        self._conflicts = ConflictFinder(api)

    # ------------------------------------------------------------------ update_branch

    def update_branch(self, number: int, idempotency_key: str | None) -> BranchUpdate:
        view = self._pulls.view(number)
        if view.state != "open":
            raise ConflictError(f"revision #{number} is {view.state}; it cannot be updated")
        base = self._default_head()
        if self._contains(view.head_sha, base):
            return BranchUpdate(revision=self._pulls.revision(number), base_sha=base)
        # The key rides in a trailer, and the commit is marked as cpe's, so that a later update
        # from a patch reads the default head it brought in as one of the revision's bases.
        message = markers.commit_message(
            f"Merge {self._default} into {view.branch} (cpe merge queue)",
            f"Revision #{number} tested on top of {self._default} at {base[:12]}.",
            idempotency_key,
        )
        try:
            new_head = self._api.merge_branch(view.branch, base, message)
        except ConflictError as exc:
            raise self._conflict(view, base) from exc
        self._pulls.mark_dirty(number)
        # None: GitHub answered 204, the branch held the head already (a push GitHub's pull
        # request did not show yet): the revision is as it is.
        return BranchUpdate(revision=self._pulls.revision(number, new_head), base_sha=base)

    def _conflict(self, view: PullView, base: str) -> ConflictError:
        found = self._conflicts.find(view.head_sha, view.branch, base, self._default)
        where = f"revision #{view.number} conflicts with {self._default} (at {base[:12]})"
        if found.exact:
            message = f"{where} in: {', '.join(found.files)}"
            files = found.files
        elif found.files:
            files = found.files
            message = f"{where}; GitHub names no file, these both sides changed: "
            message += ", ".join(files)
        else:
            files = tuple(f.filename for f in self._api.pull_files(view.number))
            message = f"{where}; GitHub names no file, the revision changes: {', '.join(files)}"
        return ConflictError(message, files=files, detail=found.detail)

    # ------------------------------------------------------------------ land

    def land(self, number: int, expected_base: str, head_sha: str) -> str:
        view = self._pulls.view(number)
        if view.state == "merged":
            return self._merger.merge_commit(number)  # landed before; the answer was lost
        if view.state != "open":
            raise ConflictError(f"revision #{number} is closed without a merge")
        current = self._default_head()
        if current != expected_base:
            raise self._base_moved(number, expected_base, current)
        if view.head_sha != head_sha:
            raise self._head_moved(number, head_sha, view.head_sha, expected_base, current)
        if not self._contains(head_sha, expected_base):
            raise ConflictError(
                f"revision #{number}'s head {head_sha[:12]} does not contain {self._default} "
                f"at {expected_base[:12]}: it was not tested on it"
            )
        try:
            sha = self._merger.merge(number, head_sha)
        except ProviderError as exc:
            sha = self._landed_after(view, exc, expected_base, head_sha)
        self._pulls.mark_dirty(number)
        self._pulls.view(number)
        return sha

    def _landed_after(
        self, view: PullView, exc: ProviderError, expected_base: str, head_sha: str
    ) -> str:
        after = self._pulls.view(view.number)
        if after.state == "merged":
            return self._merger.merge_commit(view.number)  # it went through; the answer was lost
        current = self._api.branch_head(self._default)
        if current != expected_base:
            # Whatever GitHub said (not up to date, not mergeable, base modified), the tree it
            # was asked to land is no longer the tested one: test again on the new head.
            raise self._base_moved(view.number, expected_base, current) from exc
        if exc.status == 409 or after.head_sha != head_sha:
            # GitHub's head guard: "Head branch was modified", a push since the test.
            raise self._head_moved(
                view.number, head_sha, after.head_sha, expected_base, current
            ) from exc

        def files() -> str:
            return ", ".join(f.filename for f in self._api.pull_files(view.number))

        raise refused(exc, view.number, files, self._default) from exc

    def _base_moved(self, number: int, expected: str, actual: str | None) -> BaseMovedError:
        now = actual[:12] if actual else "nowhere"
        return BaseMovedError(
            f"{self._default} moved from {expected[:12]} to {now} since revision #{number} was "
            "tested; it is tested again",
            expected=expected,
            actual=actual,
        )

    def _head_moved(
        self, number: int, tested: str, now: str, expected: str, actual: str | None
    ) -> BaseMovedError:
        return BaseMovedError(
            f"revision #{number} moved from {tested[:12]} to {now[:12]} since it was tested; "
            "it is tested again",
            expected=expected,
            actual=actual,
        )

    # ------------------------------------------------------------------ reading

    def _default_head(self) -> str:
        sha = self._api.branch_head(self._default)
        if sha is None:
            raise NotFoundError(f"branch {self._default!r} does not exist on GitHub")
        return sha

    def _contains(self, head: str, base: str) -> bool:
        return head == base or self._api.compare(base, head).status in _CONTAINS

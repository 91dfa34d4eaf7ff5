"""Merging a local revision into the default branch: a real merge commit, made without a checkout.

The merge is computed with ``git merge-tree --write-tree`` (git >= 2.38), which writes only
objects, so a conflict leaves nothing behind but unreferenced blobs. The merge commit always has
two parents (the default head, then the revision head), like a pull request merged with "Create a
merge commit".

How the default branch moves:

- not checked out anywhere: ``update-ref`` with the old head as the expected value, so a commit
  that lands on it meanwhile makes us recompute instead of being lost;
- checked out (usually in the user's own checkout): ``git merge --ff-only <merge commit>`` in that
  worktree. The merge commit's first parent is the checked-out head, so this is a fast-forward
  that updates the index and files exactly as ``git pull`` would: local edits to files the merge
  does not touch survive, and git refuses — changing nothing — when an edit or an untracked file
  is in the way or a merge/rebase is in progress. The refusal is not the revision's fault: it
  becomes a ``MergeWaitError`` with git's reason, and the merge is tried again on every poll
  until the checkout lets it through. Moving the ref alone would leave the checkout showing the
  merged changes reverted.
"""

from __future__ import annotations

import sqlite3
from typing import TYPE_CHECKING

from adapters.providers.git import GitRepo
from adapters.providers.git_conflicts import merge_commits
from adapters.providers.local.db import now
from adapters.support.crashpoints import crashpoint
from domain.errors import ConflictError, MergeWaitError
from domain.models import RevisionId

if TYPE_CHECKING:  # the store imports this module (a hand merge is recorded as a merge)
    from adapters.providers.local.store import RevisionStore

# A default branch that moves this many times while we merge is being written to continuously.
_ATTEMPTS = 5


def merge_revision(store: RevisionStore, revision_id: RevisionId) -> str:
    """Merge the revision's head into the default branch and return the merge commit."""
    repo = store.repo
    with store.write_lock:
        with store.db.read() as conn:
            row = store.load(conn, revision_id)
        done = already_merged(store, row)
        if done is not None:
            return done
        head: str = row["head_sha"]
        for _ in range(_ATTEMPTS):
            target = store.default_head()
            base = repo.merge_base(target, head)
            if repo.is_ancestor(head, target):
                # Already in the default branch: merged by hand, or by us before a crash
                # stopped the database write.
                merge_sha = merge_bringing(repo, target, head)
                if merge_sha != head:
                    base = repo.merge_base(f"{merge_sha}^1", head)
                record_merge(store, row["id"], merge_sha, base)
                return merge_sha
            tree = _merge_tree(repo, store.default_branch, target, head, revision_id)
            merge_sha = repo.commit_tree(tree, [target, head], merge_message(store, row))
            if advance(store, target, merge_sha):
                crashpoint("local.merge.after_ref")
                record_merge(store, row["id"], merge_sha, base)
                return merge_sha
        raise ConflictError(
            f"{store.default_branch} kept moving while revision #{revision_id} was merged"
        )


def already_merged(store: RevisionStore, row: sqlite3.Row) -> str | None:
    """The merge commit of a merged revision (merged before a crash stopped its answer); None
    when it is open; ``ConflictError`` when it was closed."""
    if row["state"] == "merged":
        merged: str = row["merge_sha"]
        return merged
    if row["state"] != "open":
        raise ConflictError(f"revision #{row['id']} is {row['state']}; it cannot be merged")
    return None


def merge_message(store: RevisionStore, row: sqlite3.Row) -> str:
    return (
        f"Merge revision #{row['id']} ({row['branch']}) into {store.default_branch}\n\n"
        f"{row['title']}\n"
    )


def _merge_tree(repo: GitRepo, branch: str, target: str, head: str, revision_id: str) -> str:
    merged = merge_commits(repo, target, head)
    if merged.tree is None:
        raise ConflictError(
            f"revision #{revision_id} conflicts with {branch} in: {', '.join(merged.files)}",
            files=merged.files,
            detail=merged.detail,
            status=None,
        )
    return merged.tree


def advance(store: RevisionStore, old: str, new: str) -> bool:
    """Move the default branch from ``old`` to ``new``; False when it moved under us."""
    repo = store.repo
    ref = f"refs/heads/{store.default_branch}"
    holder = repo.checked_out_at(store.default_branch)
    if holder is None:
        try:
            repo.update_ref(ref, new, old, reason=f"cpe: merge {new[:12]}")
        except ConflictError:
            if repo.resolve(ref) != old:
                return False
            raise
        return True
    result = repo.run_status(
        "-C", str(holder.path), "merge", "--ff-only", "--no-autostash", "--quiet", new
    )
    if result.status == 0:
        return True
    if repo.resolve(ref) != old:
        return False  # a commit landed on the checked-out branch: recompute on top of it
    reason = " ".join((result.stderr or result.text).split())
    raise MergeWaitError(
        f"{store.default_branch} is checked out at {holder.path} and git refused to update it: "
        f"{reason}",
        reason=f"the checkout at {holder.path} is in the way: {reason}",
    )


def merge_bringing(repo: GitRepo, target: str, head: str) -> str:
    """The merge commit on ``target``'s first-parent line whose other parent is ``head``, or
    ``head`` itself when it arrived by fast-forward."""
    listing = repo.run("rev-list", "--first-parent", "--merges", "--parents", "-n", "1000", target)
    for line in listing.text.splitlines():
        commit, *parents = line.split()
        if head in parents[1:]:
            return commit
    return head


def record_merge(store: RevisionStore, revision: int, merge_sha: str, base: str | None) -> None:
    with store.db.write() as conn:
        conn.execute(
            "UPDATE revisions SET state = 'merged', merge_sha = ?, merge_base = ?, "
            "updated_at = ? WHERE id = ?",
            (merge_sha, base, now(), revision),
        )

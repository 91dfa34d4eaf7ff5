"""The merge queue's two writes on the local provider (``RevisionLander``).

``update_branch`` merges the default branch's head into a revision's branch (a merge commit made
with ``git merge-tree``, no checkout), so the local pipeline, queued for the new head as for any
update, runs on exactly the tree the default branch would move to, before the other revisions'
runs (``RevisionStore.landing_first``). ``land`` then merges that head only while the default
branch is still where the test had it: the merge's first parent is that head and its tree the
tested one.
"""

from __future__ import annotations

from adapters.providers.git_conflicts import merge_commits
from adapters.providers.local.db import now
from adapters.providers.local.merge import (
    advance,
    already_merged,
    merge_bringing,
    merge_message,
    record_merge,
)
from adapters.providers.local.store import RevisionStore
from adapters.support.crashpoints import crashpoint
from domain.errors import BaseMovedError, ConflictError
from domain.models import RevisionId
from domain.ports import BranchUpdate


def update_branch(store: RevisionStore, revision_id: RevisionId) -> BranchUpdate:
    """Bring the revision up to date with the default branch; unchanged when it already
    contains its head. A conflict raises ``ConflictError`` with the files and hunks."""
    repo = store.repo
    with store.write_lock:
        with store.db.read() as conn:
            row = store.load(conn, revision_id)
        if row["state"] != "open":
            raise ConflictError(f"revision #{row['id']} is {row['state']}; it cannot be updated")
        head: str = row["head_sha"]
        base = store.default_head()
        if repo.is_ancestor(base, head):
            with store.db.write() as conn:  # its run, if still queued, goes first
                store.landing_first(conn, row["id"], head)
            return BranchUpdate(revision=store.get(revision_id), base_sha=base)
        merged = merge_commits(repo, head, base)
        if merged.tree is None:
            raise ConflictError(
                f"revision #{row['id']} conflicts with {store.default_branch} (at {base[:12]}) "
                f"in: {', '.join(merged.files)}",
                files=merged.files,
                detail=merged.detail,
                status=None,
            )
        message = (
            f"Merge {store.default_branch} into {row['branch']}\n\n"
            f"cpe merge queue: revision #{row['id']} tested on top of {base[:12]}.\n"
        )
        new_head = repo.commit_tree(merged.tree, [head, base], message)
        with store.db.write() as conn:
            conn.execute(
                "UPDATE revisions SET head_sha = ?, updated_at = ? WHERE id = ?",
                (new_head, now(), row["id"]),
            )
            store.queue_pipeline(conn, row["id"], new_head)
            store.landing_first(conn, row["id"], new_head)
            store.publish(row["id"], row["branch"], new_head)
            crashpoint("local.update.after_ref")  # the row is not committed yet
    store.on_new_head()
    return BranchUpdate(revision=store.get(revision_id), base_sha=base)


def land(store: RevisionStore, revision_id: RevisionId, expected_base: str, head_sha: str) -> str:
    """Merge the tested head ``head_sha`` while the default branch is at ``expected_base``."""
    repo = store.repo
    with store.write_lock:
        with store.db.read() as conn:
            row = store.load(conn, revision_id)
        done = already_merged(store, row)
        if done is not None:
            return done
        current = store.default_head()
        if row["head_sha"] == head_sha and repo.is_ancestor(head_sha, current):
            # Merged already: by us before a crash stopped the database write (or by hand).
            merge_sha = merge_bringing(repo, current, head_sha)
            record_merge(store, row["id"], merge_sha, repo.merge_base(f"{merge_sha}^1", head_sha))
            return merge_sha
        if current != expected_base:
            raise BaseMovedError(
                f"{store.default_branch} moved from {expected_base[:12]} to {current[:12]} since "
                f"revision #{row['id']} was tested; it is tested again",
                expected=expected_base,
                actual=current,
            )
        if row["head_sha"] != head_sha:
            raise BaseMovedError(
                f"revision #{row['id']} moved from {head_sha[:12]} to {row['head_sha'][:12]} "
                "since it was tested; it is tested again",
                expected=expected_base,
                actual=current,
            )
        if not repo.is_ancestor(expected_base, head_sha):
            raise ConflictError(
                f"revision #{row['id']}'s head {head_sha[:12]} does not contain "
                f"{store.default_branch} at {expected_base[:12]}: it was not tested on it"
            )
        # The default branch is an ancestor of the head: the merge's tree is the head's own.
        tree = repo.tree_of(head_sha)
        merge_sha = repo.commit_tree(tree, [expected_base, head_sha], merge_message(store, row))
        if not advance(store, expected_base, merge_sha):
            raise BaseMovedError(
                f"{store.default_branch} moved while revision #{row['id']} was merged; it is "
                "tested again",
                expected=expected_base,
                actual=store.default_head(),
            )
        crashpoint("local.merge.after_ref")
        record_merge(store, row["id"], merge_sha, repo.merge_base(f"{merge_sha}^1", head_sha))
        return merge_sha

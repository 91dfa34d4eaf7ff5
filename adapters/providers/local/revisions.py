"""Revisions in the local tracker: the reader (pollers, runtimes) and the writer (executor).

A revision is a branch built from a patch without a checkout: the patch is applied to the default
branch's tree in a temporary index, and the commit is made with ``commit-tree`` (see
``GitRepo.tree_with_patch``). Git objects are written first and the refs are moved inside the
database transaction that records them, so a failure leaves at most unreferenced objects.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Callable, Sequence

from adapters.providers.local import landing
from adapters.providers.local.db import now
from adapters.providers.local.files import changed_files
from adapters.providers.local.merge import merge_revision
from adapters.providers.local.store import (
    REVIEW_KEYS,
    REVISION_KEYS,
    REVISION_UPDATE_KEYS,
    RevisionStore,
    work_item_of,
)
from adapters.providers.local.work_items import require_work_item
from adapters.support.crashpoints import crashpoint
from domain.errors import ConflictError, NotFoundError
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

REVIEWER = "cpe-reviewer"

# The states GitHub gives reviews, so prompts and the history read the same on both providers.
_REVIEW_STATES = {"approve": "APPROVED", "needs-changes": "CHANGES_REQUESTED"}


class LocalRevisionReader:
    """``RevisionProviderReader``: revisions, their files and their reviews."""

    def __init__(self, store: RevisionStore) -> None:
        self._store = store

    def list_revisions(self) -> Sequence[Revision]:
        """Every revision with the pipeline of its current head (a database read, never a run)."""
        return self._store.list()

    def baseline(self) -> Baseline | None:
        """``BaselineReader``: the pipeline on the default branch's head (queued when new)."""
        return self._store.baseline()

    def on_change(self, callback: Callable[[], None]) -> None:
        """``ChangeNotifier``: ``callback`` after each pipeline result is recorded."""
        self._store.on_pipeline_done.append(callback)

    def get_revision_files(self, revision_id: RevisionId) -> Sequence[RevisionFile]:
        with self._store.db.read() as conn:
            row = self._store.load(conn, revision_id)
        head: str = row["head_sha"]
        # A merged revision keeps the base it was merged from; against today's default branch
        # (which now contains it) it would show no files.
        base = row["merge_base"] or self._store.repo.merge_base(self._store.default_head(), head)
        return changed_files(self._store.repo, base or head, head)

    def get_review_history(self, revision_id: RevisionId) -> ReviewHistory:
        with self._store.db.read() as conn:
            row = self._store.load(conn, revision_id)
            reviews = conn.execute(
                "SELECT author, state, body FROM reviews WHERE revision_id = ? ORDER BY id",
                (row["id"],),
            ).fetchall()
            comments = conn.execute(
                "SELECT c.path, c.line, c.author, c.body FROM review_comments c "
                "JOIN reviews r ON c.review_id = r.id WHERE r.revision_id = ? ORDER BY c.id",
                (row["id"],),
            ).fetchall()
        return ReviewHistory(
            reviews=tuple(
                ReviewSubmission(author=r["author"], state=r["state"], body=r["body"])
                for r in reviews
            ),
            inline_comments=tuple(
                ReviewInlineComment(
                    path=c["path"], line=c["line"], author=c["author"], body=c["body"]
                )
                for c in comments
            ),
        )


class LocalRevisionWriter:
    """``RevisionProviderWriter``: revisions from patches, reviews, merges."""

    def __init__(self, store: RevisionStore) -> None:
        self._store = store

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
        """The revision's branch is the patch on ``base_sha`` (the run's fork point) where the
        default branch holds that commit, else on the default branch's head."""
        store = self._store
        with store.write_lock:
            with store.db.read() as conn:
                seen = _seen_key(conn, REVISION_KEYS, idempotency_key)
                existing = conn.execute(
                    "SELECT * FROM revisions WHERE branch = ? AND state = 'open'", (branch_name,)
                ).fetchone()
                if store.foreign_tracker:
                    local, key = None, foreign_key(work_item_id)
                    body = named_body(body, key)
                else:
                    local, key = require_work_item(conn, work_item_id), None
            if seen is not None:
                return store.get(str(seen))
            if existing is not None:
                if work_item_of(existing) != (key or str(local)):
                    raise ConflictError(
                        f"branch {branch_name!r} carries open revision #{existing['id']} "
                        f"of work item {work_item_of(existing)}"
                    )
                # The same work item's revision on the same branch: update, never duplicate.
                self._update(existing, patch, REVISION_KEYS, idempotency_key, base_sha)
                return store.get(str(existing["id"]))
            store.repo.check_branch_name(branch_name)
            base = _base(store, base_sha)
            tree = store.repo.tree_with_patch(base, patch)
            head = store.repo.commit_tree(tree, [base], _message(title, body))
            with store.db.write() as conn:
                stamp = now()
                cursor = conn.execute(
                    "INSERT INTO revisions (work_item_id, work_item_key, title, body, branch, "
                    "head_sha, state, created_at, updated_at) "
                    "VALUES (?, ?, ?, ?, ?, ?, 'open', ?, ?)",
                    (local, key, title, body, branch_name, head, stamp, stamp),
                )
                revision = cursor.lastrowid
                assert revision is not None  # an INSERT always sets it
                _record_key(conn, REVISION_KEYS, idempotency_key, revision)
                store.queue_pipeline(conn, revision, head)
                store.publish(revision, branch_name, head)
                crashpoint("local.revision.after_branch")  # the row is not committed yet
        store.on_new_head()
        return store.get(str(revision))

    def update_from_patch(
        self,
        revision_id: RevisionId,
        patch: str,
        *,
        idempotency_key: str | None = None,
        base_sha: str | None = None,
    ) -> Revision:
        store = self._store
        with store.write_lock:
            with store.db.read() as conn:
                seen = _seen_key(conn, REVISION_UPDATE_KEYS, idempotency_key)
                row = store.load(conn, revision_id)
            if seen is None:
                self._update(row, patch, REVISION_UPDATE_KEYS, idempotency_key, base_sha)
        return store.get(revision_id)

    def _update(
        self,
        row: sqlite3.Row,
        patch: str,
        key_kind: str,
        idempotency_key: str | None,
        base_sha: str | None = None,
    ) -> None:
        """Commit ``base + patch`` on top of the revision's head (the patch is the full diff
        against its base, not an increment; the base is the run's fork point, as for a new
        revision). Called with the write lock held."""
        store = self._store
        if row["state"] != "open":
            raise ConflictError(f"revision #{row['id']} is {row['state']}; it cannot be updated")
        old_head: str = row["head_sha"]
        base = _base(store, base_sha)
        floor = store.repo.merge_base(old_head, store.default_head())
        if floor and floor != base and store.repo.is_ancestor(base, floor):
            # The revision already holds landings newer than the run's fork point (the merge
            # queue merged them in): built on the older base, the new head would revert them.
            base = floor
        tree = store.repo.tree_with_patch(base, patch)
        parents = [old_head]
        if not store.repo.is_ancestor(base, old_head):
            # The default branch moved: record it as a second parent, so the merge base of the
            # revision is today's default head and its files are exactly the patch.
            parents.append(base)
        changed = len(parents) > 1 or tree != store.repo.tree_of(old_head)
        head = old_head
        if changed:
            message = f"{row['title']}\n\nUpdate revision #{row['id']} from a new patch."
            head = store.repo.commit_tree(tree, parents, message)
        with store.db.write() as conn:
            if changed:
                conn.execute(
                    "UPDATE revisions SET head_sha = ?, updated_at = ? WHERE id = ?",
                    (head, now(), row["id"]),
                )
                store.queue_pipeline(conn, row["id"], head)
                store.publish(row["id"], row["branch"], head)
            rerun = not changed and store.rerun_failed_pipeline(conn, row["id"], head)
            _record_key(conn, key_kind, idempotency_key, row["id"])
        if changed or rerun:
            store.on_new_head()

    def post_review(
        self,
        revision_id: RevisionId,
        head_sha: str,
        review: AgentReview,
        *,
        idempotency_key: str | None = None,
    ) -> None:
        with self._store.db.write() as conn:
            row = self._store.load(conn, revision_id)
            if _seen_key(conn, REVIEW_KEYS, idempotency_key) is not None:
                return  # posted before a crash or a lost answer: not twice
            cursor = conn.execute(
                "INSERT INTO reviews (revision_id, head_sha, author, state, body, created_at) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                (row["id"], head_sha, REVIEWER, _REVIEW_STATES[review.verdict], review.summary,
                 now()),
            )  # fmt: skip
            conn.executemany(
                "INSERT INTO review_comments (review_id, path, line, author, body) "
                "VALUES (?, ?, ?, ?, ?)",
                [(cursor.lastrowid, c.path, c.line, REVIEWER, c.body) for c in review.comments],
            )
            assert cursor.lastrowid is not None  # an INSERT always sets it
            _record_key(conn, REVIEW_KEYS, idempotency_key, cursor.lastrowid)
            conn.execute(
                "UPDATE revisions SET reviewed_sha = ?, updated_at = ? WHERE id = ?",
                (head_sha, now(), row["id"]),
            )

    def merge(self, revision_id: RevisionId) -> str:
        return merge_revision(self._store, revision_id)

    def update_branch(
        self, revision_id: RevisionId, *, idempotency_key: str | None = None
    ) -> BranchUpdate:
        """``RevisionLander``: the default branch merged into the revision (a no-op when it is
        up to date, so a retry under the same key changes nothing)."""
        return landing.update_branch(self._store, revision_id)

    def land(self, revision_id: RevisionId, *, expected_base: str, head_sha: str) -> str:
        return landing.land(self._store, revision_id, expected_base, head_sha)


def foreign_key(work_item_id: str) -> str:
    """Another system's work item key, as the forge keeps it (it cannot look it up)."""
    key = str(work_item_id).strip()
    if not key or any(c.isspace() for c in key):
        raise NotFoundError(
            f"work item {work_item_id!r} does not exist: expected the tracker's key (PROJ-12)"
        )
    return key


def named_body(body: str, key: str) -> str:
    """A revision's text naming another system's item by its key (``Work item: PROJ-12``): the
    engine's ``Work item: #PROJ-12`` line becomes it (``#`` is a number on a forge, not a
    key), or it is added."""
    line = f"Work item: {key}"
    named, found = re.subn(
        rf"^Work item: #?{re.escape(key)}[ \t]*$", line, body, count=1, flags=re.M
    )
    return named if found else f"{body.rstrip()}\n\n{line}".lstrip()


def _base(store: RevisionStore, base_sha: str | None) -> str:
    """Where a revision is built: ``base_sha`` when the default branch holds it (the run forked
    there), else the default branch's head."""
    head = store.default_head()
    known = bool(base_sha) and store.repo.resolve(str(base_sha)) is not None
    return str(base_sha) if known and store.repo.is_ancestor(str(base_sha), head) else head


def _message(title: str, body: str) -> str:
    return f"{title}\n\n{body}".strip() + "\n"


def _seen_key(conn: sqlite3.Connection, kind: str, key: str | None) -> int | None:
    if key is None:
        return None
    row = conn.execute(
        "SELECT entity_id FROM idempotency_keys WHERE kind = ? AND key = ?", (kind, key)
    ).fetchone()
    return None if row is None else int(row["entity_id"])


def _record_key(conn: sqlite3.Connection, kind: str, key: str | None, entity: int) -> None:
    if key is not None:
        conn.execute(
            "INSERT OR IGNORE INTO idempotency_keys (kind, key, entity_id, created_at) "
            "VALUES (?, ?, ?, ?)",
            (kind, key, entity, now()),
        )

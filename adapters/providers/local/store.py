"""What the local provider's readers, writers and pipeline runner share: the tracker database,
the repository, the default branch, and how a revision row becomes a domain ``Revision``.

A revision's head lives in the database. Two refs follow it: the branch the user sees
(``refs/heads/<branch>``) and a hidden ref (``refs/cpe/revisions/<id>``) that keeps every head
reachable for ``git gc`` even when someone deletes or resets the branch — the runtime's worktree
cleanup deletes a local branch of the same name (S001-02), so the branch alone is not safe.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

import structlog

from adapters.providers.git import GitRepo
from adapters.providers.local.db import Database, now
from adapters.providers.local.work_items import row_id
from domain.errors import NotFoundError
from domain.models import Baseline, Pipeline, Revision, RevisionId, WorkItemId

log = structlog.get_logger(__name__)

REVISION_KEYS = "revision"
REVISION_UPDATE_KEYS = "revision-update"
REVIEW_KEYS = "review"


def hidden_ref(revision_id: int) -> str:
    return f"refs/cpe/revisions/{revision_id}"


def work_item_of(row: sqlite3.Row) -> str | None:
    """A revision row's work item: another system's key (``PROJ-12``), else the local
    tracker's item, else none."""
    key: str | None = row["work_item_key"]
    if key is not None:
        return key
    local = row["work_item_id"]
    return None if local is None else str(local)


@dataclass
class RevisionStore:
    db: Database
    repo: GitRepo
    default_branch: str
    pipeline_configured: bool = False
    # The pipeline's one check, by name (its command): what a revision's failure and the
    # default branch's are compared by.
    pipeline_name: str = "pipeline"
    baseline_enabled: bool = False  # run it on the default branch's head too
    # The work items are another system's (Linear, Jira): a revision keeps its item's key
    # (``work_item_key``), and the local work items are never read.
    foreign_tracker: bool = False
    # Serialises every read-modify-write of refs (create, update, merge): git's ref locks would
    # refuse a racing update, but one lock makes the refusal impossible instead of retried.
    write_lock: threading.Lock = field(default_factory=threading.Lock)
    # Told about every new revision head, so the pipeline runner can start on it.
    on_new_head: Callable[[], None] = lambda: None
    # Told when a pipeline run's result is recorded (``ChangeNotifier``: the engine polls now).
    on_pipeline_done: list[Callable[[], None]] = field(default_factory=list)

    def pipeline_done(self) -> None:
        for callback in list(self.on_pipeline_done):
            try:
                callback()
            except Exception:  # a listener's failure is its own; the result is recorded
                log.exception("a pipeline listener failed")

    def default_head(self) -> str:
        return self.repo.branch_head(self.default_branch)

    def load(self, conn: sqlite3.Connection, revision_id: str) -> sqlite3.Row:
        row: sqlite3.Row | None = conn.execute(
            "SELECT * FROM revisions WHERE id = ?", (row_id("revision", revision_id),)
        ).fetchone()
        if row is None:
            raise NotFoundError(f"revision {revision_id!r} does not exist")
        return row

    def get(self, revision_id: str) -> Revision:
        with self.db.read() as conn:
            row = self.load(conn, revision_id)
            run = conn.execute(
                "SELECT * FROM pipeline_runs WHERE revision_id = ? AND head_sha = ?",
                (row["id"], row["head_sha"]),
            ).fetchone()
        return self.to_model(row, run)

    def list(self) -> list[Revision]:
        self._notice_hand_merges()
        with self.db.read() as conn:
            rows = conn.execute("SELECT * FROM revisions ORDER BY id").fetchall()
            runs = {
                (run["revision_id"], run["head_sha"]): run
                for run in conn.execute(
                    "SELECT p.* FROM pipeline_runs p JOIN revisions r "
                    "ON p.revision_id = r.id AND p.head_sha = r.head_sha"
                )
            }
        return [self.to_model(row, runs.get((row["id"], row["head_sha"]))) for row in rows]

    def _notice_hand_merges(self) -> None:
        """An open revision whose head a person merged into the default branch (``git merge``,
        a fast-forward, a merge commit) is merged: recorded as if cpe had merged it, so the
        engine marks its item done, as on a forge where a person merges the pull request.
        Whoever reads first records it (the engine's poll, or ``cpe work list``: the row is
        the same); the engine's console says the merge, so nothing is logged here (a
        read-only command's output stays its own)."""
        with self.db.read() as conn:
            open_ = conn.execute(
                "SELECT id, head_sha FROM revisions WHERE state = 'open'"
            ).fetchall()
        if not open_:
            return
        target = self.default_head()
        for row in open_:
            head: str = row["head_sha"]
            if not self.repo.is_ancestor(head, target):  # a fast-forward: the same commit
                continue
            from adapters.providers.local.merge import merge_bringing, record_merge  # noqa: PLC0415

            with self.write_lock:
                merge_sha = merge_bringing(self.repo, target, head)
                base = self.repo.merge_base(f"{merge_sha}^1", head) if merge_sha != head else None
                record_merge(self, row["id"], merge_sha, base)

    def to_model(self, row: sqlite3.Row, run: sqlite3.Row | None) -> Revision:
        work_item = work_item_of(row)
        return Revision(
            id=RevisionId(str(row["id"])),
            title=row["title"],
            work_item_id=WorkItemId(work_item) if work_item is not None else None,
            branch=row["branch"],
            head_sha=row["head_sha"],
            state=row["state"],
            pipeline=self._pipeline(row, run),
            reviewed_sha=row["reviewed_sha"],
        )

    def _pipeline(self, row: sqlite3.Row, run: sqlite3.Row | None) -> Pipeline:
        if run is None:
            # An open head not queued yet (a crash between the write and the queue) is picked up
            # by the runner's recovery; until it finishes it is pending, never "none".
            configured = self.pipeline_configured and row["state"] == "open"
            return Pipeline(status="pending") if configured else Pipeline()
        return self.pipeline_of(run)

    def pipeline_of(self, run: sqlite3.Row) -> Pipeline:
        """A pipeline run's row (a revision's or the default branch's) as a ``Pipeline``."""
        if run["status"] in ("pending", "running"):
            return Pipeline(status="pending", url=run["url"])
        failed = (self.pipeline_name,) if run["status"] == "failure" else ()
        return Pipeline(
            status=run["status"], reason=run["reason"], url=run["url"], failed_checks=failed
        )

    def baseline(self) -> Baseline | None:
        """The pipeline on the default branch's head; a head not run yet is queued (and the
        runner told). None when no pipeline is configured."""
        if not self.baseline_enabled:
            return None
        head = self.default_head()
        with self.db.write() as conn:
            row = conn.execute(
                "SELECT * FROM baseline_runs WHERE head_sha = ? AND command = ?",
                (head, self.pipeline_name),
            ).fetchone()
            if row is None:
                self.queue_baseline(conn, head)
        if row is None:
            self.on_new_head()
            return Baseline(sha=head, pipeline=Pipeline(status="pending"))
        return Baseline(sha=head, pipeline=self.pipeline_of(row))

    def queue_baseline(self, conn: sqlite3.Connection, head_sha: str) -> None:
        conn.execute(
            "INSERT OR IGNORE INTO baseline_runs (head_sha, command, status, queued_at) "
            "VALUES (?, ?, 'pending', ?)",
            (head_sha, self.pipeline_name, now()),
        )

    def queue_pipeline(self, conn: sqlite3.Connection, revision_id: int, head_sha: str) -> None:
        if self.pipeline_configured:
            conn.execute(
                "INSERT OR IGNORE INTO pipeline_runs (revision_id, head_sha, status, queued_at) "
                "VALUES (?, ?, 'pending', ?)",
                (revision_id, head_sha, now()),
            )

    def landing_first(self, conn: sqlite3.Connection, revision_id: int, head_sha: str) -> None:
        """The merge queue tests ``head_sha`` of the revision to land it: its queued run goes
        before the other revisions' (``PipelineRunner``)."""
        conn.execute(
            "UPDATE pipeline_runs SET landing = 1 "
            "WHERE revision_id = ? AND head_sha = ? AND status = 'pending'",
            (revision_id, head_sha),
        )

    def rerun_failed_pipeline(self, conn: sqlite3.Connection, revision_id: int, head: str) -> bool:
        """Queue ``head``'s failed run again; False when it has none. For an update that left
        the head as it was: whoever was asked to fix a red run found nothing to change, so the
        failure may not be the code's (a flaky test, a checkout that failed) and gets a second
        run, instead of sending the same red head back for another attempt at once."""
        if not self.pipeline_configured:
            return False
        cursor = conn.execute(
            "UPDATE pipeline_runs SET status = 'pending', reason = NULL, url = NULL, "
            "queued_at = ?, started_at = NULL, finished_at = NULL, worktree_path = NULL "
            "WHERE revision_id = ? AND head_sha = ? AND status = 'failure'",
            (now(), revision_id, head),
        )
        if cursor.rowcount:
            log.info(
                "the update left the head as it was; its failed pipeline runs again",
                revision_id=revision_id,
                head_sha=head,
            )
        return cursor.rowcount > 0

    def publish(self, revision_id: int, branch: str, head: str) -> None:
        """Point the hidden ref and the branch at ``head``.

        A branch checked out in some worktree is left where it is: moving it would make that
        checkout look modified. The hidden ref and the database still hold the new head, and the
        next write publishes the branch again.
        """
        self.repo.update_ref(hidden_ref(revision_id), head, reason=f"cpe revision {revision_id}")
        holder = self.repo.checked_out_at(branch)
        if holder is not None:
            log.warning(
                "revision branch is checked out; not moving it",
                revision_id=revision_id,
                branch=branch,
                worktree=str(holder.path),
            )
            return
        self.repo.update_ref(f"refs/heads/{branch}", head, reason=f"cpe revision {revision_id}")

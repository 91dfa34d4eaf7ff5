"""When the local pipeline runs: one background thread owned by the provider.

Why a thread and not a ``run_pending()`` called from a poll: a test run takes minutes, and the
revision poller (or the executor, if the writer ran it) would stop doing its job for that long.
The writer only queues the new head (a ``pending`` row, in the same transaction as the head) and
wakes the thread; ``list_revisions`` only reads rows. The queue lives in the database, so a
restart resumes it: a run interrupted by a crash goes back to ``pending`` and its leftover
worktree is removed.

Runs go one at a time, oldest first — on a small machine two test suites at once are slower than
two in a row — except that a head the merge queue tests to land it goes first (``landing``):
what lands waits for no revision made meanwhile (a burst of new revisions held the queue for
their whole runs). A run whose revision gets a newer head is cancelled: its result would describe a
head nobody will look at.

**The baseline**: the pipeline also runs on the default branch's head, at start and whenever the
head moves (``RevisionStore.baseline`` queues it), ahead of any revision: a revision's red
check is compared with it. Its rows (``baseline_runs``) go through the same queue, recovery and
cleanup.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path

import structlog

from adapters.providers.local.db import now
from adapters.providers.local.pipeline import LocalPipeline, PipelineResult, remove_workdir
from adapters.providers.local.store import RevisionStore

log = structlog.get_logger(__name__)


@dataclass(frozen=True)
class _Job:
    revision_id: int | None  # None: the default branch's head (the baseline)
    head_sha: str
    workdir: Path
    log_path: Path


class PipelineRunner:
    def __init__(self, store: RevisionStore, pipeline: LocalPipeline, logs_dir: Path) -> None:
        self._store = store
        self._pipeline = pipeline
        self._logs_dir = logs_dir
        self._cond = threading.Condition()
        self._wake = False
        self._busy = False
        self._stopping = False
        self._current: _Job | None = None
        self._cancel = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="cpe-local-pipeline", daemon=True)

    def start(self) -> None:
        self._recover()
        self._thread.start()
        self.notify()

    def notify(self) -> None:
        """A revision has a new head: wake up, and drop a run that is now out of date."""
        job = self._current
        if job is not None:
            rows = self._store.db.query(
                "SELECT head_sha, state FROM revisions WHERE id = ?", (job.revision_id,)
            )
            if rows and (rows[0]["head_sha"] != job.head_sha or rows[0]["state"] != "open"):
                self._cancel.set()
        with self._cond:
            self._wake = True
            self._cond.notify_all()

    def wait_idle(self, timeout: float) -> bool:
        """Wait until every queued run has finished; False on timeout."""
        with self._cond:
            return self._cond.wait_for(lambda: not self._wake and not self._busy, timeout)

    def stop(self, timeout: float) -> None:
        """Cancel the current run (its worktree is removed) and end the thread."""
        with self._cond:
            self._stopping = True
            self._cancel.set()
            self._cond.notify_all()
        if self._thread.is_alive():
            self._thread.join(timeout)

    # ------------------------------------------------------------------ the thread

    def _loop(self) -> None:
        while True:
            with self._cond:
                self._cond.wait_for(lambda: self._stopping or self._wake)
                if self._stopping:
                    return
                self._wake = False
                self._busy = True
            try:
                while (job := self._claim()) is not None:
                    self._run(job)
            except Exception:
                log.exception("local pipeline runner failed")
            finally:
                with self._cond:
                    self._busy = False
                    self._cond.notify_all()

    def _claim(self) -> _Job | None:
        if self._stopping:
            return None
        return self._claim_baseline() or self._claim_revision()

    def _claim_baseline(self) -> _Job | None:
        """The default branch's current head, when its run is queued: before any revision."""
        store = self._store
        head = store.default_head()
        with store.db.write() as conn:
            row = conn.execute(
                "SELECT head_sha FROM baseline_runs WHERE status = 'pending' AND head_sha = ? "
                "AND command = ?",
                (head, store.pipeline_name),
            ).fetchone()
            if row is None:
                return None
            job = _Job(
                revision_id=None,
                head_sha=head,
                workdir=LocalPipeline.make_workdir(),
                log_path=self._logs_dir
                / f"{store.default_branch.replace('/', '-')}-{head[:12]}.log",
            )
            conn.execute(
                "UPDATE baseline_runs SET status = 'running', started_at = ?, worktree_path = ?, "
                "url = ? WHERE head_sha = ? AND command = ?",
                (now(), str(job.workdir), job.log_path.as_uri(), head, store.pipeline_name),
            )
        return job

    def _claim_revision(self) -> _Job | None:
        with self._store.db.write() as conn:
            row = conn.execute(
                "SELECT p.revision_id, p.head_sha FROM pipeline_runs p JOIN revisions r "
                "ON r.id = p.revision_id AND r.head_sha = p.head_sha "
                "WHERE p.status = 'pending' AND r.state = 'open' "
                "ORDER BY p.landing DESC, p.queued_at, p.revision_id LIMIT 1"
            ).fetchone()
            if row is None:
                return None
            sha: str = row["head_sha"]
            job = _Job(
                revision_id=row["revision_id"],
                head_sha=sha,
                workdir=LocalPipeline.make_workdir(),
                log_path=self._logs_dir / f"{row['revision_id']}-{sha[:12]}.log",
            )
            conn.execute(
                "UPDATE pipeline_runs SET status = 'running', started_at = ?, worktree_path = ?, "
                "url = ? WHERE revision_id = ? AND head_sha = ?",
                (now(), str(job.workdir), job.log_path.as_uri(), job.revision_id, sha),
            )
        return job

    def _run(self, job: _Job) -> None:
        self._cancel.clear()
        self._current = job
        if self._stopping:
            self._cancel.set()
        subject = _subject(job, self._store.default_branch)
        log.info("local pipeline started", head_sha=job.head_sha, **subject)
        env = {"CPE_HEAD_SHA": job.head_sha}
        if job.revision_id is not None:
            env["CPE_REVISION_ID"] = str(job.revision_id)
        try:
            result = self._pipeline.run(
                self._store.repo,
                job.head_sha,
                log_path=job.log_path,
                workdir=job.workdir,
                cancel=self._cancel,
                extra_env=env,
            )
        except Exception as exc:  # recorded as the run's failure, so the head is not stuck pending
            result = PipelineResult("failure", f"the pipeline could not run: {exc}", job.log_path)
        finally:
            self._current = None
        self._record(job, result)
        log.info("local pipeline finished", status=result.status, **subject)
        if result.status != "cancelled":
            self._store.pipeline_done()  # read at once, not at the next poll

    def _record(self, job: _Job, result: PipelineResult) -> None:
        if job.revision_id is None:
            self._record_baseline(job, result)
            return
        with self._store.db.write() as conn:
            if result.status == "cancelled":
                # Back in the queue: after a shutdown it runs on the next start; a superseded head
                # is never claimed again (claims join on the current head).
                conn.execute(
                    "UPDATE pipeline_runs SET status = 'pending', started_at = NULL, "
                    "worktree_path = NULL WHERE revision_id = ? AND head_sha = ?",
                    (job.revision_id, job.head_sha),
                )
                return
            conn.execute(
                "UPDATE pipeline_runs SET status = ?, reason = ?, finished_at = ?, "
                "worktree_path = NULL WHERE revision_id = ? AND head_sha = ?",
                (result.status, result.reason, now(), job.revision_id, job.head_sha),
            )

    def _record_baseline(self, job: _Job, result: PipelineResult) -> None:
        command = self._store.pipeline_name
        with self._store.db.write() as conn:
            if result.status == "cancelled":  # runs again on the next start
                conn.execute(
                    "UPDATE baseline_runs SET status = 'pending', started_at = NULL, "
                    "worktree_path = NULL WHERE head_sha = ? AND command = ?",
                    (job.head_sha, command),
                )
                return
            conn.execute(
                "UPDATE baseline_runs SET status = ?, reason = ?, finished_at = ?, "
                "worktree_path = NULL WHERE head_sha = ? AND command = ?",
                (result.status, result.reason, now(), job.head_sha, command),
            )

    def _recover(self) -> None:
        """Requeue runs a crash interrupted (removing their worktrees), queue open heads that
        have no run (revisions made before a pipeline was configured) and the default branch's
        head."""
        for table in ("pipeline_runs", "baseline_runs"):
            for row in self._store.db.query(
                f"SELECT worktree_path FROM {table} WHERE status = 'running'"
            ):
                if row["worktree_path"]:
                    remove_workdir(self._store.repo, Path(row["worktree_path"]))
        with self._store.db.write() as conn:
            for table in ("pipeline_runs", "baseline_runs"):
                conn.execute(
                    f"UPDATE {table} SET status = 'pending', started_at = NULL, "
                    "worktree_path = NULL WHERE status = 'running'"
                )
            if self._store.baseline_enabled:
                self._store.queue_baseline(conn, self._store.default_head())
            conn.execute(
                "INSERT OR IGNORE INTO pipeline_runs (revision_id, head_sha, status, queued_at) "
                "SELECT id, head_sha, 'pending', ? FROM revisions WHERE state = 'open'",
                (now(),),
            )


def _subject(job: _Job, branch: str) -> dict[str, str | int]:
    if job.revision_id is None:
        return {"baseline": branch}
    return {"revision_id": job.revision_id}

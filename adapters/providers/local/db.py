"""The local tracker's SQLite database: schema, migrations and transactions.

One connection guarded by a lock, shared by every reader and writer of one provider. The provider
is not a hot path (a poll every few seconds, a write per agent run), so serialising statements is
cheaper to reason about than a connection per actor thread; the lock is only held for the
statements themselves, never across a git command or a pipeline run. WAL lets another process
(``cpe status``) read while the daemon writes.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from domain.errors import ProviderError

Row = sqlite3.Row

# Each entry migrates from version ``index`` to ``index + 1``; ``PRAGMA user_version`` records
# how many have run. Append, never edit: a database in the field has run the old ones.
_MIGRATIONS: tuple[str, ...] = (
    """
    CREATE TABLE work_items (
        id          INTEGER PRIMARY KEY AUTOINCREMENT,
        title       TEXT NOT NULL,
        body        TEXT NOT NULL,
        status      TEXT NOT NULL CHECK (status IN ('pending', 'in-progress', 'in-review',
                        'needs-refinement', 'approved', 'blocked', 'done')),
        labels      TEXT NOT NULL DEFAULT '[]',
        created_at  TEXT NOT NULL,
        updated_at  TEXT NOT NULL
    );
    CREATE TABLE work_item_blockers (
        work_item_id INTEGER NOT NULL REFERENCES work_items(id) ON DELETE CASCADE,
        blocked_by   INTEGER NOT NULL REFERENCES work_items(id),
        position     INTEGER NOT NULL,
        PRIMARY KEY (work_item_id, blocked_by)
    );
    CREATE TABLE revisions (
        id            INTEGER PRIMARY KEY AUTOINCREMENT,
        work_item_id  INTEGER REFERENCES work_items(id),
        title         TEXT NOT NULL,
        body          TEXT NOT NULL,
        branch        TEXT NOT NULL,
        head_sha      TEXT NOT NULL,
        state         TEXT NOT NULL CHECK (state IN ('open', 'merged', 'closed')),
        reviewed_sha  TEXT,
        merge_sha     TEXT,
        merge_base    TEXT,
        created_at    TEXT NOT NULL,
        updated_at    TEXT NOT NULL
    );
    -- A branch carries at most one open revision: a second create for it updates the first.
    CREATE UNIQUE INDEX revisions_open_branch ON revisions(branch) WHERE state = 'open';
    CREATE INDEX revisions_work_item ON revisions(work_item_id);
    CREATE TABLE idempotency_keys (
        kind        TEXT NOT NULL,
        key         TEXT NOT NULL,
        entity_id   INTEGER NOT NULL,
        created_at  TEXT NOT NULL,
        PRIMARY KEY (kind, key)
    );
    CREATE TABLE reviews (
        id           INTEGER PRIMARY KEY AUTOINCREMENT,
        revision_id  INTEGER NOT NULL REFERENCES revisions(id),
        head_sha     TEXT NOT NULL,
        author       TEXT NOT NULL,
        state        TEXT NOT NULL,
        body         TEXT NOT NULL,
        created_at   TEXT NOT NULL
    );
    CREATE TABLE review_comments (
        id         INTEGER PRIMARY KEY AUTOINCREMENT,
        review_id  INTEGER NOT NULL REFERENCES reviews(id) ON DELETE CASCADE,
        path       TEXT NOT NULL,
        line       INTEGER,
        author     TEXT NOT NULL,
        body       TEXT NOT NULL
    );
    CREATE TABLE pipeline_runs (
        revision_id    INTEGER NOT NULL REFERENCES revisions(id),
        head_sha       TEXT NOT NULL,
        status         TEXT NOT NULL
                           CHECK (status IN ('pending', 'running', 'success', 'failure')),
        reason         TEXT,
        url            TEXT,
        worktree_path  TEXT,
        queued_at      TEXT NOT NULL,
        started_at     TEXT,
        finished_at    TEXT,
        PRIMARY KEY (revision_id, head_sha)
    );
    """,
    """
    -- The pipeline on the default branch's head, per command: the baseline a revision's red
    -- pipeline is compared with (the same failure there is not the revision's doing).
    CREATE TABLE baseline_runs (
        head_sha       TEXT NOT NULL,
        command        TEXT NOT NULL,
        status         TEXT NOT NULL
                           CHECK (status IN ('pending', 'running', 'success', 'failure')),
        reason         TEXT,
        url            TEXT,
        worktree_path  TEXT,
        queued_at      TEXT NOT NULL,
        started_at     TEXT,
        finished_at    TEXT,
        PRIMARY KEY (head_sha, command)
    );
    """,
    """
    -- A revision of a work item kept by another system (the local forge under a Linear or Jira
    -- tracker): the item's key as that system names it (ENG-12, PROJ-7), with no foreign key;
    -- work_item_id, the local tracker's item, stays NULL then. Added, not retyped: an existing
    -- database keeps every row as it was.
    ALTER TABLE revisions ADD COLUMN work_item_key TEXT;
    CREATE INDEX revisions_work_item_key ON revisions(work_item_key);
    """,
    """
    -- A run the merge queue waits on (a revision's head tested on the default branch's, to land
    -- it): it goes before the other revisions' queued runs, across a restart too.
    ALTER TABLE pipeline_runs ADD COLUMN landing INTEGER NOT NULL DEFAULT 0;
    """,
)

SCHEMA_VERSION = len(_MIGRATIONS)


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


class Database:
    """A locked SQLite connection with the tracker schema migrated to ``SCHEMA_VERSION``."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.RLock()
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            # isolation_level=None: transactions are explicit (BEGIN IMMEDIATE in ``write``), so a
            # read-modify-write never loses to a writer in another process.
            conn = sqlite3.connect(
                path, isolation_level=None, check_same_thread=False, timeout=30.0
            )
            conn.row_factory = sqlite3.Row
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("PRAGMA foreign_keys = ON")
            conn.execute("PRAGMA synchronous = NORMAL")
        except (OSError, sqlite3.Error) as exc:
            raise ProviderError(f"cannot open the local tracker at {path}: {exc}") from exc
        self._conn = conn
        try:
            self._migrate()
        except BaseException:
            conn.close()  # refused, or a migration failed (rolled back): nothing left open
            raise

    def _migrate(self) -> None:
        with self.write() as conn:
            version = int(conn.execute("PRAGMA user_version").fetchone()[0])
            if version > SCHEMA_VERSION:
                raise ProviderError(
                    f"{self.path} has schema version {version}; this cpe knows up to "
                    f"{SCHEMA_VERSION} (a newer cpe created it)",
                    transient=False,
                )
            for script in _MIGRATIONS[version:]:
                # executescript() would COMMIT our transaction; run the statements one by one.
                for statement in _statements(script):
                    conn.execute(statement)
            conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")

    @contextmanager
    def write(self) -> Iterator[sqlite3.Connection]:
        """One immediate transaction: committed on success, rolled back on any exception."""
        with self._lock:
            try:
                self._conn.execute("BEGIN IMMEDIATE")
            except sqlite3.Error as exc:
                raise ProviderError(f"local tracker is unavailable: {exc}") from exc
            try:
                yield self._conn
            except sqlite3.Error as exc:
                self._conn.execute("ROLLBACK")
                raise ProviderError(f"local tracker write failed: {exc}") from exc
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
            try:
                self._conn.execute("COMMIT")
            except sqlite3.Error as exc:
                raise ProviderError(f"local tracker commit failed: {exc}") from exc

    @contextmanager
    def read(self) -> Iterator[sqlite3.Connection]:
        """A consistent snapshot for several queries (a deferred transaction)."""
        with self._lock:
            try:
                self._conn.execute("BEGIN DEFERRED")
                yield self._conn
            except sqlite3.Error as exc:
                raise ProviderError(f"local tracker query failed: {exc}") from exc
            finally:
                if self._conn.in_transaction:
                    self._conn.execute("COMMIT")

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[Row]:
        with self._lock:
            try:
                return self._conn.execute(sql, params).fetchall()
            except sqlite3.Error as exc:
                raise ProviderError(f"local tracker query failed: {exc}") from exc

    def close(self) -> None:
        with self._lock:
            self._conn.close()


def _statements(script: str) -> Iterator[str]:
    buffer = ""
    for line in script.splitlines(keepends=True):
        if line.strip().startswith("--"):
            continue
        buffer += line
        if sqlite3.complete_statement(buffer):
            yield buffer.strip()
            buffer = ""
    if buffer.strip():
        yield buffer.strip()

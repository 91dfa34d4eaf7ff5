"""The event journal: an append-only SQLite log of every event, and the write intents.

Every event is appended when it is enqueued, before it is processed, and a cursor records the
last event whose processing finished. So after a crash (even ``kill -9``) the events that were
queued but not processed are still there, and the engine-owned facts (``last_planned_shas``,
attempts, run history) are rebuilt by replaying the processed ones (``restore``). ``cpe replay``
uses the same replay to show the state at any point.

Provider writes are recorded as *intents* keyed by ``domain.commands.idempotency_key`` before
the write is made and marked done with their result events after: a write whose intent is done
is never made again, it answers with the recorded result.

One connection, guarded by a lock: the queue (appends), the engine (cursor) and the executor
(intents) use it from their own threads. WAL with ``synchronous=NORMAL`` keeps a commit cheap
while surviving a process crash.

**Deferred commits.** Two kinds of record may wait for the next transaction instead of paying a
commit of their own: the end of an engine cycle (its result events and the cursor,
``append_and_mark(defer=True)``) and the result of a write that is harmless to make twice
(``finish_intent(defer=True)``: a status transition). Every other write commits them first, in
its own transaction: an event appended from outside, an intent recorded before a provider write
(so no write is ever made while earlier results are uncommitted), a failed intent; so do reads,
an idle engine (``flush``) and ``close``. A crash loses at most deferred records, and what they
recorded is redone from the committed journal exactly as a crash just before them would be: the
cycle is processed again (its other writes answer from their intents) and a transition is made
again. The committed journal is always a prefix of what happened, never a part of a cycle.

**Snapshots** keep a start quick however long the journal grows: the replayed state at some
processed ``seq`` is stored, and a replay starts from the newest snapshot at or before where it
must end, then applies only the events after it (read in pages, never all at once). Once
``snapshot_every`` events were processed past the newest snapshot, a background thread takes a
new one (off the engine's path; at most one a ``snapshot_interval``, so a burst pays the extra
replay once), and ``restore`` takes one when it replayed that many; the
newest ``KEEP_SNAPSHOTS`` are kept. The events themselves are never deleted (``cpe replay`` can
still show any point).
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import structlog

from actors.journal_file import journal_error
from actors.journal_records import (
    SCHEMA,
    SCHEMA_VERSION,
    Intent,
    IntentStatus,
    JournalEntry,
    decode_event,
    decode_intent,
    encode_events,
)
from adapters.support.crashpoints import crashpoint
from domain.commands import COMMAND_ADAPTER, EngineCommand
from domain.errors import JournalError, JournalIOError
from domain.events import EVENT_ADAPTER, EngineEvent
from domain.models import EngineState
from domain.state import apply_event

log = structlog.get_logger("cpe.journal")

JOURNAL_NAME = "journal.sqlite3"  # in the state directory
SNAPSHOT_EVERY = 10_000  # processed events past the newest snapshot before another is taken
SNAPSHOT_INTERVAL = 60.0  # seconds at least between two background snapshots
KEEP_SNAPSHOTS = 3
_PAGE = 2_000  # events read per query during a replay
_MAX_DEFERRED = 1_000  # deferred statements held before they are committed anyway


@dataclass(frozen=True)
class Restored:
    """What a journal gives back on start: the state after the processed events, and the
    events that were enqueued but whose processing never finished (in order).

    The state is whole, the provider's facts as last observed included: an unprocessed event
    is processed again against exactly the state it first met, so its handlers make the same
    commands, with the same idempotency keys, as before the crash (a revision for a completed
    run, the review of a finished reviewer). The first poll after the start then reports
    every entity it observes, and every one that is gone (``Poll(full=True)``)."""

    state: EngineState
    unprocessed: tuple[JournalEntry, ...]
    processed_seq: int


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="microseconds")


class Journal:
    def __init__(
        self,
        path: Path | str,
        *,
        snapshot_every: int = SNAPSHOT_EVERY,
        snapshot_interval: float = SNAPSHOT_INTERVAL,
    ):
        if snapshot_every < 1:
            raise ValueError("snapshot_every must be at least 1")
        self.path = str(path)
        self.snapshot_every = snapshot_every
        self.snapshot_interval = snapshot_interval
        self._last_snapshot_started = -float("inf")
        self._snapshotter: threading.Thread | None = None
        self._closing = False
        self._lock = threading.Lock()
        # Told once of a disk that refuses the journal (the engine stops: nothing it does
        # after that could be recorded).
        self.on_io_error: Callable[[JournalIOError], None] | None = None
        try:
            if self.path != ":memory:":
                Path(self.path).parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            version = self._db.execute("PRAGMA user_version").fetchone()[0]
            if version not in (0, SCHEMA_VERSION):
                raise JournalError(
                    f"{self.path}: journal schema version {version}, expected {SCHEMA_VERSION}"
                )
            self._db.executescript(SCHEMA)
            self._db.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
            row = self._db.execute("SELECT MAX(seq) FROM snapshots").fetchone()
        except sqlite3.Error as exc:
            raise journal_error(f"{self.path}: cannot open the journal", exc) from exc
        except OSError as exc:  # its directory cannot be made (a file is in the way, read-only)
            raise JournalIOError(f"{self.path}: cannot open the journal: {exc}") from exc
        self._snapshot_seq = int(row[0] or 0)  # the newest snapshot's seq
        # Deferred statements (see "Deferred commits" in the module docstring), run first in
        # the next transaction; and the next event's seq, so a deferred append knows its own.
        self._deferred: list[tuple[str, tuple[object, ...]]] = []
        with self._guard("read the newest event"):
            newest = self._db.execute("SELECT MAX(seq) FROM events").fetchone()[0]
            known = self._db.execute(
                "SELECT seq FROM sqlite_sequence WHERE name = 'events'"
            ).fetchone()
        self._next_seq = max(int(newest or 0), int(known[0] if known else 0)) + 1

    # ------------------------------------------------------------------ events

    def append(self, event: EngineEvent) -> int:
        """Journal ``event`` now (committed when this returns); its sequence number."""
        body = EVENT_ADAPTER.dump_json(event).decode()
        with self._guard("append an event"):
            seq = self._take_seq()
            self._commit(
                [
                    (
                        "INSERT INTO events (seq, at, type, body) VALUES (?, ?, ?, ?)",
                        (seq, time.time(), event.type, body),
                    )
                ]
            )
        crashpoint("journal.after_append")
        return seq

    def append_and_mark(
        self, events: Sequence[EngineEvent], processed: int, *, defer: bool = False
    ) -> list[int]:
        """Append ``events`` and advance the cursor to ``processed`` in one transaction (the
        end of an engine cycle: its result events and the fact that it finished). With
        ``defer`` the transaction is the next one anyone makes (see "Deferred commits")."""
        at = time.time()
        rows = [(e.type, EVENT_ADAPTER.dump_json(e).decode()) for e in events]
        with self._guard("finish a cycle"):
            seqs = [self._take_seq() for _ in rows]
            statements: list[tuple[str, tuple[object, ...]]] = [
                ("INSERT INTO events (seq, at, type, body) VALUES (?, ?, ?, ?)", (seq, at, *row))
                for seq, row in zip(seqs, rows, strict=True)
            ]
            statements.append(
                (
                    "UPDATE cursor SET processed_seq = MAX(processed_seq, ?) WHERE id = 1",
                    (processed,),
                )
            )
            if defer:
                mark = len(self._deferred)
                self._deferred += statements
                if len(self._deferred) > _MAX_DEFERRED:
                    try:
                        self._commit([])
                    except BaseException:
                        # This cycle is not recorded: the caller fails and the event is
                        # processed again, so its statements must not stay deferred.
                        del self._deferred[mark:]
                        raise
            else:
                self._commit(statements)
        crashpoint("journal.after_cycle")  # committed, or deferred to the next commit
        self._maybe_snapshot(processed)
        return seqs

    def last_seq(self) -> int:
        """The newest event's sequence number (0 for an empty journal)."""
        with self._lock:
            return self._next_seq - 1

    def flush(self) -> None:
        """Commit the deferred statements now (an idle engine, a stop)."""
        with self._guard("commit deferred writes"):
            if self._deferred:
                self._commit([])

    def _take_seq(self) -> int:
        seq = self._next_seq
        self._next_seq += 1
        return seq

    def _commit(
        self, statements: Sequence[tuple[str, tuple[object, ...]]]
    ) -> tuple[object, ...] | None:
        """One transaction: the deferred statements, then ``statements``; the last statement's
        first row (for a ``RETURNING``). The caller holds the lock (``_guard``). On a failure
        nothing is committed and the deferred statements stay deferred."""
        if not self._deferred and len(statements) == 1:  # one statement commits by itself
            sql, args = statements[0]
            return self._db.execute(sql, args).fetchone()  # type: ignore[no-any-return]
        row = None
        self._db.execute("BEGIN")
        try:
            for sql, args in [*self._deferred, *statements]:
                row = self._db.execute(sql, args).fetchone()
            self._db.execute("COMMIT")
        except BaseException:
            # sqlite has rolled back by itself after some failures (a full disk): the error
            # that matters is the one that got us here, not the rollback's.
            with contextlib.suppress(sqlite3.Error):
                self._db.execute("ROLLBACK")
            raise
        self._deferred.clear()
        return row

    def mark_processed(self, seq: int) -> None:
        with self._guard("advance the cursor"):
            self._commit(
                [("UPDATE cursor SET processed_seq = MAX(processed_seq, ?) WHERE id = 1", (seq,))]
            )

    def processed_seq(self) -> int:
        with self._guard("read the cursor", flush=True):
            row = self._db.execute("SELECT processed_seq FROM cursor WHERE id = 1").fetchone()
        return int(row[0])

    def entries(self, after: int = 0, until: int | None = None) -> Iterator[JournalEntry]:
        """Events with ``after < seq <= until``, in order, read a page at a time."""
        while True:
            query = "SELECT seq, at, body FROM events WHERE seq > ?"
            args: list[int] = [after]
            if until is not None:
                query += " AND seq <= ?"
                args.append(until)
            with self._guard("read events", flush=True):
                rows = self._db.execute(query + " ORDER BY seq LIMIT ?", [*args, _PAGE]).fetchall()
            for seq, at, body in rows:
                yield JournalEntry(seq, at, decode_event(self.path, seq, body))
            if len(rows) < _PAGE:
                return
            after = rows[-1][0]

    def replay(self, until: int | None = None) -> EngineState:
        """The full state after the processed events up to ``until`` (``cpe replay``)."""
        return self._replay(until)[0]

    def restore(self) -> Restored:
        processed = self.processed_seq()
        full, replayed = self._replay(processed)
        if replayed >= self.snapshot_every:
            self._store_snapshot(processed, full)
        unprocessed = tuple(self.entries(after=processed))
        return Restored(state=full, unprocessed=unprocessed, processed_seq=processed)

    # ------------------------------------------------------------------ snapshots

    def snapshots(self) -> list[int]:
        """The seqs that have a snapshot, oldest first."""
        with self._guard("list snapshots"):
            rows = self._db.execute("SELECT seq FROM snapshots ORDER BY seq").fetchall()
        return [int(row[0]) for row in rows]

    def take_snapshot(self) -> int:
        """Store the replayed state at the processed cursor now; returns its seq."""
        processed = self.processed_seq()
        state, _ = self._replay(processed)
        self._store_snapshot(processed, state)
        return processed

    def _replay(self, until: int | None) -> tuple[EngineState, int]:
        """The state at ``until`` (at most the cursor) and how many events were applied to the
        newest snapshot at or before it to get there."""
        limit = self.processed_seq() if until is None else min(until, self.processed_seq())
        start, state = self._newest_snapshot(limit)
        applied = 0
        for entry in self.entries(after=start, until=limit):
            if self._closing:
                raise JournalError(f"{self.path}: closed during a replay")
            state = apply_event(state, entry.event)
            applied += 1
        return state, applied

    def _newest_snapshot(self, limit: int) -> tuple[int, EngineState]:
        """The newest snapshot at or before ``limit`` that reads back as a state; one that does
        not (damaged, or written by a version whose state had another shape) is dropped and the
        next older one tried: the events are all there, a snapshot only saves time."""
        while True:
            with self._guard("read a snapshot"):
                row = self._db.execute(
                    "SELECT seq, state FROM snapshots WHERE seq <= ? ORDER BY seq DESC LIMIT 1",
                    (limit,),
                ).fetchone()
            if row is None:
                return 0, EngineState()
            try:
                return int(row[0]), EngineState.model_validate_json(row[1])
            except ValueError as exc:
                log.warning(
                    "dropping a journal snapshot that does not read",
                    seq=row[0],
                    error=str(exc)[:200],
                )
                with self._guard("drop a snapshot"):
                    self._db.execute("DELETE FROM snapshots WHERE seq = ?", (row[0],))

    def _store_snapshot(self, seq: int, state: EngineState) -> None:
        body = state.model_dump_json()
        with self._guard("store a snapshot"):
            self._db.execute(
                "INSERT OR REPLACE INTO snapshots (seq, at, state) VALUES (?, ?, ?)",
                (seq, time.time(), body),
            )
            self._db.execute(
                "DELETE FROM snapshots WHERE seq NOT IN "
                "(SELECT seq FROM snapshots ORDER BY seq DESC LIMIT ?)",
                (KEEP_SNAPSHOTS,),
            )
            self._snapshot_seq = max(self._snapshot_seq, seq)

    def _maybe_snapshot(self, processed: int) -> None:
        """Start a background snapshot when enough events were processed past the newest."""
        if processed - self._snapshot_seq < self.snapshot_every or self._closing:
            return
        with self._lock:
            if self._snapshotter is not None and self._snapshotter.is_alive():
                return
            now = time.monotonic()
            if now - self._last_snapshot_started < self.snapshot_interval:
                return  # a burst of events: its replay cost is paid once a minute at most
            self._last_snapshot_started = now
            self._snapshotter = threading.Thread(
                target=self._snapshot_in_background, name="journal-snapshot", daemon=True
            )
            self._snapshotter.start()

    def _snapshot_in_background(self) -> None:
        try:
            seq = self.take_snapshot()
            log.debug("journal snapshot taken", seq=seq)
        except JournalError as exc:
            if not self._closing:  # a snapshot is an optimisation: the events are all there
                log.warning("journal snapshot failed", error=str(exc))

    # ------------------------------------------------------------------ intents

    def begin_intent(
        self, key: str, command: EngineCommand, *, answer: bool = True
    ) -> Intent | None:
        """Record that ``command`` is about to be written. Returns the intent when it is already
        done (the caller must not write again), else None; without ``answer`` (a write the
        caller makes again anyway) always None, and the done intent is not read back."""
        body = COMMAND_ADAPTER.dump_json(command).decode()
        now = _now()
        with self._guard("record an intent"):
            # One statement: a new or retried intent returns a row; a done one is left as it
            # is and returns none. The deferred statements go first, in the same transaction:
            # nothing the engine did is left uncommitted when a write is about to be made.
            row = self._commit(
                [
                    (
                        "INSERT INTO intents "
                        "(key, command, status, attempts, created_at, updated_at) "
                        "VALUES (?, ?, 'pending', 1, ?, ?) ON CONFLICT (key) DO UPDATE SET "
                        "status = 'pending', attempts = attempts + 1, error = NULL, "
                        "command = excluded.command, "  # a retry's own (a queue merge's base)
                        "updated_at = ? WHERE status != 'done' RETURNING status",
                        (key, body, now, now, now),
                    )
                ]
            )
        return self.intent(key) if row is None and answer else None

    def finish_intent(
        self, key: str, result: Sequence[EngineEvent], *, defer: bool = False
    ) -> None:
        """Mark the intent done with its result events. With ``defer`` (for a write that is
        harmless to make twice) it is committed with the next transaction instead."""
        body = encode_events(list(result))
        statement = (
            "UPDATE intents SET status = 'done', result = ?, updated_at = ? WHERE key = ?",
            (body, _now(), key),
        )
        with self._guard("finish an intent"):
            if defer:
                self._deferred.append(statement)
            else:
                self._commit([statement])

    def fail_intent(self, key: str, error: str) -> None:
        with self._guard("fail an intent"):
            self._commit(
                [
                    (
                        "UPDATE intents SET status = 'failed', error = ?, updated_at = ? "
                        "WHERE key = ?",
                        (error, _now(), key),
                    )
                ]
            )

    def intent(self, key: str) -> Intent | None:
        with self._guard("read an intent", flush=True):
            row = self._db.execute(
                "SELECT key, command, status, result, error, attempts FROM intents WHERE key = ?",
                (key,),
            ).fetchone()
        return None if row is None else decode_intent(self.path, row)

    def intents(self, status: IntentStatus) -> list[Intent]:
        """The intents with ``status``, oldest first."""
        with self._guard("read intents", flush=True):
            rows = self._db.execute(
                "SELECT key, command, status, result, error, attempts FROM intents "
                "WHERE status = ? ORDER BY created_at",
                (status,),
            ).fetchall()
        return [decode_intent(self.path, row) for row in rows]

    # ------------------------------------------------------------------ plumbing

    def close(self) -> None:
        snapshotter = self._snapshotter
        if snapshotter is not None:  # a snapshot under way is let finish, if it is quick;
            snapshotter.join(timeout=5)  # a long replay is cut short (``_closing``)
        self._closing = True
        if snapshotter is not None:
            snapshotter.join(timeout=60)
        with self._lock:
            try:
                if self._deferred:
                    self._commit([])
            except sqlite3.Error as exc:
                log.error("deferred journal writes lost at close", error=str(exc))
            finally:
                self._db.close()

    def _failed(self, error: JournalError) -> JournalError:
        if isinstance(error, JournalIOError) and self.on_io_error is not None:
            notify, self.on_io_error = self.on_io_error, None
            notify(error)
        return error

    def _guard(self, what: str, *, flush: bool = False) -> _Guard:
        """The lock, with sqlite errors turned into ``JournalError``; with ``flush`` (a read)
        the deferred statements are committed first, so the read sees them."""
        return _Guard(self, f"{self.path}: cannot {what}", flush)


class _Guard:
    """Holds the journal's lock and turns sqlite errors into ``JournalError``."""

    def __init__(self, journal: Journal, message: str, flush: bool):
        self._journal = journal
        self._message = message
        self._flush = flush

    def __enter__(self) -> None:
        self._journal._lock.acquire()
        if self._flush and self._journal._deferred:
            try:
                self._journal._commit([])
            except BaseException as exc:
                self._journal._lock.release()
                if isinstance(exc, sqlite3.Error):
                    raise self._journal._failed(journal_error(self._message, exc)) from exc
                raise

    def __exit__(self, kind: object, exc: BaseException | None, tb: object) -> None:
        self._journal._lock.release()
        if isinstance(exc, sqlite3.Error):
            raise self._journal._failed(journal_error(self._message, exc)) from exc

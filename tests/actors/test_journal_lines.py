"""The journal's, the state store's and the inbox's log lines and messages, word for word: what
an operator reads when the disk, a lock or a listener fails."""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError
from structlog.testing import capture_logs

from actors.journal import Journal
from actors.journal_file import InstanceLock
from actors.queue import Inbox
from actors.store import StateStore
from domain.errors import JournalError, JournalInUseError, JournalIOError
from domain.events import StatusTransitioned, UserTransitionedStatus
from domain.models import EngineState
from tests.actors.test_journal import _committed_cursor, _lock_out

_DONE = StatusTransitioned(work_item_id="1", to="done")


def _lines(logs: list[dict[str, Any]], event: str) -> list[dict[str, Any]]:
    return [line for line in logs if line["event"] == event]


# ---------------------------------------------------------------------------- the instance lock


def test_a_second_engine_on_the_same_state_is_told_who_holds_it(tmp_path: Path) -> None:
    journal = tmp_path / "journal.sqlite3"
    first, second = InstanceLock(str(journal)), InstanceLock(str(journal))
    first.acquire()
    try:
        with pytest.raises(JournalInUseError) as caught:
            second.acquire()
    finally:
        first.release()
    assert str(caught.value) == (
        f"{journal}: in use by another cpe (pid {os.getpid()}); one engine per state directory"
    )


def test_an_engines_hold_is_refused_at_once_and_a_short_holder_is_waited_for(
    tmp_path: Path,
) -> None:
    """A second ``cpe run`` is told at once (no wait for an engine that runs for days); a
    request journaled while no engine runs holds the lock a moment: a start waits for it."""
    journal = tmp_path / "journal.sqlite3"
    engine, second = InstanceLock(str(journal)), InstanceLock(str(journal))
    engine.acquire(engine=True)
    try:
        assert Path(f"{journal}.lock").read_text() == f"{os.getpid()} engine\n"
        refused = threading.Event()

        def start() -> None:
            with contextlib.suppress(JournalInUseError):
                second.acquire(wait=3600)
            refused.set()

        threading.Thread(target=start, daemon=True).start()
        assert refused.wait(60), "a second engine waited for the first to stop"
    finally:
        engine.release()
    short = InstanceLock(str(journal))
    short.acquire()  # a request journaled offline: the pid alone
    assert Path(f"{journal}.lock").read_text() == f"{os.getpid()}\n"
    trying, taken = threading.Event(), threading.Event()

    def start_engine() -> None:
        trying.set()
        second.acquire(wait=3600, engine=True)  # refused at once: taken is never set
        taken.set()

    threading.Thread(target=start_engine, daemon=True).start()
    assert trying.wait(60)
    short.release()
    assert taken.wait(60), "the start did not take the lock once the short holder let go"
    second.release()


def test_a_lock_file_that_cannot_be_opened_is_named_with_why(tmp_path: Path) -> None:
    """A directory where the lock file should be (root is refused nothing else)."""
    journal = tmp_path / "journal.sqlite3"
    lock = tmp_path / "journal.sqlite3.lock"
    lock.mkdir()
    with pytest.raises(JournalIOError) as caught:
        InstanceLock(str(journal)).acquire()
    assert str(caught.value) == (
        f"{lock}: cannot open the lock file that keeps one engine per state directory: "
        "Is a directory"
    )


# ---------------------------------------------------------------------------- reads that fail


def test_a_journal_whose_events_cannot_be_read_says_so_on_open(tmp_path: Path) -> None:
    """``events`` is a view whose rows overflow when read: the newest event cannot be found."""
    path = tmp_path / "journal.sqlite3"
    with sqlite3.connect(path) as db:
        db.execute(
            "CREATE VIEW events AS SELECT abs(-9223372036854775808) AS seq, 0 AS at, "
            "'' AS type, '' AS body"
        )
    db.close()
    with pytest.raises(JournalError) as caught:
        Journal(path)
    assert str(caught.value) == f"{path}: cannot read the newest event: integer overflow"


def test_a_snapshot_that_cannot_be_read_says_so(tmp_path: Path) -> None:
    """``snapshots`` is a view whose ``state`` overflows when read (its seq reads fine)."""
    path = tmp_path / "journal.sqlite3"
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE taken (seq, at, state)")
        db.execute("INSERT INTO taken VALUES (0, 0, -9223372036854775808)")
        db.execute("CREATE VIEW snapshots AS SELECT seq, at, abs(state) AS state FROM taken")
    db.close()
    journal = Journal(path)
    try:
        with pytest.raises(JournalError) as caught:
            journal.replay()
        assert str(caught.value) == f"{path}: cannot read a snapshot: integer overflow"
    finally:
        journal.close()


def test_a_snapshot_that_does_not_read_and_cannot_be_dropped_says_both(tmp_path: Path) -> None:
    path = tmp_path / "journal.sqlite3"
    Journal(path).close()
    with sqlite3.connect(path) as db:
        db.execute("INSERT INTO snapshots (seq, at, state) VALUES (0, 0, 'garbage')")
        db.execute(
            "CREATE TRIGGER keep BEFORE DELETE ON snapshots "
            "BEGIN SELECT RAISE(ABORT, 'snapshots are kept'); END"
        )
    db.close()
    with pytest.raises(ValidationError) as unreadable:
        EngineState.model_validate_json("garbage")
    journal = Journal(path)
    try:
        with capture_logs() as logs, pytest.raises(JournalError) as caught:
            journal.replay()
        assert str(caught.value) == f"{path}: cannot drop a snapshot: snapshots are kept"
        assert _lines(logs, "dropping a journal snapshot that does not read") == [
            {
                "event": "dropping a journal snapshot that does not read",
                "seq": 0,
                "error": str(unreadable.value)[:200],
                "log_level": "warning",
            }
        ]
    finally:
        journal.close()


# ---------------------------------------------------------------------------- background snapshots


class _Clock:
    """``time`` for the journal: wall time as it is, a monotonic clock the test moves."""

    def __init__(self) -> None:
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now

    @staticmethod
    def time() -> float:
        return time.time()


def test_a_background_snapshot_is_taken_again_once_its_interval_has_passed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = _Clock()
    monkeypatch.setattr("actors.journal.time", clock)
    journal = Journal(tmp_path / "journal.sqlite3", snapshot_every=1, snapshot_interval=60)

    def cycle() -> None:
        journal.append_and_mark([], journal.append(_DONE))
        snapshotter = journal._snapshotter
        if snapshotter is not None:
            snapshotter.join(30)
            assert not snapshotter.is_alive()

    try:
        with capture_logs() as logs:
            cycle()  # seq 1: the first snapshot
            clock.now += 59.5
            cycle()  # seq 2: within the interval, none
            clock.now = 1060.0
            cycle()  # seq 3: the interval has passed, exactly
        assert journal.snapshots() == [1, 3]
        assert _lines(logs, "journal snapshot taken") == [
            {"event": "journal snapshot taken", "seq": 1, "log_level": "debug"},
            {"event": "journal snapshot taken", "seq": 3, "log_level": "debug"},
        ]
    finally:
        journal.close()


# ---------------------------------------------------------------------------- deferred commits


def test_deferred_cycles_are_held_up_to_the_limit_and_committed_past_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each cycle without result events defers one statement (its cursor)."""
    monkeypatch.setattr("actors.journal._MAX_DEFERRED", 3)
    path = tmp_path / "journal.sqlite3"
    journal = Journal(path)
    try:
        seqs = [journal.append(_DONE) for _ in range(4)]
        for seq in seqs[:3]:
            journal.append_and_mark([], seq, defer=True)
        assert _committed_cursor(path) == 0  # three held: the limit, not past it
        journal.append_and_mark([], seqs[3], defer=True)
        assert _committed_cursor(path) == seqs[3]
    finally:
        journal.close()


def test_deferred_writes_lost_at_close_are_logged(tmp_path: Path) -> None:
    path = tmp_path / "journal.sqlite3"
    journal = Journal(path)
    journal._db.execute("PRAGMA busy_timeout = 50")
    seq = journal.append(_DONE)
    journal.append_and_mark([], seq, defer=True)
    other = _lock_out(path)
    try:
        with capture_logs() as logs:
            journal.close()
    finally:
        other.execute("ROLLBACK")
        other.close()
    assert _lines(logs, "deferred journal writes lost at close") == [
        {
            "event": "deferred journal writes lost at close",
            "error": "database is locked",
            "log_level": "error",
        }
    ]
    assert _committed_cursor(path) == 0


# ---------------------------------------------------------------------------- the state store


def test_a_listener_that_raises_is_logged_and_the_others_still_told() -> None:
    store = StateStore()
    told: list[EngineState] = []

    def broken(state: EngineState) -> None:
        raise RuntimeError("a broken listener")

    store.subscribe(broken)
    store.subscribe(told.append)
    state = EngineState(last_planned_shas={"a.md": "abc"})
    with capture_logs() as logs:
        store.set_state(state)
    assert told == [state]
    assert _lines(logs, "state listener failed") == [
        {
            "event": "state listener failed",
            "listener": repr(broken),
            "log_level": "error",
            "exc_info": True,
        }
    ]


def test_an_unsubscribed_listener_is_told_nothing_more() -> None:
    store = StateStore()
    first: list[EngineState] = []
    second: list[EngineState] = []
    unsubscribe = store.subscribe(first.append)
    store.subscribe(second.append)
    before, after = EngineState(last_planned_shas={"a.md": "abc"}), EngineState()
    store.set_state(before)
    unsubscribe()
    store.set_state(after)
    assert first == [before]
    assert second == [before, after]


# ---------------------------------------------------------------------------- the inbox


def test_the_inbox_counts_the_events_it_rejects_from_zero(tmp_path: Path) -> None:
    journal = Journal(tmp_path / "journal.sqlite3")
    try:
        inbox = Inbox(journal)
        assert inbox.rejected == 0
        inbox.close()
        assert inbox.put(UserTransitionedStatus(work_item_id="1", to="done")) is None
        assert inbox.rejected == 1
    finally:
        journal.close()


def test_a_journal_that_would_never_snapshot_is_refused_saying_why(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"^snapshot_every must be at least 1$"):
        Journal(tmp_path / "j.sqlite3", snapshot_every=0)

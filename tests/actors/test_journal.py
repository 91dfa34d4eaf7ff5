"""The journal: append, cursor, restore, replay, intents."""

from __future__ import annotations

import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from actors.journal import Journal
from actors.queue import Inbox
from domain.commands import TransitionStatus
from domain.errors import JournalError
from domain.events import (
    AgentFailed,
    EngineEvent,
    StatusTransitioned,
    UserTransitionedStatus,
    WorkItemChanged,
)
from domain.models import EngineState, ImplementorStartParams, WorkItem
from domain.state import apply_event
from tests.domain.builders import requested
from tests.domain.test_properties import Simulation

ROOT = Path(__file__).resolve().parents[2]


def test_restore_gives_the_processed_state_and_the_unprocessed_tail(tmp_path: Path) -> None:
    journal = Journal(tmp_path / "j.sqlite3")
    params = ImplementorStartParams(work_item_id="1", branch_name="b")
    first = journal.append(WorkItemChanged(work_item=WorkItem(id="1", title="t", status="pending")))
    second = journal.append(requested(params, sid="s1"))
    third = journal.append(
        AgentFailed(session_id="s1", role="implementor", kind="failed", reason="x")
    )
    journal.mark_processed(second)
    journal.close()

    restored = Journal(tmp_path / "j.sqlite3").restore()
    assert restored.processed_seq == second
    # the provider's facts as last observed too: an unprocessed event meets the state it met
    assert restored.state.work_items == {"1": WorkItem(id="1", title="t", status="pending")}
    assert restored.state.agent_runs["s1"].status == "requested"
    assert [e.seq for e in restored.unprocessed] == [third]
    assert first < second < third


def test_replay_until_rebuilds_the_state_at_that_point(tmp_path: Path) -> None:
    journal = Journal(tmp_path / "j.sqlite3")
    item = WorkItem(id="1", title="t", status="pending")
    a = journal.append(WorkItemChanged(work_item=item))
    b = journal.append(StatusTransitioned(work_item_id="1", to="blocked"))
    journal.mark_processed(b)
    assert journal.replay(until=a).work_items["1"].status == "pending"
    assert journal.replay().work_items["1"].status == "blocked"


def test_an_intent_done_is_returned_instead_of_written_again(tmp_path: Path) -> None:
    journal = Journal(tmp_path / "j.sqlite3")
    command = TransitionStatus(work_item_id="1", to="done")
    assert journal.begin_intent("k", command) is None
    result = [StatusTransitioned(work_item_id="1", to="done")]
    journal.finish_intent("k", result)
    done = journal.begin_intent("k", command)
    assert done is not None
    assert done.status == "done"
    assert list(done.result) == result


def test_a_failed_intent_may_be_tried_again(tmp_path: Path) -> None:
    journal = Journal(tmp_path / "j.sqlite3")
    command = TransitionStatus(work_item_id="1", to="done")
    journal.begin_intent("k", command)
    journal.fail_intent("k", "502")
    assert journal.begin_intent("k", command) is None
    intent = journal.intent("k")
    assert intent is not None
    assert (intent.status, intent.attempts) == ("pending", 2)


def test_a_journal_from_a_future_version_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "j.sqlite3"
    db = sqlite3.connect(path)
    db.execute("PRAGMA user_version=99")
    db.close()
    with pytest.raises(JournalError, match="schema version 99"):
        Journal(path)


def test_a_cycles_results_and_its_end_are_journaled_together(tmp_path: Path) -> None:
    journal = Journal(tmp_path / "j.sqlite3")
    seq = journal.append(StatusTransitioned(work_item_id="1", to="done"))
    results = [
        StatusTransitioned(work_item_id="2", to="done"),
        StatusTransitioned(work_item_id="3", to="done"),
    ]
    seqs = journal.append_and_mark(results, seq)
    assert seqs == [seq + 1, seq + 2]
    assert journal.processed_seq() == seq
    restored = journal.restore()
    assert [e.event for e in restored.unprocessed] == results


class _Recording(Simulation):
    """The domain property test's simulated engine, keeping every event it processed."""

    def __init__(self, data: st.DataObject) -> None:
        super().__init__(data)
        self.events: list[EngineEvent] = []

    def process(self, event: EngineEvent) -> None:
        self.events.append(event)
        super().process(event)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_a_replay_from_snapshots_gives_the_same_state_as_a_replay_from_the_start(
    tmp_path_factory: pytest.TempPathFactory, data: st.DataObject
) -> None:
    """Realistic event sequences (the domain simulation's), snapshots every few events: the
    state at any point, and what ``restore`` gives, match a fold over all the events."""
    sim = _Recording(data)
    for _ in range(data.draw(st.integers(5, 40), label="steps")):
        if sim.queue and data.draw(st.booleans(), label="deliver a queued result"):
            sim.process(sim.queue.popleft())
        else:
            sim.process(sim.external())
    every = data.draw(st.integers(1, 8), label="snapshot every")
    path = tmp_path_factory.mktemp("journal") / "journal.sqlite3"
    journal = Journal(path, snapshot_every=every, snapshot_interval=0)
    try:
        for event in sim.events:
            seq = journal.append(event)
            journal.append_and_mark([], seq)  # each cycle ends: the background snapshots
        journal.close()  # waits for a snapshot in progress
        reopened = Journal(path, snapshot_every=every, snapshot_interval=0)
        try:
            restored = reopened.restore()
            if len(sim.events) >= every:  # one was taken in the background, or by restore
                assert reopened.snapshots()
            folded = EngineState()
            for n, event in enumerate(sim.events, start=1):
                folded = apply_event(folded, event)
                if n % 3 == 0 or n == len(sim.events):
                    assert reopened.replay(until=n) == folded
            assert restored.state == folded
            assert restored.unprocessed == ()
        finally:
            reopened.close()
    finally:
        journal.close()


def test_restore_starts_from_the_newest_snapshot_and_keeps_only_the_newest_few(
    tmp_path: Path,
) -> None:
    journal = Journal(tmp_path / "journal.sqlite3", snapshot_every=1_000_000)
    try:
        for n in range(1, 11):
            item = WorkItem.model_validate({"id": "1", "title": f"v{n}", "status": "pending"})
            seq = journal.append(WorkItemChanged(work_item=item))
            journal.mark_processed(seq)
            journal.take_snapshot()
        assert journal.snapshots() == [8, 9, 10]  # KEEP_SNAPSHOTS
        assert journal.replay(until=9).work_items["1"].title == "v9"
        assert journal.replay(until=5).work_items["1"].title == "v5"  # before any snapshot kept
    finally:
        journal.close()


def test_restore_takes_a_snapshot_once_it_replayed_snapshot_every_events(tmp_path: Path) -> None:
    """Three events replayed of ``snapshot_every=4``: no snapshot; the fourth: one at it. A
    journal nested in directories that do not exist yet is made with them."""
    path = tmp_path / "state" / "deeper" / "journal.sqlite3"
    journal = Journal(path, snapshot_every=4, snapshot_interval=3600)
    try:
        for n in range(1, 5):
            item = WorkItem.model_validate({"id": "1", "title": f"v{n}", "status": "pending"})
            journal.mark_processed(journal.append(WorkItemChanged(work_item=item)))
            journal.restore()
            assert journal.snapshots() == ([] if n < 4 else [4])
    finally:
        journal.close()


def test_entries_read_page_after_page_give_every_event_once_in_order(tmp_path: Path) -> None:
    journal = Journal(tmp_path / "journal.sqlite3")
    try:
        first = journal.append(StatusTransitioned(work_item_id="0", to="done"))
        more = [StatusTransitioned(work_item_id=str(n), to="done") for n in range(1, 2_101)]
        journal.append_and_mark(more, first)
        read = list(journal.entries())
        assert [e.seq for e in read] == list(range(1, 2_102))  # more than one page of 2,000
        assert [e.event.work_item_id for e in read[-2:]] == ["2099", "2100"]
        assert [e.seq for e in journal.entries(after=1_990, until=2_010)] == list(
            range(1_991, 2_011)
        )
    finally:
        journal.close()


def test_a_snapshot_that_does_not_read_is_dropped_and_the_events_replayed(
    tmp_path: Path,
) -> None:
    """A damaged snapshot, or one from a version whose state had another shape, costs time,
    not the start: restore falls back to an older snapshot or the events themselves."""
    path = tmp_path / "journal.sqlite3"
    journal = Journal(path)
    try:
        item = WorkItem.model_validate({"id": "1", "title": "t", "status": "pending"})
        journal.mark_processed(journal.append(WorkItemChanged(work_item=item)))
        journal.mark_processed(journal.append(StatusTransitioned(work_item_id="1", to="blocked")))
        journal.take_snapshot()
        expected = journal.replay()
    finally:
        journal.close()
    with sqlite3.connect(path) as db:
        db.execute("UPDATE snapshots SET state = '{\"work_items\": 5}'")
    db.close()
    reopened = Journal(path)
    try:
        assert reopened.replay() == expected
        assert reopened.snapshots() == []  # dropped
        assert reopened.restore().state == expected
    finally:
        reopened.close()


def test_a_burst_of_events_pays_for_one_background_snapshot(tmp_path: Path) -> None:
    path = tmp_path / "journal.sqlite3"
    journal = Journal(path, snapshot_every=5, snapshot_interval=3600)
    try:
        for n in range(1, 51):
            item = WorkItem.model_validate({"id": "1", "title": f"v{n}", "status": "pending"})
            seq = journal.append(WorkItemChanged(work_item=item))
            journal.append_and_mark([], seq)
    finally:
        journal.close()  # waits for the snapshot in progress
    reopened = Journal(path)
    try:
        (taken,) = reopened.snapshots()  # one, not ten
        assert 5 <= taken <= 50
    finally:
        reopened.close()


# ---------------------------------------------------------------------------- deferred commits


def _committed_types(path: Path) -> list[str]:
    """What another connection (another process) sees: the committed journal only."""
    with sqlite3.connect(path) as db:
        return [row[0] for row in db.execute("SELECT type FROM events ORDER BY seq")]


def _committed_cursor(path: Path) -> int:
    with sqlite3.connect(path) as db:
        return int(db.execute("SELECT processed_seq FROM cursor").fetchone()[0])


def _transition(wid: str = "1") -> StatusTransitioned:
    return StatusTransitioned(work_item_id=wid, to="pending")


def test_a_deferred_cycle_end_is_committed_with_the_next_intent(tmp_path: Path) -> None:
    """No provider write is made while an earlier cycle's results are uncommitted: recording
    the write's intent commits them first, in the same transaction."""
    path = tmp_path / "j.sqlite3"
    journal = Journal(path)
    first = journal.append(WorkItemChanged(work_item=WorkItem(id="1", title="t", status="done")))
    [result] = journal.append_and_mark([_transition()], first, defer=True)
    assert result == first + 1  # its seq is known before it is stored
    assert _committed_types(path) == ["WorkItemChanged"]
    assert _committed_cursor(path) == 0

    command = TransitionStatus(work_item_id="1", to="pending")
    assert journal.begin_intent("k", command) is None
    assert _committed_types(path) == ["WorkItemChanged", "StatusTransitioned"]
    assert _committed_cursor(path) == first
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT status FROM intents").fetchall() == [("pending",)]
    journal.close()


def test_a_deferred_intent_result_is_committed_before_the_next_write(tmp_path: Path) -> None:
    path = tmp_path / "j.sqlite3"
    journal = Journal(path)
    command = TransitionStatus(work_item_id="1", to="pending")
    journal.begin_intent("a", command)
    journal.finish_intent("a", [_transition()], defer=True)
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT status FROM intents WHERE key = 'a'").fetchone() == ("pending",)
    journal.begin_intent("b", TransitionStatus(work_item_id="2", to="pending"))
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT status FROM intents WHERE key = 'a'").fetchone() == ("done",)
    journal.close()


def test_reads_an_event_from_outside_an_idle_flush_and_close_commit_what_was_deferred(
    tmp_path: Path,
) -> None:
    path = tmp_path / "j.sqlite3"
    journal = Journal(path)
    seq = journal.append(_transition("1"))
    journal.append_and_mark([_transition("2")], seq, defer=True)
    # the journal's own reads see the deferred records (and commit them)
    assert [e.event.type for e in journal.entries()] == ["StatusTransitioned"] * 2
    assert _committed_cursor(path) == seq

    journal.append_and_mark([_transition("3")], seq + 1, defer=True)
    journal.append(_transition("4"))  # an event from outside: one transaction with them
    assert len(_committed_types(path)) == 4
    journal.append_and_mark([], seq + 3, defer=True)
    journal.flush()
    assert _committed_cursor(path) == seq + 3
    journal.append_and_mark([_transition("5")], seq + 3, defer=True)
    journal.close()
    assert len(_committed_types(path)) == 5


def test_sequence_numbers_keep_growing_across_reopening(tmp_path: Path) -> None:
    path = tmp_path / "j.sqlite3"
    journal = Journal(path)
    seqs = [journal.append(_transition()) for _ in range(3)]
    journal.close()
    journal = Journal(path)
    assert journal.last_seq() == seqs[-1]
    assert journal.append(_transition()) == seqs[-1] + 1
    journal.close()


KILLED_WITH_DEFERRED = """
import os, signal, sys
from actors.journal import Journal
from actors.journal_file import check_journal
from domain.events import StatusTransitioned, UserTransitionedStatus
journal = Journal(sys.argv[1])
first = journal.append(UserTransitionedStatus(work_item_id="1", to="done"))
journal.append_and_mark([StatusTransitioned(work_item_id="1", to="done")], first, defer=True)
os.kill(os.getpid(), signal.SIGKILL)
"""


def test_a_crash_loses_at_most_the_deferred_cycle_which_is_then_processed_again(
    tmp_path: Path,
) -> None:
    path = tmp_path / "j.sqlite3"
    child = subprocess.run(
        [sys.executable, "-c", KILLED_WITH_DEFERRED, str(path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert child.returncode == -signal.SIGKILL, child.stderr
    restored = Journal(path).restore()
    # the committed journal is a prefix: the event is there, its cycle is not, so it is
    # processed again (its writes answer from their intents)
    assert restored.processed_seq == 0
    assert [e.event.type for e in restored.unprocessed] == ["UserTransitionedStatus"]


def _lock_out(path: Path) -> sqlite3.Connection:
    """Another connection holding the write lock: the journal's next commit fails."""
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    return other


def test_a_cycle_whose_forced_commit_fails_is_not_left_deferred(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The engine fails on it and processes the event again: the first attempt's results must
    not be committed later beside the second's."""
    monkeypatch.setattr("actors.journal._MAX_DEFERRED", 1)
    path = tmp_path / "j.sqlite3"
    journal = Journal(path)
    journal._db.execute("PRAGMA busy_timeout = 50")
    first = journal.append(UserTransitionedStatus(work_item_id="1", to="done"))
    other = _lock_out(path)
    with pytest.raises(JournalError):
        journal.append_and_mark([_transition(), _transition("2")], first, defer=True)
    other.execute("ROLLBACK")
    other.close()
    journal.append_and_mark([_transition(), _transition("2")], first, defer=True)  # again
    journal.flush()
    assert _committed_types(path) == [
        "UserTransitionedStatus",
        "StatusTransitioned",
        "StatusTransitioned",
    ]
    journal.close()


def test_an_idle_flush_that_fails_leaves_the_cycle_done_and_commits_it_once_later(
    tmp_path: Path,
) -> None:
    path = tmp_path / "j.sqlite3"
    journal = Journal(path)
    journal._db.execute("PRAGMA busy_timeout = 50")
    inbox = Inbox(journal)
    seq = inbox.put(UserTransitionedStatus(work_item_id="1", to="done"))
    assert seq is not None
    assert inbox.take() == (seq, UserTransitionedStatus(work_item_id="1", to="done"))
    other = _lock_out(path)
    inbox.finish(seq)  # the queue goes idle; its flush fails and is logged, not raised
    assert not inbox.busy
    other.execute("ROLLBACK")
    other.close()
    inbox.put(_transition())  # the next transaction commits the deferred cycle end
    assert _committed_cursor(path) == seq
    assert _committed_types(path) == ["UserTransitionedStatus", "StatusTransitioned"]
    journal.close()


_DONE = StatusTransitioned(work_item_id="1", to="done")
_CLOSED_OPERATIONS = {
    "append an event": lambda j: j.append(_DONE),
    "finish a cycle": lambda j: j.append_and_mark([_DONE], 1),
    "advance the cursor": lambda j: j.mark_processed(1),
    "read the cursor": lambda j: j.processed_seq(),
    "read events": lambda j: list(j.entries()),
    "list snapshots": lambda j: j.snapshots(),
    "record an intent": lambda j: j.begin_intent(
        "k2", TransitionStatus(work_item_id="1", to="done")
    ),
    "finish an intent": lambda j: j.finish_intent("k", []),
    "fail an intent": lambda j: j.fail_intent("k", "why"),
    "read an intent": lambda j: j.intent("k"),
    "read intents": lambda j: j.intents("pending"),
}


@pytest.mark.parametrize("what", list(_CLOSED_OPERATIONS))
def test_a_journal_that_cannot_do_an_operation_says_which_one(tmp_path: Path, what: str) -> None:
    """The one line `cpe` prints when the journal fails names the journal and what it could
    not do (here: used after it was closed)."""
    path = tmp_path / "journal.sqlite3"
    journal = Journal(path)
    journal.begin_intent("k", TransitionStatus(work_item_id="1", to="done"))
    journal.close()
    with pytest.raises(JournalError) as caught:
        _CLOSED_OPERATIONS[what](journal)
    assert str(caught.value).startswith(f"{path}: cannot {what}: ")


def test_deferred_writes_that_cannot_be_committed_say_so(tmp_path: Path) -> None:
    path = tmp_path / "journal.sqlite3"
    journal = Journal(path)
    seq = journal.append(_DONE)
    journal.append_and_mark([_DONE], seq, defer=True)
    journal._db.close()  # the connection is gone under the deferred writes
    with pytest.raises(JournalError) as caught:
        journal.flush()
    assert str(caught.value).startswith(f"{path}: cannot commit deferred writes: ")

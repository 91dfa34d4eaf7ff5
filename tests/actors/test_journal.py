"""The journal: append, cursor, restore, replay, intents."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from actors.journal import Journal
from domain.commands import TransitionStatus
from domain.errors import JournalError
from domain.events import AgentFailed, StatusTransitioned, WorkItemChanged
from domain.models import ImplementorStartParams, WorkItem
from tests.domain.builders import requested


def test_restore_gives_engine_owned_facts_and_the_unprocessed_tail(tmp_path: Path) -> None:
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
    assert restored.state.work_items == {}  # provider-owned: comes from the first poll
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

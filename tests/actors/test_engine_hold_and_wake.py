"""The engine's facade over time: a person's events submitted and waited for, the loop held
and let go, the timer that wakes dispatch when a wait ends with no other event to do it, and
the day's budget."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from actors.settings import DailyBudget
from domain.errors import JournalError
from domain.events import CommandRejected, DispatchDue, UserTransitionedStatus
from domain.handlers.options import HandlerOptions
from tests.actors.conftest import Harness, wait_until
from tests.actors.test_engine import journal, journal_types


def _done(wid: str) -> UserTransitionedStatus:
    return _status(wid, "done")


def _status(wid: str, to: str) -> UserTransitionedStatus:
    return UserTransitionedStatus.model_validate({"work_item_id": wid, "to": to})


def _rejections(engine: Any) -> str:
    return " ".join(
        e.event.reason for e in journal(engine).entries() if isinstance(e.event, CommandRejected)
    )


def test_submit_waits_until_a_persons_events_are_processed(harness: Harness) -> None:
    harness.tracker.add_item("1", "blocked")
    harness.tracker.add_item("2", "blocked")
    engine = harness.engine()
    engine.start()
    seen: list[str] = []
    states: list[tuple[Any, Any, Any]] = []
    engine.watch(lambda event, before, after: states.append((event, before, after)))
    engine.watch(
        lambda event, _before, _after: (
            seen.append(event.work_item_id) if isinstance(event, UserTransitionedStatus) else None
        )
    )
    assert engine.submit([_done("1"), _done("2")], 30) is True
    assert seen == ["1", "2"]  # processed, not merely queued, when submit returns
    # each watcher call has the states before and after its event, one after the other
    assert all(before is not None for _, before, _ in states)
    assert all(a is b for (_, _, a), (_, b, _) in itertools.pairwise(states))
    assert engine.submit([], 30) is True  # nothing to wait for


def test_submit_says_false_when_the_events_are_not_processed_in_time(harness: Harness) -> None:
    """A held loop: the events are journaled (they are processed later), and submit says it
    did not see them processed within its timeout rather than waiting past it."""
    harness.tracker.add_item("1", "blocked")
    engine = harness.engine()
    engine.start()
    engine.pause()
    assert engine.submit([_done("1")], 0.2) is False
    assert engine.get_state().work_items["1"].status == "blocked"
    assert "UserTransitionedStatus" in journal_types(engine)
    engine.resume()
    wait_until(lambda: engine.get_state().work_items["1"].status == "done", engine)


def test_submit_says_none_once_the_engine_refuses_events(harness: Harness) -> None:
    harness.tracker.add_item("1", "blocked")
    engine = harness.engine()
    engine.start()
    engine.stop(reason="test")
    assert engine.submit([_done("1")], 30) is None


def test_an_engine_stopped_before_it_started_closes_its_journal(harness: Harness) -> None:
    engine = harness.engine()
    engine.stop(reason="never mind")
    assert engine.stopped
    with pytest.raises(JournalError, match="cannot read the cursor"):
        engine.journal.processed_seq()
    engine.stop(reason="again")  # a second stop is nothing


def test_an_engine_paused_before_it_starts_processes_nothing_until_resumed(
    harness: Harness,
) -> None:
    """``pause()`` before ``start()``: the first poll's events are journaled but held; start
    returns without waiting for them, and ``resume()`` lets them through."""
    harness.tracker.add_item("1", "pending")
    engine = harness.engine()
    engine.pause()
    engine.start()
    assert engine.get_state().work_items == {}
    assert not engine.inbox.wait_idle(0.2)
    assert harness.runtime.runs == {}
    engine.resume()
    [run] = harness.runtime.wait_runs(1)
    assert run.params.work_item_id == "1"


def test_the_dispatch_timer_queues_a_dispatch_when_its_time_comes(harness: Harness) -> None:
    engine = harness.engine()
    engine.start()
    assert engine.inbox.wait_idle(30)
    engine.executor.wake_at(datetime.now(UTC) - timedelta(seconds=5))  # already due: at once
    wait_until(lambda: "DispatchDue" in journal_types(engine), engine)
    due = [e for e in journal(engine).entries() if isinstance(e.event, DispatchDue)]
    assert len(due) == 1
    assert abs((due[0].event.at - datetime.now(UTC)).total_seconds()) < 60
    # once the engine refuses events, a timer that fires late queues nothing (and does not fail)
    engine.stop(reason="test")
    engine.executor.wake_at(datetime.now(UTC))
    assert [e for e in journal(engine).entries() if isinstance(e.event, DispatchDue)] == due


def test_a_retry_starts_when_its_backoff_ends_with_no_other_event_to_wake_dispatch(
    harness: Harness,
) -> None:
    """The implementor fails; its retry waits out a one-second backoff. Nothing else happens
    (no poller ticks here), so only the engine's timer can start the second run."""
    harness.tracker.add_item("1", "pending")
    engine = harness.engine(
        handlers=HandlerOptions(auto_merge=True, retry_backoff_initial=1, retry_backoff_max=1)
    )
    engine.start()
    [first] = harness.runtime.wait_runs(1)
    first.fail("failed", "the tests failed")
    runs = harness.runtime.wait_runs(2, timeout=60)
    assert runs[1].params.work_item_id == "1"
    assert "DispatchDue" in journal_types(engine)


def test_the_engines_daily_budget_stops_dispatch_once_todays_runs_cost_it(
    harness: Harness,
) -> None:
    """``[budget] per_day_usd`` reaches the executor: the first run costs the whole day's
    budget (1 cent), so the second item is not started today and the refusal says why."""
    harness.tracker.add_item("1", "pending")
    harness.tracker.add_item("2", "blocked")
    engine = harness.engine(
        daily_budget=DailyBudget(per_day_usd=0.01),
        handlers=HandlerOptions(auto_merge=True, max_concurrent={"implementor": 1}),
    )
    engine.start()
    [first] = harness.runtime.wait_runs(1)
    first.complete()
    wait_until(lambda: not engine.sessions.active(), engine)
    assert engine.submit([_status("2", "pending")], 30)
    wait_until(lambda: "the daily budget is spent" in _rejections(engine), engine)
    assert len(harness.runtime.runs) == 1

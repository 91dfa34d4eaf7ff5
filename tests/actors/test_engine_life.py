"""The engine journals its own start and stop (``EngineStarted``, ``EngineStopped``): how
``cpe status`` tells a clean stop from an interruption and from a crash, which journals none."""

from __future__ import annotations

import os

from domain.events import AgentFailed, EngineStarted, EngineStopped
from domain.models import EngineProcess
from tests.actors.conftest import Harness, wait_until
from tests.actors.test_engine import journal


def test_a_start_journals_the_engines_pid_and_the_state_holds_it(harness: Harness) -> None:
    engine = harness.engine()
    engine.start()
    [started] = [e.event for e in journal(engine).entries() if isinstance(e.event, EngineStarted)]
    assert started.pid == os.getpid()
    wait_until(lambda: engine.get_state().engine is not None, engine)
    assert engine.get_state().engine == EngineProcess(pid=os.getpid(), started_at=started.at)


def test_a_stop_journals_how_and_why_as_the_engines_last_event(harness: Harness) -> None:
    engine = harness.engine()
    engine.start()
    engine.stop(reason="signal SIGTERM")
    last = list(journal(engine).entries())[-1].event
    assert isinstance(last, EngineStopped)
    assert (last.how, last.reason) == ("stopped", "signal SIGTERM")
    restored = journal(engine).restore()  # what the next start (or cpe status) reads
    assert [e.event for e in restored.unprocessed] == [last]


def test_a_forced_exit_journals_the_active_runs_then_an_interruption(harness: Harness) -> None:
    harness.tracker.add_item("1")
    engine = harness.engine()
    engine.start()
    run = harness.runtime.wait_run()
    assert engine.abandon_runs("interrupted: a second Ctrl-C") == 1
    # Journaled before abandon_runs returns (the process exits right after it). This engine
    # goes on, so what it decides on the failure (the item back to pending) may follow them.
    events = [e.event for e in journal(engine).entries()]
    [failed] = [e for e in events if isinstance(e, AgentFailed)]
    [stopped] = [e for e in events if isinstance(e, EngineStopped)]
    assert (failed.session_id, failed.kind) == (run.session_id, "cancelled")
    assert stopped.how == "interrupted"
    assert events.index(failed) < events.index(stopped), events


def test_a_forced_exit_after_the_stop_finished_journals_nothing_more(harness: Harness) -> None:
    engine = harness.engine()
    engine.start()
    engine.stop(reason="signal SIGINT")
    assert engine.abandon_runs("interrupted: a second Ctrl-C") == 0
    last = list(journal(engine).entries())[-1].event
    assert isinstance(last, EngineStopped)
    assert (last.how, last.reason) == ("stopped", "signal SIGINT")

"""Why a run was cancelled, as the engine records it: a person's cancel and the engine's own
stop each leave their reason on the run (what ``cpe status`` and ``cpe runs show`` print)."""

from __future__ import annotations

from domain.events import AgentFailed, UserCancelledRun
from tests.actors.conftest import Harness, wait_until
from tests.actors.test_engine import journal


def _failures(engine: object) -> list[AgentFailed]:
    return [e.event for e in journal(engine).entries() if isinstance(e.event, AgentFailed)]


def test_a_run_a_person_cancels_ends_cancelled_by_a_person(harness: Harness) -> None:
    harness.tracker.add_item("1")
    engine = harness.engine()
    engine.start()
    run = harness.runtime.wait_run()
    assert engine.submit([UserCancelledRun(session_id=run.session_id)], 30)
    # the journal has the event before the engine's state has taken it in: wait for both
    wait_until(
        lambda: engine.get_state().agent_runs[run.session_id].failure_reason is not None, engine
    )
    [failed] = _failures(engine)
    assert (failed.kind, failed.reason) == ("cancelled", "cancelled by a person")
    assert engine.get_state().agent_runs[run.session_id].failure_reason == ("cancelled by a person")


def test_a_run_the_engines_stop_cancels_ends_saying_the_engine_is_shutting_down(
    harness: Harness,
) -> None:
    harness.tracker.add_item("1")
    engine = harness.engine()
    engine.start()
    run = harness.runtime.wait_run()
    engine.stop(reason="test")
    [failed] = _failures(engine)
    assert (failed.session_id, failed.kind, failed.reason) == (
        run.session_id,
        "cancelled",
        "the engine is shutting down",
    )

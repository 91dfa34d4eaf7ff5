"""The supervisor's, the actors' and the agent sessions' log lines and messages, word for word:
what an operator reads when a child stops, crashes or will not stop."""

from __future__ import annotations

import asyncio
import random
import threading
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pykka
import pytest
from structlog.testing import capture_logs

from actors.base import CrashReport
from actors.session import AgentSession, Cancel
from actors.supervisor import ChildSpec, Supervisor
from domain.events import AgentFailed
from domain.models import AgentStartParams, SessionId
from domain.ports import AgentRunHandle
from tests.actors.test_session import SID, Rig, Unstoppable
from tests.actors.test_supervision import FAST, Boom, FakeClock, Worker, spec, wait_generation
from tests.fakes.runtime import FakeRuntime, Script


def _lines(logs: list[dict[str, Any]], event: str) -> list[dict[str, Any]]:
    return [line for line in logs if line["event"] == event]


@pytest.fixture(autouse=True)
def _fresh_worker(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(Worker, "started", {})
    monkeypatch.setattr(Worker, "fail_on_start", set())
    monkeypatch.setattr(Worker, "fail_release", set())


# ---------------------------------------------------------------------------- the supervisor


def test_a_permanent_child_that_stops_is_restarted_with_a_line_saying_so() -> None:
    sup = Supervisor(FAST, rng=random.Random(1))
    try:
        sup.start_child(spec("a"))
        with capture_logs() as logs:
            sup.ref("a").tell("stop")
            wait_generation(sup, "a", 2)
        assert _lines(logs, "restarting") == [
            {
                "event": "restarting",
                "child": "a",
                "reason": "RuntimeError: the permanent child a stopped",
                "strategy": "one_for_one",
                "group": ["a"],
                "backoff_s": 0.0,
                "log_level": "warning",
            }
        ]
    finally:
        sup.stop(timeout=10)


def test_past_the_intensity_the_line_names_the_child_and_the_limit() -> None:
    given_up: list[BaseException] = []
    gave_up = threading.Event()
    sup = Supervisor(
        FAST.model_copy(update={"max_restarts": 0}),
        on_give_up=lambda exc: (given_up.append(exc), gave_up.set()),
    )
    try:
        sup.start_child(spec("a"))
        with capture_logs() as logs:
            sup.ref("a").tell("stop")
            assert gave_up.wait(30)
        assert _lines(logs, "restart intensity exceeded; stopping everything") == [
            {
                "event": "restart intensity exceeded; stopping everything",
                "child": "a",
                "max_restarts": 0,
                "within_seconds": 60,
                "log_level": "error",
            }
        ]
        [why] = given_up
        assert (type(why), str(why)) == (RuntimeError, "the permanent child a stopped")
    finally:
        sup.stop(timeout=10)


def test_a_childs_backoff_counts_its_restarts_up_to_the_window_inclusive() -> None:
    """A crash exactly ``within_seconds`` after the first still counts it: the backoff
    doubles."""
    clock = FakeClock()
    settings = FAST.model_copy(update={"backoff_initial": 0.01, "within_seconds": 10})
    sup = Supervisor(settings, clock=clock)
    try:
        sup.start_child(spec("a"))
        with capture_logs() as logs:
            sup.ref("a").tell("boom")
            wait_generation(sup, "a", 2)
            clock.now += 10
            sup.ref("a").tell("boom")
            wait_generation(sup, "a", 3)
        assert [line["backoff_s"] for line in _lines(logs, "restarting")] == [0.01, 0.02]
    finally:
        sup.stop(timeout=10)


class CannotStart(Exception):
    pass


def test_a_supervisor_that_fails_to_restart_a_child_gives_up_with_that_failure() -> None:
    given_up: list[BaseException] = []
    gave_up = threading.Event()
    failure = CannotStart("no second start")

    def start(generation: int, report: CrashReport) -> pykka.ActorRef[Any]:
        if generation > 1:
            raise failure
        return Worker.start(child_id="a", generation=generation, report=report)

    sup = Supervisor(FAST, on_give_up=lambda exc: (given_up.append(exc), gave_up.set()))
    try:
        sup.start_child(ChildSpec("a", start))
        with capture_logs() as logs:
            sup.ref("a").tell("boom")
            assert gave_up.wait(30)
        assert given_up == [failure]
        assert sup.exit_code == 75
        assert _lines(logs, "supervisor failed to handle a crash") == [
            {"event": "supervisor failed to handle a crash", "log_level": "error", "exc_info": True}
        ]
    finally:
        sup.stop(timeout=10)


# ---------------------------------------------------------------------------- a crashing actor


def test_a_release_that_fails_after_a_crash_is_logged_and_the_crash_still_reported() -> None:
    Worker.fail_release = {("a", 0)}
    reported: list[BaseException | None] = []
    done = threading.Event()

    def report(child_id: str, generation: int, exc: BaseException | None) -> None:
        reported.append(exc)
        done.set()

    ref = Worker.start(child_id="a", report=report)
    with capture_logs() as logs:
        with pytest.raises(Boom):
            ref.ask("boom", timeout=10)
        assert done.wait(30)
    assert [type(exc) for exc in reported] == [Boom]
    assert _lines(logs, "release after a crash failed") == [
        {
            "event": "release after a crash failed",
            "actor": "a",
            "log_level": "error",
            "exc_info": True,
        }
    ]


# ---------------------------------------------------------------------------- agent sessions


@pytest.fixture
def rig_for(tmp_path: Path) -> Iterator[Any]:
    rigs: list[Rig] = []

    def make(runtime: Any, **kw: Any) -> Rig:
        rig = Rig(tmp_path, runtime, **kw)
        rigs.append(rig)
        return rig

    yield make
    for rig in rigs:
        rig.close()


_SESSION_FIELDS = {
    "actor": f"session:{SID}",
    "session_id": SID,
    "role": "implementor",
    "work_item_id": "1",
}


_GRACE_STAGES = (
    "run did not stop after cancel; cancelling its scope",
    "run did not stop; abandoned",
)


def test_a_run_that_ignores_cancel_is_logged_at_each_grace_stage(rig_for: Any) -> None:
    runtime = Unstoppable()
    rig = rig_for(runtime, cancel_grace=0.2)
    try:
        assert runtime.waiting.wait(30)
        with capture_logs() as logs:
            rig.ref.tell(Cancel("a person asked"))
            [event] = rig.ended()
        assert event.reason == "a person asked; the runtime did not stop"
        stages = [line for line in logs if line["event"] in _GRACE_STAGES]
        assert stages == [
            {
                "event": "run did not stop after cancel; cancelling its scope",
                **_SESSION_FIELDS,
                "log_level": "warning",
            },
            {"event": "run did not stop; abandoned", **_SESSION_FIELDS, "log_level": "error"},
        ]
    finally:
        runtime.release.set()


def test_a_crashed_session_reports_the_exceptions_type_and_message(
    rig_for: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(self: AgentSession) -> Any:
        raise RuntimeError("no terminal event today")

    monkeypatch.setattr(AgentSession, "_terminal_event", broken)
    rig = rig_for(FakeRuntime(Script(auto=lambda p: None)))
    [event] = rig.ended()
    assert isinstance(event, AgentFailed)
    assert (event.kind, event.reason) == (
        "failed",
        "session crashed: RuntimeError: no terminal event today",
    )
    assert [str(exc) for exc in rig.crashes] == ["no terminal event today"]


class EndsWhenCancelled:
    """A runtime whose result is a future that ends when ``cancel_agent`` is called, and that
    records whether the session waited for it (awaited it) after its deadline."""

    def __init__(self) -> None:
        self.awaited = threading.Event()
        self.cancels: list[SessionId] = []
        self._result: asyncio.Future[Any] | None = None

    async def start_agent(self, params: AgentStartParams) -> AgentRunHandle:
        assert params.session_id is not None
        awaited = self.awaited

        class Watched(asyncio.Future[Any]):
            def __await__(self) -> Any:
                awaited.set()
                return super().__await__()

        self._result = Watched()

        async def output() -> AsyncIterator[str]:
            return
            yield  # an async generator with nothing to say

        return AgentRunHandle(session_id=params.session_id, output=output(), result=self._result)

    def cancel_agent(self, session_id: SessionId) -> None:
        self.cancels.append(session_id)
        result = self._result
        if result is not None:
            result.get_loop().call_soon_threadsafe(
                lambda: result.done() or result.set_exception(RuntimeError("cancelled"))
            )


def test_a_run_past_its_deadline_is_waited_for_before_it_is_reported_timed_out(
    rig_for: Any,
) -> None:
    runtime = EndsWhenCancelled()
    rig = rig_for(runtime, max_duration=0.1, cancel_grace=0.2)
    [event] = rig.ended()
    assert (event.kind, event.reason) == ("timed-out", "exceeded max_agent_duration (0.1s)")
    assert runtime.cancels == [SID]
    assert runtime.awaited.is_set(), "the session did not wait for the run to end"

"""An agent session on its own: whatever the runtime does, exactly one terminal event."""

from __future__ import annotations

import asyncio
import dataclasses
import threading
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import pytest
from structlog.testing import capture_logs

from actors.journal import Journal
from actors.queue import Inbox
from actors.session_actor import AgentSession, Cancel
from actors.session_registry import SessionManager
from actors.streams import OutputBuffer, StreamRegistry
from domain.errors import AgentFailure
from domain.events import (
    AgentFailed,
    AgentStarted,
    ImplementorCompleted,
    PlannerCompleted,
    ReviewerCompleted,
    UserCancelledRun,
    is_agent_terminal,
)
from domain.models import (
    AgentStartParams,
    ImplementorStartParams,
    PlannerStartParams,
    ReviewerStartParams,
    RunUsage,
    SessionId,
)
from domain.ports import AgentRunHandle
from tests.actors.conftest import Harness, wait_until
from tests.fakes.runtime import FakeRuntime, Script, default_result

SID = SessionId("implementor-1")
PARAMS = ImplementorStartParams(session_id=SID, work_item_id="1", branch_name="cpe/1-x")


class Rig:
    def __init__(self, tmp_path: Path, runtime: Any, **kw: Any):
        self.journal = Journal(tmp_path / "j.sqlite3")
        self.inbox = Inbox(self.journal)
        self.sessions = SessionManager()
        self.streams = StreamRegistry()
        self.runtime = runtime
        self.crashes: list[BaseException] = []
        self.finished = threading.Event()
        # Nobody takes from this inbox, so it calls wake() after every event it journals.
        self.queued = threading.Condition()
        self.inbox.wake = self._queued
        params = kw.get("params", PARAMS)
        self.sessions.add(params.session_id, params)
        self.ref = AgentSession.start(
            session_id=params.session_id,
            params=params,
            adapter=runtime,
            max_duration=kw.get("max_duration", 60),
            cancel_grace=kw.get("cancel_grace", 5),
            inbox=self.inbox,
            sessions=self.sessions,
            streams=self.streams,
            on_finished=self.finished.set,
            child_id=f"session:{params.session_id}",
            report=self._report,
        )

    def _queued(self) -> None:
        with self.queued:
            self.queued.notify_all()

    def _report(self, child_id: str, generation: int, exc: BaseException | None) -> None:
        if exc is not None:  # None: the session stopped normally
            self.crashes.append(exc)

    def terminal(self) -> list[Any]:
        return [e.event for e in self.journal.entries() if is_agent_terminal(e.event)]

    def ended(self) -> list[Any]:
        """The terminal events, once one is journaled and the session is over (its release
        ran: from then on nothing can emit another)."""
        with self.queued:
            assert self.queued.wait_for(lambda: bool(self.terminal()), 30), "no terminal event"
        assert self.finished.wait(30), "the session did not finish"
        return self.terminal()

    def close(self) -> None:
        release = getattr(self.runtime, "release_start", None)
        if release is not None:
            release.set()
        if self.ref.is_alive():
            self.ref.stop(block=True, timeout=30)


@pytest.fixture
def rig_for(tmp_path: Path) -> Any:
    rigs: list[Rig] = []

    def make(runtime: FakeRuntime, **kw: Any) -> Rig:
        rig = Rig(tmp_path, runtime, **kw)
        rigs.append(rig)
        return rig

    yield make
    for rig in rigs:
        rig.close()


@pytest.mark.spec("S000-04")
def test_a_completed_run_is_one_completed_event_with_its_cost(rig_for: Any) -> None:
    rig = rig_for(FakeRuntime(Script(auto=lambda p: None)))
    [event] = rig.ended()
    assert isinstance(event, ImplementorCompleted)
    assert (event.cost_usd, event.turns) == (0.01, 3)
    started = [e.event for e in rig.journal.entries() if isinstance(e.event, AgentStarted)]
    assert started[0].log_file_path == f"/tmp/{SID}.log"


@pytest.mark.parametrize(
    ("fault", "kind", "reason"),
    [
        (AgentFailure("failed", "the model gave up"), "failed", "the model gave up"),
        (AgentFailure("timed-out", "too slow"), "timed-out", "too slow"),
        (ValueError("a bug in the runtime"), "failed", "ValueError: a bug in the runtime"),
    ],
)
@pytest.mark.spec("S000-05")
def test_a_failing_run_is_one_agent_failed(
    rig_for: Any, fault: Any, kind: str, reason: str
) -> None:
    runtime = FakeRuntime()
    rig = rig_for(runtime)
    runtime.wait_run().raise_(fault)
    [event] = rig.ended()
    assert isinstance(event, AgentFailed)
    assert (event.kind, event.reason) == (kind, reason)


def test_an_infrastructure_failure_is_reported_as_one_with_the_runs_usage(rig_for: Any) -> None:
    """The model API unreachable (say): the event says infrastructure, which spends no
    attempt, and still carries what the run cost."""
    runtime = FakeRuntime()
    rig = rig_for(runtime)
    run = runtime.wait_run()
    run.usage = RunUsage(cost_usd=0.5, turns=2, model="claude-sonnet")
    run.raise_(AgentFailure("failed", "the model API is unreachable", infrastructure=True))
    [event] = rig.ended()
    assert isinstance(event, AgentFailed)
    assert (event.kind, event.reason, event.failure_class) == (
        "failed",
        "the model API is unreachable",
        "infrastructure",
    )
    assert (event.cost_usd, event.turns, event.model) == (0.5, 2, "claude-sonnet")


def test_the_first_cancel_gives_the_reason_a_later_one_does_not_replace_it(
    rig_for: Any,
) -> None:
    runtime = FakeRuntime(Script(ignore_cancel=lambda p: True))
    rig = rig_for(runtime, cancel_grace=60)
    run = runtime.wait_run()
    rig.ref.ask(Cancel("the item was deleted"), timeout=30)
    rig.ref.ask(Cancel("a person asked"), timeout=30)
    run.fail("cancelled", "cancel_agent was called")
    [event] = rig.ended()
    assert (event.kind, event.reason) == ("cancelled", "the item was deleted")
    assert runtime.cancels == [SID]  # the runtime was asked once


def test_garbage_from_the_runtime_is_a_failure(rig_for: Any) -> None:
    runtime = FakeRuntime()
    rig = rig_for(runtime)
    runtime.wait_run().complete({"outcome": "completed"})
    [event] = rig.ended()
    assert isinstance(event, AgentFailed)
    assert "expected a implementor result" in event.reason


ROLE_PARAMS: dict[str, AgentStartParams] = {
    "planner": PlannerStartParams(session_id=SessionId("planner-1"), spec_paths=("a.md",)),
    "implementor": PARAMS,
    "reviewer": ReviewerStartParams(
        session_id=SessionId("reviewer-1"), work_item_id="1", revision_id="r1"
    ),
}


@pytest.mark.parametrize(
    ("role", "completed"),
    [
        ("planner", PlannerCompleted),
        ("implementor", ImplementorCompleted),
        ("reviewer", ReviewerCompleted),
    ],
)
def test_each_roles_result_is_that_roles_completed_event_carrying_it(
    rig_for: Any, role: str, completed: type
) -> None:
    params = ROLE_PARAMS[role]
    rig = rig_for(FakeRuntime(Script(auto=default_result)), params=params)
    [event] = rig.ended()
    assert isinstance(event, completed)
    assert event.result == default_result(params)
    assert (event.session_id, event.cost_usd, event.turns) == (params.session_id, 0.01, 3)


@pytest.mark.parametrize(
    ("role", "other"),
    [("planner", "reviewer"), ("implementor", "planner"), ("reviewer", "planner")],
)
def test_a_result_of_another_role_is_a_failure_naming_both(
    rig_for: Any, role: str, other: str
) -> None:
    """A runtime that answers a planner run with a review (say) did not do the run's work."""
    params, wrong = ROLE_PARAMS[role], default_result(ROLE_PARAMS[other])
    rig = rig_for(FakeRuntime(Script(auto=lambda p: wrong)), params=params)
    [event] = rig.ended()
    assert isinstance(event, AgentFailed)
    assert (event.kind, event.failure_class) == ("failed", "work")
    assert event.reason == (
        f"the runtime returned {type(wrong).__name__}, expected a {role} result"
    )


def test_a_run_that_starts_once_shutdown_began_is_still_journaled_started_and_ended(
    rig_for: Any,
) -> None:
    """Shutdown closes the queue to new events while a run is starting: the run exists all
    the same, so its start is journaled (its end refers to it) as well as its end."""
    runtime = FakeRuntime(Script(block_start=lambda p: True))
    rig = rig_for(runtime)
    with runtime._cond:
        assert runtime._cond.wait_for(lambda: SID in runtime.starting, 30)
    rig.inbox.close()
    runtime.release_start.set()
    runtime.wait_run().complete()
    [event] = rig.ended()
    assert isinstance(event, ImplementorCompleted)
    started = [e.event for e in rig.journal.entries() if isinstance(e.event, AgentStarted)]
    assert [s.session_id for s in started] == [SID]


@pytest.mark.spec("S000-01")
def test_a_start_that_raises_is_one_agent_failed(rig_for: Any) -> None:
    runtime = FakeRuntime(Script(start_error=lambda p: AgentFailure("failed", "no worktree")))
    rig = rig_for(runtime)
    [event] = rig.ended()
    assert (event.kind, event.reason) == ("failed", "no worktree")
    assert runtime.runs == {}


@pytest.mark.spec("S000-27")
def test_a_run_past_its_duration_is_timed_out_and_the_runtime_told(rig_for: Any) -> None:
    runtime = FakeRuntime()
    rig = rig_for(runtime, max_duration=0.5)
    run = runtime.wait_run()
    [event] = rig.ended()
    assert (event.kind, event.type) == ("timed-out", "AgentFailed")
    assert runtime.cancels == [SID]
    assert run.cancelled.wait(30)  # cancel_agent reaches the run on its loop


@pytest.mark.spec("S000-06")
def test_cancel_ends_the_run_and_its_output(rig_for: Any) -> None:
    runtime = FakeRuntime()
    rig = rig_for(runtime)
    run = runtime.wait_run()
    assert rig.sessions.wait_all_ended(0) is False
    stream = rig.streams.wait_subscribe(SID, timeout=30)
    assert stream is not None
    run.say("working…")
    rig.ref.tell(Cancel("a person asked"))
    assert list(stream) == ["working…"]
    [event] = rig.ended()
    assert (event.kind, event.reason) == ("cancelled", "a person asked")


def test_a_run_that_ignores_cancel_is_cancelled_by_its_scope(rig_for: Any) -> None:
    runtime = FakeRuntime(Script(ignore_cancel=lambda p: True))
    rig = rig_for(runtime, cancel_grace=0.3)
    runtime.wait_run()
    rig.ref.tell(Cancel("stop"))
    [event] = rig.ended()
    assert event.kind == "cancelled"


def test_a_cancel_while_starting_cancels_the_start(rig_for: Any) -> None:
    runtime = FakeRuntime(Script(block_start=lambda p: True))
    rig = rig_for(runtime, cancel_grace=30)
    rig.ref.tell(Cancel("shutting down"))
    [event] = rig.ended()
    assert (event.kind, event.reason) == ("cancelled", "shutting down")


def test_stopping_the_session_mid_run_reports_it_once(rig_for: Any) -> None:
    runtime = FakeRuntime()
    rig = rig_for(runtime)
    runtime.wait_run()
    rig.ref.stop(block=True, timeout=30)
    [event] = rig.ended()
    assert event.kind == "cancelled"
    assert not rig.crashes


def test_output_buffer_gives_the_past_then_live_chunks_to_threads_and_asyncio() -> None:
    buffer = OutputBuffer()
    buffer.append("a")
    from_thread: list[str] = []
    reader = threading.Thread(target=lambda: from_thread.extend(buffer.subscribe()))
    reader.start()

    async def read_async() -> list[str]:
        return [chunk async for chunk in buffer.subscribe()]

    async def main() -> list[str]:
        task = asyncio.create_task(read_async())
        await asyncio.sleep(0)
        buffer.append("b")
        buffer.append("c")
        buffer.close()
        return await task

    assert asyncio.run(main()) == ["a", "b", "c"]
    reader.join(30)
    assert from_thread == ["a", "b", "c"]
    assert list(buffer.subscribe()) == ["a", "b", "c"]  # a late subscriber sees it all


# ---------------------------------------------------------------------------- misbehaving runtimes


class Unstoppable:
    """A runtime whose run waits in a worker thread, shielded from cancellation, and whose
    ``cancel_agent`` does nothing: neither the adapter nor the run's cancel scope can end it."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.waiting = threading.Event()
        self.cancels: list[SessionId] = []

    async def start_agent(self, params: AgentStartParams) -> AgentRunHandle:
        assert params.session_id is not None

        async def output() -> AsyncIterator[str]:
            yield "starting"

        async def result() -> Any:
            with anyio.CancelScope(shield=True):
                self.waiting.set()
                await anyio.to_thread.run_sync(self.release.wait, 60)
            return default_result(params)

        return AgentRunHandle(session_id=params.session_id, output=output(), result=result())

    def cancel_agent(self, session_id: SessionId) -> None:
        self.cancels.append(session_id)


@pytest.mark.spec("S000-06")
def test_a_run_that_ignores_even_its_cancel_scope_is_abandoned_with_one_terminal_event(
    rig_for: Any,
) -> None:
    runtime = Unstoppable()
    earlier = set(threading.enumerate())  # an earlier test's loop may still be closing
    rig = rig_for(runtime, cancel_grace=0.2)
    assert runtime.waiting.wait(30)
    [loop_thread] = [
        t for t in threading.enumerate() if t.name == f"cpe-{SID}" and t not in earlier
    ]
    rig.ref.tell(Cancel("a person asked"))
    [event] = rig.ended()
    assert isinstance(event, AgentFailed)
    assert (event.kind, event.reason) == ("cancelled", "a person asked; the runtime did not stop")
    assert runtime.cancels  # it was asked first
    assert not rig.crashes
    assert loop_thread.is_alive()  # the run is still going, abandoned
    # when the run ends at last, its loop is closed, and nothing more is reported
    runtime.release.set()
    loop_thread.join(30)
    assert not loop_thread.is_alive()
    assert rig.terminal() == [event]


class CancelRaises(FakeRuntime):
    def cancel_agent(self, session_id: SessionId) -> None:
        with self._cond:
            self.cancels.append(session_id)
        raise RuntimeError("the runtime's cancel is broken")


class UsageRaises(FakeRuntime):
    async def start_agent(self, params: AgentStartParams) -> AgentRunHandle:
        handle = await super().start_agent(params)

        def usage() -> RunUsage:
            raise RuntimeError("no usage today")

        return dataclasses.replace(handle, usage=usage)


class OutputNotAStream(FakeRuntime):
    async def start_agent(self, params: AgentStartParams) -> AgentRunHandle:
        handle = await super().start_agent(params)
        return dataclasses.replace(handle, output=42)  # type: ignore[arg-type] # garbage on purpose


@pytest.mark.spec("S000-06")
def test_a_cancel_agent_that_raises_still_ends_the_run_once(rig_for: Any) -> None:
    runtime = CancelRaises()
    rig = rig_for(runtime, cancel_grace=0.2)
    run = runtime.wait_run()
    rig.ref.tell(Cancel("stop"))
    [event] = rig.ended()  # the run's cancel scope ended it
    assert (event.kind, event.reason) == ("cancelled", "stop")
    assert runtime.cancels[0] == SID
    assert not run.cancelled.is_set()  # the adapter's cancel never reached the run
    assert not rig.crashes


@pytest.mark.parametrize("finish", ["complete", "fail"])
def test_a_usage_that_raises_gives_one_terminal_event_without_cost(
    rig_for: Any, finish: str
) -> None:
    runtime = UsageRaises()
    rig = rig_for(runtime)
    run = runtime.wait_run()
    getattr(run, finish)()
    [event] = rig.ended()
    assert type(event) is (ImplementorCompleted if finish == "complete" else AgentFailed)
    assert (event.cost_usd, event.turns) == (None, None)
    assert not rig.crashes


@pytest.mark.spec("S000-28")
def test_output_chunks_that_are_not_text_are_dropped(rig_for: Any) -> None:
    runtime = FakeRuntime()
    rig = rig_for(runtime)
    run = runtime.wait_run()
    stream = rig.streams.wait_subscribe(SID, timeout=30)
    assert stream is not None
    for chunk in (b"bytes", None, 42, {"text": "x"}, "", "text"):
        run.say(chunk)
    run.complete()
    assert list(stream) == ["text"]
    [event] = rig.ended()
    assert isinstance(event, ImplementorCompleted)
    assert not rig.crashes


def test_an_output_that_is_not_a_stream_does_not_spoil_the_result(rig_for: Any) -> None:
    runtime = OutputNotAStream()
    rig = rig_for(runtime)
    runtime.wait_run().complete()
    [event] = rig.ended()
    assert isinstance(event, ImplementorCompleted)
    assert not rig.crashes


# ---------------------------------------------------------------------------- in the engine


def _cancel_it(engine: Any, run: Any) -> None:
    engine.enqueue(UserCancelledRun.model_validate({"session_id": run.session_id}))


def _garbage_then_complete(engine: Any, run: Any) -> None:
    for chunk in (b"bytes", None, 42):
        run.say(chunk)
    run.complete()


@pytest.mark.parametrize(
    ("runtime", "act", "outcome"),
    [
        (CancelRaises, _cancel_it, "AgentFailed"),
        (UsageRaises, lambda engine, run: run.complete(), "ImplementorCompleted"),
        (FakeRuntime, _garbage_then_complete, "ImplementorCompleted"),
        (OutputNotAStream, lambda engine, run: run.complete(), "ImplementorCompleted"),
    ],
)
def test_a_misbehaving_runtime_does_not_crash_the_engine(
    harness: Harness, runtime: type[FakeRuntime], act: Any, outcome: str
) -> None:
    harness.runtime = runtime()
    harness.tracker.add_item("1")
    engine = harness.engine(cancel_grace=0.2)
    engine.start()
    run = harness.runtime.wait_run()
    act(engine, run)

    def terminal() -> list[Any]:
        return [
            e.event
            for e in Journal(engine.config.journal_path).entries()
            if is_agent_terminal(e.event) and e.event.session_id == run.session_id
        ]

    def ended() -> bool:
        state = engine.get_state().agent_runs.get(run.session_id)
        return state is not None and state.is_terminal

    wait_until(ended, engine)
    assert [e.type for e in terminal()] == [outcome]
    sup = engine.supervisor
    assert sup is not None
    assert sup.restart_count == 0
    assert [sup.generation(c) for c in ("event_queue", "executor", "engine")] == [1, 1, 1]


# ---------------------------------------------------------------------------- agent sessions


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


def test_the_terminal_event_is_queued_before_the_stop_may_stop_waiting_for_the_run(
    tmp_path: Path,
) -> None:
    """What a stop's drain relies on: when the terminal event reaches the queue, the session
    manager still counts the run as ending (wait_all_ended is not yet true), and it does once
    the event is in."""
    runtime = FakeRuntime()
    rig = Rig(tmp_path, runtime)
    run = runtime.wait_run()
    ending_when_queued: list[bool] = []

    def queued() -> None:
        if rig.terminal():
            ending_when_queued.append(not rig.sessions.wait_all_ended(0))
        rig._queued()

    rig.inbox.wake = queued
    try:
        run.complete()
        rig.ended()
        assert ending_when_queued[:1] == [True]
        assert rig.sessions.wait_all_ended(30)
    finally:
        rig.close()

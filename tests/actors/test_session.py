"""An agent session on its own: whatever the runtime does, exactly one terminal event."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import pytest

from actors.journal import Journal
from actors.queue import Inbox
from actors.session import AgentSession, Cancel
from actors.sessions import SessionManager
from actors.streams import OutputBuffer, StreamRegistry
from domain.errors import AgentFailure
from domain.events import AgentFailed, AgentStarted, ImplementorCompleted, is_agent_terminal
from domain.models import ImplementorStartParams, SessionId
from tests.fakes.runtime import FakeRuntime, Script

SID = SessionId("implementor-1")
PARAMS = ImplementorStartParams(session_id=SID, work_item_id="1", branch_name="cpe/1-x")


class Rig:
    def __init__(self, tmp_path: Path, runtime: FakeRuntime, **kw: Any):
        self.journal = Journal(tmp_path / "j.sqlite3")
        self.inbox = Inbox(self.journal)
        self.sessions = SessionManager()
        self.streams = StreamRegistry()
        self.runtime = runtime
        self.crashes: list[BaseException] = []
        self.sessions.add(SID, PARAMS)
        self.ref = AgentSession.start(
            session_id=SID,
            params=PARAMS,
            adapter=runtime,
            max_duration=kw.get("max_duration", 60),
            cancel_grace=kw.get("cancel_grace", 5),
            inbox=self.inbox,
            sessions=self.sessions,
            streams=self.streams,
            child_id=f"session:{SID}",
            report=lambda c, g, e: self.crashes.append(e),
        )

    def ended(self) -> list[Any]:
        assert self.sessions.wait_all_ended(30), "the session did not end"
        return [e.event for e in self.journal.entries() if is_agent_terminal(e.event)]

    def close(self) -> None:
        self.runtime.release_start.set()
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


def test_garbage_from_the_runtime_is_a_failure(rig_for: Any) -> None:
    runtime = FakeRuntime()
    rig = rig_for(runtime)
    runtime.wait_run().complete({"outcome": "completed"})
    [event] = rig.ended()
    assert isinstance(event, AgentFailed)
    assert "expected a implementor result" in event.reason


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
    assert run.cancelled.is_set()


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

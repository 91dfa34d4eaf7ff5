"""``Engine.get_agent_stream`` from asyncio, on a real engine with the fakes: the output so far,
then live chunks, each subscriber at its own pace, ending with the run. Then the parts alone
(``OutputBuffer``, ``AgentStream``, ``StreamRegistry``): each rule on its own, fast."""

from __future__ import annotations

import asyncio
import json
import threading

import pytest
from structlog.testing import capture_logs

from actors.logs import configure_logging
from actors.streams import AgentStream, OutputBuffer, StreamRegistry
from domain.events import is_agent_terminal
from domain.models import SessionId
from tests.actors.conftest import Harness, wait_until
from tests.actors.test_logs import Lines, _quiet


@pytest.mark.spec("S002-12")
@pytest.mark.spec("S002-13")
def test_get_agent_stream_is_usable_from_asyncio(harness: Harness) -> None:
    harness.tracker.add_item("1")
    engine = harness.engine()
    engine.start()
    run = harness.runtime.wait_run()
    wait_until(lambda: engine.get_agent_stream(run.session_id) is not None, engine)
    run.say("before ")
    # a thread-side subscriber sees it first: from then on it is output "so far"
    assert next(iter(engine.get_agent_stream(run.session_id))) == "before "

    async def main() -> list[list[str]]:
        streams = [engine.get_agent_stream(run.session_id) for _ in range(2)]
        read_past = [asyncio.Event() for _ in streams]

        async def read(index: int) -> list[str]:
            stream = streams[index]
            assert stream is not None
            chunks: list[str] = []
            async for chunk in stream:
                chunks.append(chunk)
                read_past[index].set()
            return chunks

        readers = [asyncio.create_task(read(i)) for i in range(len(streams))]
        for event in read_past:
            await asyncio.wait_for(event.wait(), 30)
        # both readers now wait on the event loop for what comes live
        run.say("live ")
        run.say("end")
        run.complete()
        return await asyncio.wait_for(asyncio.gather(*readers), 30)

    assert asyncio.run(main()) == [["before ", "live ", "end"]] * 2
    wait_until(lambda: engine.get_agent_stream(run.session_id) is None, engine)


def test_a_subscriber_whose_event_loop_closed_cannot_break_the_run(harness: Harness) -> None:
    """A UI that closes its event loop while a read is pending: the next chunk cannot wake it.
    The subscriber is dropped; the others still get the output, and the run's terminal event
    reaches the queue exactly once."""
    harness.tracker.add_item("1")
    engine = harness.engine()
    engine.start()
    run = harness.runtime.wait_run()
    wait_until(lambda: engine.get_agent_stream(run.session_id) is not None, engine)
    abandoned = engine.get_agent_stream(run.session_id)
    kept = engine.get_agent_stream(run.session_id)
    assert abandoned is not None
    assert kept is not None

    async def read_one() -> str:
        return await abandoned.__anext__()

    loop = asyncio.new_event_loop()
    pending = loop.create_task(read_one())
    buffer = abandoned._buffer
    for _ in range(100):  # run the loop until the read waits for output
        if buffer._wakers:
            break
        loop.run_until_complete(asyncio.sleep(0))
    assert buffer._wakers, "the asyncio read never started waiting"
    loop.close()  # with the read pending

    run.say("still ")
    run.say("here")
    run.complete()
    assert list(kept) == ["still ", "here"]
    wait_until(lambda: engine.get_state().agent_runs[run.session_id].status == "completed", engine)
    assert engine.inbox.wait_idle(30)
    ended = [e for e in engine.journal.entries() if is_agent_terminal(e.event)]
    assert [e.event.type for e in ended] == ["ImplementorCompleted"]
    assert not pending.done()  # it was never woken: its loop is gone


# ---------------------------------------------------------------------------- the parts alone


def test_a_thread_subscriber_gets_the_output_so_far_then_live_chunks_until_the_end() -> None:
    buffer = OutputBuffer()
    buffer.append("one ")
    early = buffer.subscribe()
    assert next(early) == "one "
    buffer.append("two ")
    late = buffer.subscribe()  # its own position: from the start
    buffer.close()
    buffer.append("after the end")  # dropped: the run is over
    assert list(early) == ["two "]
    assert list(late) == ["one ", "two "]
    assert buffer.text() == "one two "
    assert buffer.closed


def test_a_thread_subscriber_waits_for_the_next_chunk() -> None:
    buffer = OutputBuffer()
    stream = buffer.subscribe()
    read: list[str] = []
    reader = threading.Thread(target=lambda: read.extend(stream))
    reader.start()
    buffer.append("live")
    buffer.close()
    reader.join(10)
    assert read == ["live"]


async def _until_waiting(buffer: OutputBuffer) -> None:
    """Run the loop until a pending read waits to be woken."""
    for _ in range(1000):
        if buffer._wakers:
            return
        await asyncio.sleep(0)
    raise AssertionError("the read never waited")


def test_an_asyncio_subscriber_is_woken_by_a_chunk_from_another_thread() -> None:
    buffer = OutputBuffer()
    buffer.append("before ")
    stream = buffer.subscribe()

    async def main() -> list[str]:
        assert await anext(stream) == "before "
        pending = asyncio.ensure_future(anext(stream))
        await _until_waiting(buffer)
        threading.Thread(target=buffer.append, args=("live",)).start()
        chunks = [await asyncio.wait_for(pending, 10)]
        pending = asyncio.ensure_future(anext(stream))
        await _until_waiting(buffer)
        threading.Thread(target=buffer.close).start()
        with pytest.raises(StopAsyncIteration):
            await asyncio.wait_for(pending, 10)
        return chunks

    assert asyncio.run(main()) == ["live"]
    assert asyncio.run(_gather(buffer.subscribe())) == ["before ", "live"]


async def _gather(stream: AgentStream) -> list[str]:
    return [chunk async for chunk in stream]


def test_an_asyncio_subscriber_that_stopped_reading_leaves_nothing_behind() -> None:
    """Its loop is closed once it has read what it wanted: the run's later output must not try
    to wake it (that would log a dropped subscriber for every chunk)."""
    buffer = OutputBuffer()
    stream = buffer.subscribe()

    async def first_chunk() -> str:
        pending = asyncio.ensure_future(anext(stream))
        await _until_waiting(buffer)
        threading.Thread(target=buffer.append, args=("first",)).start()
        return await asyncio.wait_for(pending, 10)

    assert asyncio.run(first_chunk()) == "first"
    with capture_logs() as logged:
        buffer.append("second")
        buffer.close()
    assert logged == []
    assert list(buffer.subscribe()) == ["first", "second"]


def test_a_subscriber_that_cannot_be_woken_is_dropped_once_with_a_warning() -> None:
    buffer = OutputBuffer()
    abandoned = buffer.subscribe()
    loop = asyncio.new_event_loop()
    pending = loop.create_task(anext(abandoned))
    loop.run_until_complete(_until_waiting(buffer))
    loop.close()  # with the read pending
    out = Lines()
    configure_logging("info", "json", out)
    try:
        buffer.append("one")
        buffer.append("two")
        buffer.close()
    finally:
        _quiet()
    [line] = out.lines()
    assert (line["event"], line["level"], line["logger"]) == (
        "dropping an output subscriber that cannot be woken",
        "warning",
        "cpe.streams",
    )
    assert "Event loop is closed" in json.dumps(line["exception"])
    assert list(buffer.subscribe()) == ["one", "two"]
    assert not pending.done()  # never woken: its loop is gone


def test_the_registry_holds_a_run_from_its_start_to_its_end() -> None:
    registry = StreamRegistry()
    sid, other = SessionId("implementor-1"), SessionId("implementor-2")
    assert sid not in registry
    assert registry.subscribe(sid) is None
    buffer = registry.open(sid)
    registry.open(other)
    assert sid in registry
    assert registry.buffer(sid) is buffer
    stream = registry.subscribe(sid)
    assert stream is not None
    buffer.append("out")
    registry.close(sid)
    registry.close(SessionId("never-started"))  # harmless
    assert sid not in registry
    assert registry.buffer(sid) is None
    assert registry.subscribe(sid) is None
    assert list(stream) == ["out"]  # ended with the run
    assert other in registry
    assert not registry.buffer(other).closed  # type: ignore[union-attr]


def test_wait_subscribe_waits_for_the_run_to_start_and_not_longer() -> None:
    registry = StreamRegistry()
    sid = SessionId("planner-1")
    got: list[AgentStream | None] = []
    waiter = threading.Thread(target=lambda: got.append(registry.wait_subscribe(sid, 30)))
    waiter.start()
    registry.open(sid).append("hello")
    waiter.join(10)
    [stream] = got
    assert stream is not None
    assert next(stream) == "hello"

    never: list[AgentStream | None] = []
    waiter = threading.Thread(
        target=lambda: never.append(registry.wait_subscribe(SessionId("x"), 0.01)), daemon=True
    )
    waiter.start()
    waiter.join(10)
    assert never == [None]

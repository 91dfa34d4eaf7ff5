"""``Engine.get_agent_stream`` from asyncio, on a real engine with the fakes: the output so far,
then live chunks, each subscriber at its own pace, ending with the run."""

from __future__ import annotations

import asyncio

import pytest

from domain.events import is_agent_terminal
from tests.actors.conftest import Harness, wait_until


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

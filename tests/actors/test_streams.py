"""``Engine.get_agent_stream`` from asyncio, on a real engine with the fakes: the output so far,
then live chunks, each subscriber at its own pace, ending with the run."""

from __future__ import annotations

import asyncio

import pytest

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

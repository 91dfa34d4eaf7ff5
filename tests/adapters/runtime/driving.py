"""Driving a ``RuntimeAdapter`` the way a session actor does, for the runtime tests."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import anyio

from domain.errors import AgentFailure
from domain.models import AgentStartParams, EngineState, RunUsage, Status
from domain.ports import RuntimeAdapterDeps
from tests.fakes.provider import fake_provider


def drive(
    runtime: Any, params: AgentStartParams, *, cancel_when: Callable[[], object] | None = None
) -> tuple[list[str], Any]:
    """Start a run, read its whole output, await its result: ``(chunks, result or failure)``.
    ``cancel_when`` (blocking, in a thread) returns when the run should be cancelled."""

    async def main() -> tuple[list[str], Any]:
        handle = await runtime.start_agent(params)
        if cancel_when is not None:
            await anyio.to_thread.run_sync(cancel_when)
            runtime.cancel_agent(params.session_id)
        chunks = [chunk async for chunk in handle.output]
        try:
            return chunks, await handle.result
        except AgentFailure as failure:
            return chunks, failure

    return anyio.run(main)


def drive_with_usage(runtime: Any, params: AgentStartParams) -> tuple[Any, RunUsage]:
    """Start a run, read its whole output, await its result: ``(result or failure, usage)``,
    the usage as the runtime reported it once the run ended."""

    async def main() -> tuple[Any, RunUsage]:
        handle = await runtime.start_agent(params)
        _ = [chunk async for chunk in handle.output]
        try:
            return await handle.result, handle.usage()
        except AgentFailure as failure:
            return failure, handle.usage()

    return anyio.run(main)


def provider_deps(*items: tuple[str, Status, str, str]) -> RuntimeAdapterDeps:
    """Runtime deps over the in-memory provider holding ``items`` (id, status, title, body)."""
    tracker, provider = fake_provider()
    for item_id, status, title, body in items:
        tracker.add_item(item_id, status, title=title, body=body)
    state = EngineState.model_validate({"work_items": dict(tracker.work_items)})
    return RuntimeAdapterDeps(
        work_item_reader=provider.work_item_reader,
        revision_reader=provider.revision_reader,
        get_state=lambda: state,
        get_review_history=provider.revision_reader.get_review_history,
    )


def drive_at_once(runtime: Any, params: Sequence[AgentStartParams], *, timeout: float) -> list[Any]:
    """Start every run of ``params`` at the same moment, each in a thread and an event loop of
    its own as a session actor has, and return each run's result or failure, in order. Fails
    when they have not all ended within ``timeout`` seconds."""
    results: list[Any] = [None] * len(params)
    ended = [threading.Event() for _ in params]
    gate = threading.Barrier(len(params), timeout=timeout)

    def one(index: int) -> None:
        async def main() -> Any:
            gate.wait()  # every thread's loop is up: the starts race each other
            handle = await runtime.start_agent(params[index])
            async for _ in handle.output:
                pass
            try:
                return await handle.result
            except AgentFailure as failure:
                return failure

        try:
            results[index] = anyio.run(main)
        except BaseException as exc:  # the caller reports it, with the run it belongs to
            results[index] = exc
        finally:
            ended[index].set()

    for index in range(len(params)):
        threading.Thread(target=one, args=(index,), daemon=True).start()
    deadline = time.monotonic() + timeout
    for index, event in enumerate(ended):
        if not event.wait(max(0.0, deadline - time.monotonic())):
            raise AssertionError(f"run {params[index].session_id} still going after {timeout}s")
    return results

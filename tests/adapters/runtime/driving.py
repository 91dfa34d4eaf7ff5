"""Driving a ``RuntimeAdapter`` the way a session actor does, for the runtime tests."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import anyio

from domain.errors import AgentFailure
from domain.models import AgentStartParams, EngineState, Status
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

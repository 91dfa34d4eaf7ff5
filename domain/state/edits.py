"""Copy-on-write edits of the engine state that every part of the reducer uses: a changed
field, a map with one key set or dropped, a run or an item updated, an attempt counted."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from domain.models import AgentRole, AgentRun, EngineState, RevisionId, SessionId, WorkItemId

K = TypeVar("K")
V = TypeVar("V")


def replace(state: EngineState, **changes: object) -> EngineState:
    return state.model_copy(update=changes)


def with_key(mapping: Mapping[K, V], key: K, value: V) -> dict[K, V]:
    return {**mapping, key: value}


def without_key(mapping: Mapping[K, V], key: K) -> Mapping[K, V]:
    if key not in mapping:
        return mapping
    return {k: v for k, v in mapping.items() if k != key}


def update_revision(
    state: EngineState, rid: RevisionId, changes: Mapping[str, object]
) -> EngineState:
    known = state.revisions.get(rid)
    if known is None:
        return state
    updated = known.model_copy(update=dict(changes))
    return replace(state, revisions=with_key(state.revisions, rid, updated))


def update_work_item(state: EngineState, wid: WorkItemId, **changes: object) -> EngineState:
    known = state.work_items.get(wid)
    if known is None:
        return state
    updated = known.model_copy(update=changes)
    return replace(state, work_items=with_key(state.work_items, wid, updated))


def settle_run(state: EngineState, sid: SessionId | None) -> EngineState:
    run = state.agent_runs.get(sid) if sid is not None else None
    if run is None or run.settled:
        return state
    return put_run(state, run, {"settled": True})


def count_attempt(state: EngineState, role: AgentRole, run: AgentRun) -> EngineState:
    wid = run.work_item_id
    if role != "implementor" or wid is None:
        return state
    return replace(state, attempts=with_key(state.attempts, wid, state.attempts.get(wid, 0) + 1))


def reset_attempts(state: EngineState, wid: WorkItemId) -> EngineState:
    if not state.attempts.get(wid):
        return state
    return replace(state, attempts=with_key(state.attempts, wid, 0))


def put_run(state: EngineState, run: AgentRun, changes: Mapping[str, Any]) -> EngineState:
    updated = run.model_copy(update=dict(changes))
    return replace(state, agent_runs=with_key(state.agent_runs, run.session_id, updated))

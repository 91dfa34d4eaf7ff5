"""Handler 7: recovery and failures. An item in progress with nothing in flight moves on; a
run that no longer serves its item is cancelled; a person's cancel and status change are
carried out; during a model outage the runs retrying it free their slots."""

from __future__ import annotations

from domain.commands import (
    CancelAgent,
    CreateRevision,
    EngineCommand,
    TransitionStatus,
    UpdateRevision,
)
from domain.decisions import outage_cancels
from domain.events import (
    AgentFailed,
    AgentSignalled,
    CommandFailed,
    EngineEvent,
    RevisionChanged,
    RevisionRemoved,
    StatusTransitioned,
    UserCancelledRun,
    UserTransitionedStatus,
    WorkItemChanged,
    WorkItemRemoved,
)
from domain.handlers.options import HandlerOptions
from domain.models import EngineState, ReviewerStartParams, item_ref
from domain.run_end import settle, why_cancel
from domain.workflow import transition


def recovery(event: EngineEvent, state: EngineState, o: HandlerOptions) -> list[EngineCommand]:
    if isinstance(event, AgentSignalled):
        # The model API down for long enough: the runs retrying it free their slots.
        return outage_cancels(state, after=o.outage_after) if o.cancel_retrying else []
    cancels = _reconcile(event, state)
    if isinstance(event, WorkItemChanged):
        item = state.work_items.get(event.work_item.id)
        return cancels + (settle(state, item, o.max_attempts) if item else [])
    return cancels + _recover(event, state, o)


def _reconcile(event: EngineEvent, state: EngineState) -> list[EngineCommand]:
    """A change seen on the tracker that a running agent no longer serves cancels the run at
    once (no attempt is spent; its ending cleans up): ``why_cancel``."""
    if isinstance(event, WorkItemChanged | WorkItemRemoved):
        wid = event.work_item.id if isinstance(event, WorkItemChanged) else event.work_item_id
        runs = [run for run in state.agent_runs.values() if run.work_item_id == wid]
    elif isinstance(event, RevisionChanged | RevisionRemoved):
        rid = event.revision.id if isinstance(event, RevisionChanged) else event.revision_id
        runs = [
            run
            for run in state.agent_runs.values()
            if isinstance(run.params, ReviewerStartParams) and run.params.revision_id == rid
        ]
    else:
        return []
    commands: list[EngineCommand] = []
    for run in runs:
        why = why_cancel(state, run)
        if why is not None:
            who = item_ref(run.work_item_id) if run.work_item_id else "the planner"
            reason = f"{who}: run cancelled: {why}"
            commands.append(CancelAgent(session_id=run.session_id, reason=reason))
    return commands


def _recover(event: EngineEvent, state: EngineState, o: HandlerOptions) -> list[EngineCommand]:
    if isinstance(event, StatusTransitioned) and event.to == "in-progress":
        # The run may have ended before its in-progress transition was processed (a start
        # that failed at once, a cancel at shutdown): then nothing else would move the item.
        item = state.work_items.get(event.work_item_id)
        return settle(state, item, o.max_attempts) if item else []
    if isinstance(event, AgentFailed) and event.role == "implementor":
        run = state.agent_runs.get(event.session_id)
        item = state.work_items.get(run.work_item_id) if run and run.work_item_id else None
        return settle(state, item, o.max_attempts) if item else []
    if isinstance(event, AgentFailed) and event.role == "reviewer" and event.kind == "cancelled":
        # A person cancelled the review: the item waits for them (else it is reviewed again).
        run = state.agent_runs.get(event.session_id)
        item = state.work_items.get(run.work_item_id) if run and run.work_item_id else None
        return transition(item, "user-cancelled") if item and run and run.cancel_requested else []
    if isinstance(event, CommandFailed) and isinstance(
        event.command, CreateRevision | UpdateRevision
    ):
        item = state.work_items.get(event.command.work_item_id)
        return settle(state, item, o.max_attempts) if item else []
    if isinstance(event, UserCancelledRun):
        run = state.agent_runs.get(event.session_id)
        if run is None or not run.is_active:
            return []
        return [CancelAgent(session_id=event.session_id, reason="cancelled by a person")]
    if isinstance(event, UserTransitionedStatus):
        item = state.work_items.get(event.work_item_id)
        if item is None or item.status == event.to:
            return []
        return [TransitionStatus(work_item_id=item.id, to=event.to)]
    return []

"""Handlers 3 and 4: dispatch (implementor runs for the eligible items, and a person's
request; the request itself moves the item to ``in-progress``) and implementor done (a patch
becomes a revision written; anything else moves the item on)."""

from __future__ import annotations

from collections.abc import Iterable

from domain.commands import ApplyPlan, CreateRevision, EngineCommand, StartAgent, UpdateRevision
from domain.dispatch import dispatch_items, free_slots, start_implementor
from domain.events import (
    WAKE_EVENTS,
    AgentRequested,
    CommandFailed,
    CommandRejected,
    EngineEvent,
    ImplementorCompleted,
    PlanApplied,
    StatusTransitioned,
    UserRequestedImplementorRun,
    WorkItemChanged,
    is_agent_terminal,
)
from domain.handlers.options import HandlerOptions
from domain.models import EngineState, ImplementorStartParams, WorkItem
from domain.run_end import settle
from domain.selectors import dependents_of, has_run_in_flight, natural_key, revision_for
from domain.workflow import transition


def dispatch(event: EngineEvent, state: EngineState, o: HandlerOptions) -> list[EngineCommand]:
    if isinstance(event, AgentRequested):
        if isinstance(event.params, ImplementorStartParams):
            item = state.work_items.get(event.params.work_item_id)
            return transition(item, "implementor-requested") if item else []
        return []
    if isinstance(event, UserRequestedImplementorRun):
        return _user_dispatch(state, event, o)
    candidates: Iterable[WorkItem]
    if isinstance(event, WorkItemChanged):
        candidates = _with_dependents(state, state.work_items.get(event.work_item.id))
    elif isinstance(event, StatusTransitioned):
        candidates = _with_dependents(state, state.work_items.get(event.work_item_id))
    elif is_agent_terminal(event) or isinstance(event, WAKE_EVENTS) or _plan_ended(event):
        # A slot is free, or a plan's items no longer wait for it: anyone who waited, the runs
        # people asked for first.
        asked = _asked(state, o)
        if asked:
            limit = o.max_concurrent.get("implementor", 1) - len(asked)
            started = {getattr(start.params, "work_item_id", None) for start in asked}
            rest = [item for item in state.work_items.values() if item.id not in started]
            return asked + dispatch_items(
                state,
                rest,
                max_attempts=o.max_attempts,
                max_concurrent={**o.max_concurrent, "implementor": limit},
                branch_prefix=o.branch_prefix,
                item_budget=o.item_budget_usd,
                block_on_budget=o.block_on_item_budget,
            )
        candidates = state.work_items.values()
    else:
        return []
    return dispatch_items(
        state,
        candidates,
        max_attempts=o.max_attempts,
        max_concurrent=o.max_concurrent,
        branch_prefix=o.branch_prefix,
        item_budget=o.item_budget_usd,
        block_on_budget=o.block_on_item_budget,
    )


def _asked(state: EngineState, o: HandlerOptions) -> list[StartAgent]:
    """The runs people asked for that a guard refused as they were to start (``asked``): the
    first free slots are theirs, as their requests were (blockers and attempts aside)."""
    slots = free_slots(state, "implementor", o.max_concurrent)
    starts: list[StartAgent] = []
    for wid in sorted(state.asked, key=natural_key):
        if len(starts) >= slots:
            break
        made = _user_dispatch(state, UserRequestedImplementorRun(work_item_id=wid), o)
        starts += [start for start in made if isinstance(start, StartAgent)]
    return starts


def _plan_ended(event: EngineEvent) -> bool:
    """A plan was applied, or its writing failed: what it held back may start."""
    if isinstance(event, PlanApplied):
        return True
    return isinstance(event, (CommandFailed, CommandRejected)) and isinstance(
        event.command, ApplyPlan
    )


def _with_dependents(state: EngineState, item: WorkItem | None) -> list[WorkItem]:
    if item is None:
        return []
    if item.status == "done":
        return dependents_of(state, item.id)
    return [item]


def _user_dispatch(
    state: EngineState, event: UserRequestedImplementorRun, o: HandlerOptions
) -> list[EngineCommand]:
    """A person asked for a run: blockers and attempts do not stop it; the guards still do."""
    item = state.work_items.get(event.work_item_id)
    if item is None or item.status not in ("pending", "needs-refinement", "blocked"):
        return []
    if has_run_in_flight(state, item.id):
        return []
    start = start_implementor(item, o.branch_prefix)
    return [start.model_copy(update={"requested_by_user": True})]


def implementor_done(
    event: EngineEvent, state: EngineState, o: HandlerOptions
) -> list[EngineCommand]:
    if not isinstance(event, ImplementorCompleted):
        return []
    run = state.agent_runs.get(event.session_id)
    if run is None or not isinstance(run.params, ImplementorStartParams):
        return []
    item = state.work_items.get(run.params.work_item_id)
    if item is None:
        return []  # the item is gone; the patch stays in the journal
    result = event.result
    if result.outcome == "completed" and result.patch and not run.settled:
        revision = revision_for(state, item)
        if revision is not None and revision.state == "open":
            return [
                UpdateRevision(
                    session_id=run.session_id,
                    work_item_id=item.id,
                    revision_id=revision.id,
                    patch=result.patch,
                    base_sha=result.base_sha,
                )
            ]
        return [
            CreateRevision(
                session_id=run.session_id,
                work_item_id=item.id,
                branch_name=run.params.branch_name,
                title=item.title,
                body=f"{result.summary}\n\nWork item: #{item.id}\nAgent session: {run.session_id}",
                patch=result.patch,
                base_sha=result.base_sha,
            )
        ]
    return settle(state, item, o.max_attempts)

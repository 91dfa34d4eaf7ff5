"""Where an item goes when its run ends, and why in words; when an active run no longer
serves anything.

Each is a pure function of the state *after* the event was applied, so the handler that reacts
to a run's end and the recovery that finds the same item later reach the same answer.
"""

from __future__ import annotations

from domain.commands import EngineCommand
from domain.models import (
    AgentRun,
    EngineState,
    ReviewerStartParams,
    Status,
    WorkItem,
    WorkItemId,
    item_ref,
)
from domain.selectors import has_run_in_flight, latest_implementor_run
from domain.workflow import Trigger, transition


def exhausted(state: EngineState, item_id: WorkItemId, max_attempts: int) -> bool:
    return state.attempts.get(item_id, 0) >= max_attempts


def run_end_trigger(state: EngineState, item: WorkItem, max_attempts: int) -> Trigger | None:
    """Why an item with no run in flight leaves ``in-progress``, judged by its latest run."""
    if has_run_in_flight(state, item.id):
        return None
    run = latest_implementor_run(state, item.id)
    if run is None:
        return "run-interrupted"
    failed: Trigger = (
        "attempts-exhausted" if exhausted(state, item.id, max_attempts) else "run-failed"
    )
    if run.status == "cancelled":
        if run.cancel_requested:
            return "user-cancelled"
        return "blocker-added" if gained_blockers(state, item, run) else "run-interrupted"
    if run.status == "failed" and run.failure_class == "infrastructure":
        return "infrastructure-failed"
    if run.status in ("failed", "timed-out"):
        return failed
    if run.status == "completed":
        if run.outcome == "blocked":
            return "outcome-blocked"
        if run.delivered_revision is not None:
            return "revision-delivered"
        if run.conflicted:
            return "patch-conflict"  # its patch no longer applies: sent back (LandingRefused)
        return failed  # validation-failure, no patch, or the revision write failed
    return "run-interrupted"  # requested or running but not in flight cannot happen; be safe


# Statuses an item cannot have while an implementor runs for it, unless a person set them.
_NOT_WHILE_IMPLEMENTING: frozenset[Status] = frozenset({"blocked", "done", "in-review", "approved"})


def gained_blockers(state: EngineState, item: WorkItem, run: AgentRun) -> list[WorkItemId]:
    """Blockers of ``item`` that are open and that it did not have when ``run`` was requested."""
    return [
        b
        for b in item.blocked_by
        if b not in run.blocked_by_at_start
        and (state.work_items.get(b) is None or state.work_items[b].status != "done")
    ]


def why_cancel(state: EngineState, run: AgentRun) -> str | None:
    """Why an active run no longer serves anything, in words (None when it still does): its
    item was deleted, set by a person to a status the run cannot produce, or gained an open
    blocker; a reviewer's revision was closed, merged or deleted by hand."""
    wid = run.work_item_id
    if wid is None or not run.is_active or run.cancel_requested:
        return None
    item = state.work_items.get(wid)
    if item is None:
        return "the work item was deleted"
    if isinstance(run.params, ReviewerStartParams):
        revision = state.revisions.get(run.params.revision_id)
        if revision is None:
            return f"revision {run.params.revision_id} was deleted"
        if revision.state != "open":
            return f"revision {revision.id} was {revision.state} by hand"
        if item.status in ("blocked", "done"):
            return f"set to {item.status} by a person"
        return None
    if item.status in _NOT_WHILE_IMPLEMENTING:
        return f"set to {item.status} by a person"
    gained = gained_blockers(state, item, run)
    if gained:
        return "it gained an open blocker: " + ", ".join(f"{item_ref(b)}" for b in gained)
    return None


def explain_transition(state: EngineState, work_item_id: WorkItemId, to: Status) -> str:
    """Why the engine moves an item to ``to``, in words for the log: ``#2 in-progress →
    blocked: attempts exhausted (3 runs); last failure: authentication refused``. An item
    that has ``to`` already is no change: ``#2 already in-progress``."""
    item = state.work_items.get(work_item_id)
    if item is not None and item.status == to:
        return f"{item_ref(work_item_id)} already {to}"
    source = item.status if item is not None else "unknown"
    head = f"{item_ref(work_item_id)} {source} → {to}"
    run = latest_implementor_run(state, work_item_id)
    if source != "in-progress" or run is None or run.in_flight or to == "in-review":
        return head
    attempts = state.attempts.get(work_item_id, 0)
    last = run.failure_reason or (f"outcome {run.outcome}" if run.outcome else run.status)
    if to == "blocked" and run.outcome == "blocked":
        why = "the implementor reported it cannot proceed"
    elif to == "blocked" and run.status == "cancelled":
        why = "its run was cancelled"
    elif to == "blocked":
        why = f"attempts exhausted ({attempts} runs)"
    elif run.status == "cancelled":
        why = "its run was interrupted; it will be run again"
    else:
        why = f"attempt {attempts} failed; it will be run again"
    return f"{head}: {why}; last run: {' '.join(last.split())[:300]}"


def settle(state: EngineState, item: WorkItem, max_attempts: int) -> list[EngineCommand]:
    """Move an ``in-progress`` item on once nothing is in flight for it."""
    if item.status != "in-progress":
        return []
    trigger = run_end_trigger(state, item, max_attempts)
    return transition(item, trigger) if trigger else []

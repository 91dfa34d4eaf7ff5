"""The selectors every handler shares: pure reads of an ``EngineState`` (the runs of an item,
what is in flight, the item's current revision, blockers, specs to plan, id order).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import UTC, datetime

from domain.models import (
    AgentRole,
    AgentRun,
    EngineState,
    ImplementorStartParams,
    ReviewerStartParams,
    Revision,
    RevisionId,
    WorkItem,
    WorkItemId,
)


def runs_for_work_item(state: EngineState, work_item_id: WorkItemId) -> list[AgentRun]:
    """The work item's implementor and reviewer runs, oldest first."""
    return [run for run in state.agent_runs.values() if run.work_item_id == work_item_id]


def latest_implementor_run(state: EngineState, work_item_id: WorkItemId) -> AgentRun | None:
    latest = None
    for run in state.agent_runs.values():
        if isinstance(run.params, ImplementorStartParams) and run.work_item_id == work_item_id:
            latest = run
    return latest


def latest_implementor_runs(state: EngineState) -> dict[WorkItemId, AgentRun]:
    """``latest_implementor_run`` of every item that has one, in one pass over the runs."""
    latest: dict[WorkItemId, AgentRun] = {}
    for run in state.agent_runs.values():
        if isinstance(run.params, ImplementorStartParams):
            latest[run.params.work_item_id] = run
    return latest


def plan_being_applied(state: EngineState) -> bool:
    """A planner's result is being written to the tracker (its run completed, its plan not yet
    applied): the items it makes may be listed before their blockers are (a tracker writes an
    issue and its links apart, and a link may wait out a rate limit)."""
    return any(
        run.role == "planner" and run.status == "completed" and not run.settled
        for run in state.agent_runs.values()
    )


def has_run_in_flight(state: EngineState, work_item_id: WorkItemId) -> bool:
    """Some run for the item is active, or completed with its result not yet written."""
    return any(run.in_flight for run in runs_for_work_item(state, work_item_id))


def active_runs(state: EngineState, role: AgentRole | None = None) -> list[AgentRun]:
    return [
        run
        for run in state.agent_runs.values()
        if run.is_active and (role is None or run.role == role)
    ]


def planner_failures(state: EngineState, path: str, blob_sha: str) -> int:
    """Planner runs that failed or timed out on this version of the spec (a cancelled run, e.g.
    at shutdown, does not count: recovery plans again)."""
    return sum(
        1
        for run in state.agent_runs.values()
        if run.role == "planner"
        and run.status in ("failed", "timed-out")
        and run.failure_class != "infrastructure"
        and run.spec_shas.get(path) == blob_sha
    )


def spent_on_spec(state: EngineState, path: str, blob_sha: str) -> float:
    """What the planner runs on this version of the spec cost, in USD (a run that planned
    several specs counts in full for each: it cannot be split)."""
    return sum(
        run.cost_usd or 0.0
        for run in state.agent_runs.values()
        if run.role == "planner" and run.spec_shas.get(path) == blob_sha
    )


def planner_in_flight(state: EngineState) -> bool:
    return any(run.in_flight for run in state.agent_runs.values() if run.role == "planner")


def reviewer_in_flight(state: EngineState, revision_id: RevisionId) -> bool:
    return any(
        run.in_flight
        for run in state.agent_runs.values()
        if isinstance(run.params, ReviewerStartParams) and run.params.revision_id == revision_id
    )


def reviewer_failures(state: EngineState, revision_id: RevisionId, head_sha: str) -> int:
    """Reviewer runs of this head that failed or timed out (not cancelled)."""
    return sum(
        1
        for run in state.agent_runs.values()
        if isinstance(run.params, ReviewerStartParams)
        and run.params.revision_id == revision_id
        and run.subject_sha == head_sha
        and run.status in ("failed", "timed-out")
        and run.failure_class != "infrastructure"
    )


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def approved_head(state: EngineState, revision: Revision) -> bool:
    """Whether the review posted for the revision's current head approved it (the verdict is
    its reviewer run's outcome)."""
    runs = [
        run
        for run in state.agent_runs.values()
        if isinstance(run.params, ReviewerStartParams)
        and run.params.revision_id == revision.id
        and run.subject_sha == revision.head_sha
        and run.settled
        and run.outcome in ("approve", "needs-changes")
    ]
    latest = max(runs, key=lambda run: run.ended_at or run.requested_at or _EPOCH, default=None)
    return latest is not None and latest.outcome == "approve"


def revision_for(state: EngineState, item: WorkItem) -> Revision | None:
    """The item's current revision: the linked one, else its newest open revision."""
    if item.linked_revision is not None and item.linked_revision in state.revisions:
        return state.revisions[item.linked_revision]
    candidates = [
        r for r in state.revisions.values() if r.work_item_id == item.id and r.state == "open"
    ]
    return candidates[-1] if candidates else None


def open_blockers(item: WorkItem, items: Mapping[WorkItemId, WorkItem]) -> list[WorkItemId]:
    """The ``blocked_by`` items of ``item`` that are not done; an unknown blocker is open."""
    return [b for b in item.blocked_by if b not in items or items[b].status != "done"]


def blockers_resolved(state: EngineState, item: WorkItem) -> bool:
    """Every ``blocked_by`` item, and every blocker a plan gave it that no poll has shown yet
    (``planned_blockers``), is known and done. An unknown blocker is not resolved."""
    planned = state.planned_blockers.get(item.id, ())
    if any(b not in state.work_items or state.work_items[b].status != "done" for b in planned):
        return False
    return not open_blockers(item, state.work_items)


def dependents_of(state: EngineState, work_item_id: WorkItemId) -> list[WorkItem]:
    return [
        item
        for item in state.work_items.values()
        if work_item_id in item.blocked_by
        or work_item_id in state.planned_blockers.get(item.id, ())
    ]


def specs_to_plan(state: EngineState) -> dict[str, str]:
    """Specs whose blob differs from the one last planned (path → blob sha), sorted by path;
    a spec with a problem is not planned (its other specs are)."""
    return {
        path: spec.blob_sha
        for path, spec in sorted(state.specs.items())
        if state.last_planned_shas.get(path) != spec.blob_sha and spec.problem is None
    }


def review_is_current(state: EngineState, run: AgentRun) -> bool:
    """A reviewer run reviewed the head its revision still has, and the revision is open."""
    if not isinstance(run.params, ReviewerStartParams):
        return False
    revision = state.revisions.get(run.params.revision_id)
    return (
        revision is not None and revision.state == "open" and revision.head_sha == run.subject_sha
    )


def natural_key(item_id: str) -> tuple[int, str, int, str]:
    """Sort key that puts "2" before "10", numbers first, then keys by their project and number
    (Linear's and Jira's: "ENG-9" before "ENG-10"), then any other id."""
    if item_id.isdigit():
        return (0, "", int(item_id), "")
    prefix, dash, number = item_id.rpartition("-")
    if dash and prefix and number.isdigit():
        return (1, prefix, int(number), "")
    return (2, "", 0, item_id)


def ordered(ids: Iterable[WorkItemId]) -> list[WorkItemId]:
    """Work item ids in natural order."""
    return sorted(ids, key=natural_key)

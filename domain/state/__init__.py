"""The state reducer: how each event changes the engine state.

``apply_event(state, event)`` is the only way the engine state changes: it returns a new
``EngineState`` and never touches its input. It records facts; deciding what to do about them
is the handlers' job. Terminal agent events for a run that already ended are ignored, so a
duplicate delivery can never count an attempt twice.

``apply_event`` is one ``match`` over the events; the longer arms live beside it by subject:
``observed`` (work items, revisions, pipelines as the pollers see them), ``runs`` (an agent
run's life), ``queue`` (the merge queue's records) and ``edits`` (the copy-on-write edits they
all use).
"""

from __future__ import annotations

from domain.commands import ApplyPlan, CreateRevision, PostReview, StartAgent, UpdateRevision
from domain.events import (
    AgentFailed,
    AgentRequested,
    AgentSignalled,
    AgentStarted,
    BaselineChanged,
    BaselineRemoved,
    BranchUpdated,
    CommandFailed,
    CommandRejected,
    DispatchDue,
    EngineEvent,
    EngineStarted,
    EngineStopped,
    ImplementorCompleted,
    LandingRefused,
    MergeWaiting,
    PlanApplied,
    PlannerCompleted,
    ReviewerCompleted,
    ReviewPosted,
    RevisionChanged,
    RevisionCreated,
    RevisionMerged,
    RevisionRemoved,
    RevisionUpdated,
    SpecChanged,
    SpecRemoved,
    StatusTransitioned,
    UserCancelledRun,
    UserPausedDispatch,
    UserRequestedImplementorRun,
    UserResumedDispatch,
    UserTransitionedStatus,
    WorkItemChanged,
    WorkItemIgnored,
    WorkItemIgnoredRemoved,
    WorkItemRemoved,
)
from domain.models import (
    EngineProcess,
    EngineState,
    ImplementorStartParams,
    InfrastructureStreak,
    ManualPause,
    ModelHealth,
    WorkItemId,
)
from domain.state.edits import (
    put_run,
    replace,
    reset_attempts,
    settle_run,
    update_revision,
    with_key,
    without_key,
)
from domain.state.observed import (
    UNBLOCKED_BY_A_PERSON,
    observe_revision,
    observe_work_item,
    pipeline_seen,
)
from domain.state.queue import (
    answered,
    record_branch_update,
    record_landing,
    record_landing_failure,
    record_merge_wait,
    record_refusal,
    transitioned,
)
from domain.state.runs import complete_run, deliver, fail_run, request_run, signalled

_FOLLOW_UPS = (ApplyPlan, CreateRevision, UpdateRevision, PostReview)


def _unmade(state: EngineState, event: CommandFailed | CommandRejected) -> EngineState:
    """A command that failed or was refused: the run it followed up settles; a merge queue
    write that failed is kept to be asked again (``record_landing_failure``); a run a person
    asked for that a guard refused (a slot taken between the answer and the start) is kept:
    the next free slot is its (``asked``)."""
    command = event.command
    if isinstance(command, _FOLLOW_UPS):
        return settle_run(state, command.session_id)
    if (
        isinstance(command, StartAgent)
        and command.requested_by_user
        and isinstance(command.params, ImplementorStartParams)
    ):
        return replace(state, asked=state.asked | {command.params.work_item_id})
    if isinstance(event, CommandFailed):
        return record_landing_failure(state, event)
    return state


def _planned_blockers_seen(state: EngineState, wid: WorkItemId) -> EngineState:
    """A plan's blockers of ``wid`` are dropped once the tracker shows them on it (or it is
    done): from then on its own ``blocked_by`` says it."""
    planned = state.planned_blockers.get(wid)
    item = state.work_items.get(wid)
    if planned is None or item is None:
        return state
    if item.status != "done" and not set(planned) <= set(item.blocked_by):
        return state
    return replace(state, planned_blockers=without_key(state.planned_blockers, wid))


def _plan_applied(state: EngineState, event: PlanApplied) -> EngineState:
    """The specs planned, the plan's blockers held until a poll shows them, its run settled."""
    state = replace(state, last_planned_shas={**state.last_planned_shas, **event.spec_shas})
    given = {wid: tuple(b) for wid, b in event.blockers.items() if b}
    state = replace(state, planned_blockers={**state.planned_blockers, **given})
    for wid in given:
        state = _planned_blockers_seen(state, wid)
    return settle_run(state, event.session_id)


def apply_event(state: EngineState, event: EngineEvent) -> EngineState:
    """The state after ``event``. ``state`` is not modified."""
    match event:
        case WorkItemChanged(work_item=item):
            return _planned_blockers_seen(observe_work_item(state, item), item.id)
        case WorkItemRemoved(work_item_id=wid):
            return replace(
                state,
                work_items=without_key(state.work_items, wid),
                planned_blockers=without_key(state.planned_blockers, wid),
            )
        case WorkItemIgnored(item=ignored):
            return replace(state, ignored=with_key(state.ignored, ignored.id, ignored))
        case WorkItemIgnoredRemoved(work_item_id=wid):
            return replace(state, ignored=without_key(state.ignored, wid))
        case RevisionChanged(revision=revision):
            return observe_revision(state, revision)
        case RevisionRemoved(revision_id=rid):
            state = answered(state, rid)
            state = replace(state, merge_waits=without_key(state.merge_waits, rid))
            return replace(state, revisions=without_key(state.revisions, rid))
        case SpecChanged(spec=spec):
            return replace(state, specs=with_key(state.specs, spec.path, spec))
        case SpecRemoved(path=path):
            return replace(state, specs=without_key(state.specs, path))
        case BaselineChanged(baseline=baseline):
            state = pipeline_seen(state, baseline.pipeline.status)
            return replace(state, baseline=baseline)
        case BaselineRemoved():
            return replace(state, baseline=None)
        case AgentRequested():
            return request_run(state, event)
        case AgentStarted(session_id=sid):
            run = state.agent_runs.get(sid)
            if run is None or run.status != "requested":
                return state
            changes = {
                "status": "running",
                "started_at": event.at,
                "log_file_path": event.log_file_path,
            }
            return put_run(state, run, changes)
        case PlannerCompleted() | ImplementorCompleted() | ReviewerCompleted():
            return complete_run(state, event)
        case AgentFailed():
            return fail_run(state, event)
        case AgentSignalled():
            return signalled(state, event)
        case PlanApplied():
            return _plan_applied(state, event)
        case (
            RevisionCreated(session_id=sid, work_item_id=wid, revision=revision)
            | RevisionUpdated(session_id=sid, work_item_id=wid, revision=revision)
        ):
            return deliver(state, sid, wid, revision)
        case ReviewPosted(session_id=sid, revision_id=rid, head_sha=sha):
            return settle_run(update_revision(state, rid, {"reviewed_sha": sha}), sid)
        case RevisionMerged(revision_id=rid):
            state = answered(state, rid)
            state = replace(state, merge_waits=without_key(state.merge_waits, rid))
            return update_revision(record_landing(state, event), rid, {"state": "merged"})
        case MergeWaiting():
            return record_merge_wait(state, event)
        case BranchUpdated():
            return record_branch_update(state, event)
        case LandingRefused():
            return record_refusal(state, event)
        case StatusTransitioned(work_item_id=wid, to=to):
            return transitioned(state, event)
        case CommandFailed() | CommandRejected():
            return _unmade(state, event)
        case UserCancelledRun(session_id=sid):
            run = state.agent_runs.get(sid)
            if run is None or not run.is_active:
                return state
            return put_run(state, run, {"cancel_requested": True})
        case UserTransitionedStatus(work_item_id=wid, to=to):
            state = replace(state, asked=state.asked - {wid})  # the person decided anew
            if to in UNBLOCKED_BY_A_PERSON:
                return reset_attempts(state, wid)
            return state
        case UserRequestedImplementorRun(work_item_id=wid):
            # A person asks for this run: the item's attempts start again (workflow table).
            return reset_attempts(state, wid)
        case UserPausedDispatch(reason=reason):
            return replace(state, manual_pause=ManualPause(reason=reason, at=event.at))
        case UserResumedDispatch():
            # The person says the cause is dealt with: the breaker's count starts again too,
            # and a spent usage window no longer holds (they may have bought more).
            quota = {
                account: held.model_copy(update={"rejected_until": None, "reason": None})
                for account, held in state.quota.items()
            }
            return replace(
                state,
                manual_pause=None,
                infrastructure=InfrastructureStreak(),
                model_health=ModelHealth(),
                quota=quota,
            )
        case DispatchDue():
            return state
        case EngineStarted(pid=pid):
            return replace(state, engine=EngineProcess(pid=pid, started_at=event.at))
        case EngineStopped(how=how, reason=reason):
            last = state.engine or EngineProcess()
            stopped = {"stopped_at": event.at, "how": how, "reason": reason}
            return replace(state, engine=last.model_copy(update=stopped))

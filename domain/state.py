"""The state reducer: how each event changes the engine state.

``apply_event(state, event)`` is the only way the engine state changes: it returns a new
``EngineState`` and never touches its input. It records facts; deciding what to do about them
is the handlers' job. Terminal agent events for a run that already ended are ignored, so a
duplicate delivery can never count an attempt twice.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from domain.commands import ApplyPlan, CreateRevision, PostReview, UpdateRevision
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
    OUTAGE_CAUSES,
    AccountQuota,
    AgentRole,
    AgentRun,
    EngineProcess,
    EngineState,
    ImplementorStartParams,
    InfrastructureStreak,
    Landed,
    LandingProblem,
    LandingTest,
    ManualPause,
    MergeWait,
    ModelHealth,
    Revision,
    RevisionId,
    SentBack,
    SessionId,
    Status,
    WorkItem,
    WorkItemId,
)
from domain.selectors import latest_implementor_run, review_is_current
from domain.signals import describe_cause, describe_signal

K = TypeVar("K")
V = TypeVar("V")

_FOLLOW_UPS = (ApplyPlan, CreateRevision, UpdateRevision, PostReview)
_UNBLOCKED_BY_A_PERSON: frozenset[Status] = frozenset({"pending", "needs-refinement"})


def apply_event(state: EngineState, event: EngineEvent) -> EngineState:
    """The state after ``event``. ``state`` is not modified."""
    match event:
        case WorkItemChanged(work_item=item):
            return _observe_work_item(state, item)
        case WorkItemRemoved(work_item_id=wid):
            return _replace(state, work_items=_without(state.work_items, wid))
        case WorkItemIgnored(item=ignored):
            return _replace(state, ignored=_with(state.ignored, ignored.id, ignored))
        case WorkItemIgnoredRemoved(work_item_id=wid):
            return _replace(state, ignored=_without(state.ignored, wid))
        case RevisionChanged(revision=revision):
            return _observe_revision(state, revision)
        case RevisionRemoved(revision_id=rid):
            state = _replace(state, merge_waits=_without(state.merge_waits, rid))
            return _replace(state, revisions=_without(state.revisions, rid))
        case SpecChanged(spec=spec):
            return _replace(state, specs=_with(state.specs, spec.path, spec))
        case SpecRemoved(path=path):
            return _replace(state, specs=_without(state.specs, path))
        case BaselineChanged(baseline=baseline):
            state = _pipeline_seen(state, baseline.pipeline.status)
            return _replace(state, baseline=baseline)
        case BaselineRemoved():
            return _replace(state, baseline=None)
        case AgentRequested():
            return _request_run(state, event)
        case AgentStarted(session_id=sid):
            run = state.agent_runs.get(sid)
            if run is None or run.status != "requested":
                return state
            changes = {
                "status": "running",
                "started_at": event.at,
                "log_file_path": event.log_file_path,
            }
            return _put_run(state, run, changes)
        case PlannerCompleted() | ImplementorCompleted() | ReviewerCompleted():
            return _complete_run(state, event)
        case AgentFailed():
            return _fail_run(state, event)
        case AgentSignalled():
            return _signalled(state, event)
        case PlanApplied(session_id=sid, spec_shas=shas):
            state = _replace(state, last_planned_shas={**state.last_planned_shas, **shas})
            return _settle(state, sid)
        case (
            RevisionCreated(session_id=sid, work_item_id=wid, revision=revision)
            | RevisionUpdated(session_id=sid, work_item_id=wid, revision=revision)
        ):
            return _deliver(state, sid, wid, revision)
        case ReviewPosted(session_id=sid, revision_id=rid, head_sha=sha):
            return _settle(_update_revision(state, rid, {"reviewed_sha": sha}), sid)
        case RevisionMerged(revision_id=rid):
            state = _replace(state, merge_waits=_without(state.merge_waits, rid))
            return _update_revision(_record_landing(state, event), rid, {"state": "merged"})
        case MergeWaiting():
            return _merge_waits(state, event)
        case BranchUpdated():
            return record_branch_update(state, event)
        case LandingRefused():
            return record_refusal(state, event)
        case StatusTransitioned(work_item_id=wid, to=to):
            return _transitioned(state, event)
        case CommandFailed(command=command) | CommandRejected(command=command):
            if isinstance(command, _FOLLOW_UPS):
                return _settle(state, command.session_id)
            return state
        case UserCancelledRun(session_id=sid):
            run = state.agent_runs.get(sid)
            if run is None or not run.is_active:
                return state
            return _put_run(state, run, {"cancel_requested": True})
        case UserTransitionedStatus(work_item_id=wid, to=to):
            if to in _UNBLOCKED_BY_A_PERSON:
                return _reset_attempts(state, wid)
            return state
        case UserRequestedImplementorRun(work_item_id=wid):
            # A person asks for this run: the item's attempts start again (workflow table).
            return _reset_attempts(state, wid)
        case UserPausedDispatch(reason=reason):
            return _replace(state, manual_pause=ManualPause(reason=reason, at=event.at))
        case UserResumedDispatch():
            # The person says the cause is dealt with: the breaker's count starts again too,
            # and a spent usage window no longer holds (they may have bought more).
            quota = {
                account: held.model_copy(update={"rejected_until": None, "reason": None})
                for account, held in state.quota.items()
            }
            return _replace(
                state,
                manual_pause=None,
                infrastructure=InfrastructureStreak(),
                model_health=ModelHealth(),
                quota=quota,
            )
        case DispatchDue():
            return state
        case EngineStarted(pid=pid):
            return _replace(state, engine=EngineProcess(pid=pid, started_at=event.at))
        case EngineStopped(how=how, reason=reason):
            last = state.engine or EngineProcess()
            stopped = {"stopped_at": event.at, "how": how, "reason": reason}
            return _replace(state, engine=last.model_copy(update=stopped))


# ---------------------------------------------------------------------------- reducers


def merge_observed_work_item(known: WorkItem | None, item: WorkItem) -> WorkItem:
    """What the state holds after observing ``item``: some providers do not show the link to
    the revision on the item; the engine made the link, so it is kept."""
    if known is not None and item.linked_revision is None and known.linked_revision is not None:
        return item.model_copy(update={"linked_revision": known.linked_revision})
    return item


def merge_observed_revision(known: Revision | None, revision: Revision) -> Revision:
    """What the state holds after observing ``revision``: the head the engine last reviewed is
    kept when the provider does not report it."""
    if known is not None and revision.reviewed_sha is None and known.reviewed_sha is not None:
        return revision.model_copy(update={"reviewed_sha": known.reviewed_sha})
    return revision


def _observe_work_item(state: EngineState, item: WorkItem) -> EngineState:
    known = state.work_items.get(item.id)
    item = merge_observed_work_item(known, item)
    state = _replace(state, work_items=_with(state.work_items, item.id, item))
    if known is not None and known.status == "blocked" and item.status in _UNBLOCKED_BY_A_PERSON:
        # A person unblocked it on the provider: they are asking for fresh attempts.
        state = _reset_attempts(state, item.id)
    return state


def _pipeline_seen(state: EngineState, status: str) -> EngineState:
    if state.pipelines_seen or status == "none":
        return state
    return _replace(state, pipelines_seen=True)


def _observe_revision(state: EngineState, revision: Revision) -> EngineState:
    state = _pipeline_seen(state, revision.pipeline.status)
    revision = merge_observed_revision(state.revisions.get(revision.id), revision)
    state = _replace(state, revisions=_with(state.revisions, revision.id, revision))
    wait = state.merge_waits.get(revision.id)
    if wait is not None and (revision.state != "open" or revision.head_sha != wait.head_sha):
        # Merged or closed on the provider, or a new head (reviewed again before any merge).
        state = _replace(state, merge_waits=_without(state.merge_waits, revision.id))
    wid = revision.work_item_id
    item = state.work_items.get(wid) if wid is not None else None
    if item is not None and item.linked_revision is None and revision.state == "open":
        state = _update_work_item(state, item.id, linked_revision=revision.id)
    return state


def _transitioned(state: EngineState, event: StatusTransitioned) -> EngineState:
    """The item's new status; its place in the merge queue (entered on approval, left on any
    other status, with the revision's test); what the queue said when it sent the item back."""
    wid, to = event.work_item_id, event.to
    known = state.work_items.get(wid)
    state = _update_work_item(state, wid, status=to)
    if to == "approved":
        if wid not in state.approved_at and event.at is not None:
            state = _replace(state, approved_at=_with(state.approved_at, wid, event.at))
    elif wid in state.approved_at or state.landing:
        state = _replace(state, approved_at=_without(state.approved_at, wid))
        tests = {rid: t for rid, t in state.landing.items() if t.work_item_id != wid}
        if len(tests) != len(state.landing):
            state = _replace(state, landing=tests)
    if event.landing is not None:
        report = event.landing.model_copy(update={"at": event.landing.at or event.at})
        state = _replace(state, sent_back=_with(state.sent_back, wid, report))
    elif to == "done" or (to == "pending" and known is not None and known.status == "blocked"):
        state = _replace(state, sent_back=_without(state.sent_back, wid))
    return state


_LANDED_KEPT = 50  # the latest landings, to say which one moved the default branch


def _record_landing(state: EngineState, event: RevisionMerged) -> EngineState:
    revision = state.revisions.get(event.revision_id)
    # Counted once per revision. A poll may have seen the merge before its result was
    # processed (the revision reads merged already): it is still this landing.
    if revision is None or any(entry.revision_id == revision.id for entry in state.landed):
        return state
    wid = revision.work_item_id
    test = state.landing.get(revision.id)
    entry = Landed(
        work_item_id=wid,
        revision_id=revision.id,
        merge_sha=event.merge_sha,
        at=event.at,
        approved_at=state.approved_at.get(wid) if wid is not None else None,
        tests=test.tests if test is not None else 0,
    )
    landed = (*state.landed, entry)[-_LANDED_KEPT:]
    return _replace(
        state,
        landed=landed,
        landings_total=state.landings_total + 1,
        landing=_without(state.landing, revision.id),
    )


def record_branch_update(state: EngineState, event: BranchUpdated) -> EngineState:
    """A revision brought up to date by the merge queue: its head and pipeline as the provider
    answered, and its test on top of ``base_sha``."""
    known = state.revisions.get(event.revision.id)
    if known is None:
        return state
    state = _observe_revision(state, event.revision)
    head = event.revision.head_sha
    baseline = state.baseline
    base_red = (
        baseline is not None
        and baseline.sha == event.base_sha
        and baseline.pipeline.status == "failure"
    )
    previous = state.landing.get(known.id)
    if previous is not None:
        test = previous.model_copy(
            update={
                "base_sha": event.base_sha,
                "tested_sha": head,
                "heads": tuple(dict.fromkeys((*previous.heads, head))),
                "at": event.at,
                "tests": previous.tests + (head != previous.tested_sha),
                "stale": False,
                "note": None,
                "base_red": base_red,
            }
        )
    else:
        approved = known.reviewed_sha or known.head_sha
        test = LandingTest(
            work_item_id=event.work_item_id,
            approved_sha=approved,
            approved_pipeline=known.pipeline.status,
            base_sha=event.base_sha,
            tested_sha=head,
            heads=tuple(dict.fromkeys((approved, known.head_sha, head))),
            at=event.at,
            tests=1 if head != known.head_sha else 0,
            base_red=base_red,
        )
    return _replace(state, landing=_with(state.landing, known.id, test))


def record_refusal(state: EngineState, event: LandingRefused) -> EngineState:
    """A refused queue step. A moved default branch makes the test stale (tested again). A
    conflict ends the test and is recorded for the item's next prompt (``sent_back``; the
    handlers send it back). A refused revision write settles the run that made the patch and
    gives back the attempt its completion counted: the conflict is another landing's doing."""
    rid = event.revision_id
    test = state.landing.get(rid) if rid is not None else None
    if rid is not None and test is not None:
        if event.kind == "moved":
            # Tested again, whatever held its merge before (that was for the old tree).
            stale = test.model_copy(update={"stale": True, "note": event.reason})
            state = _replace(state, merge_waits=_without(state.merge_waits, rid))
            return _replace(state, landing=_with(state.landing, rid, stale))
        state = _replace(state, landing=_without(state.landing, rid))
    if event.kind != "conflict":
        return state
    item = state.work_items.get(event.work_item_id)
    refused = event.session_id or (f"{rid}@{event.head_sha}" if event.head_sha else None)
    previous = state.sent_back.get(event.work_item_id)
    again = (
        previous is not None
        and refused is not None
        and previous.refused == refused
        and previous.answered_by is None
    )
    if item is not None and not again:
        report = landing_report(
            state, item, rid, "conflict", event.reason, files=event.files, detail=event.detail
        )
        report = report.model_copy(update={"at": event.at, "refused": refused})
        state = _replace(state, sent_back=_with(state.sent_back, item.id, report))
    run = state.agent_runs.get(event.session_id) if event.session_id is not None else None
    if run is not None and not run.settled:
        if not run.landing_round and state.attempts.get(event.work_item_id):
            attempts = state.attempts[event.work_item_id] - 1
            state = _replace(state, attempts=_with(state.attempts, event.work_item_id, attempts))
        state = _put_run(state, run, {"settled": True, "landing_round": True, "conflicted": True})
    return state


_DETAIL_CHARS = 6000  # of conflict hunks or a failing log, in the report and the prompt


def landing_report(
    state: EngineState,
    item: WorkItem,
    revision_id: RevisionId | None,
    problem: LandingProblem,
    reason: str,
    *,
    files: tuple[str, ...] = (),
    detail: str = "",
) -> SentBack:
    """What the merge queue tells the item's implementor, its round counted."""
    previous = state.sent_back.get(item.id)
    if len(detail) > _DETAIL_CHARS:
        detail = detail[:_DETAIL_CHARS] + "\n…"
    return SentBack(
        revision_id=revision_id,
        problem=problem,
        reason=reason,
        files=files,
        detail=detail,
        moved_by=moved_by(state, item),
        rounds=previous.rounds + 1 if previous is not None else 1,
    )


def moved_by(state: EngineState, item: WorkItem) -> str:
    """Which landings moved the default branch since the item's revision was made (its latest
    implementor run started from the default branch then), in words."""
    run = latest_implementor_run(state, item.id)
    since = run.requested_at if run is not None else None
    landings = [
        landed
        for landed in state.landed
        if landed.work_item_id != item.id
        and (since is None or landed.at is None or landed.at >= since)
    ]
    if not landings:
        return "commits cpe did not make (pushed to the default branch by someone else)"
    return ", ".join(
        f"the merge of #{landed.work_item_id} (revision #{landed.revision_id}"
        + (f", {landed.merge_sha[:12]})" if landed.merge_sha else ")")
        for landed in landings[-5:]
    )


def _merge_waits(state: EngineState, event: MergeWaiting) -> EngineState:
    known = state.merge_waits.get(event.revision_id)
    if known is not None and known.head_sha == event.head_sha:
        wait = known.model_copy(
            update={"reason": event.reason, "last_at": event.at, "tries": known.tries + 1}
        )
    else:
        wait = MergeWait(
            work_item_id=event.work_item_id,
            head_sha=event.head_sha,
            reason=event.reason,
            since=event.at,
            last_at=event.at,
        )
    return _replace(state, merge_waits=_with(state.merge_waits, event.revision_id, wait))


def _request_run(state: EngineState, event: AgentRequested) -> EngineState:
    if event.session_id in state.agent_runs:
        return state
    item = (
        state.work_items.get(event.params.work_item_id)
        if isinstance(event.params, ImplementorStartParams)
        else None
    )
    sent = state.sent_back.get(item.id) if item is not None else None
    answers = sent is not None and sent.answered_by is None and item is not None
    run = AgentRun(
        session_id=event.session_id,
        params=event.params,
        subject_sha=event.subject_sha,
        spec_shas=event.spec_shas,
        requested_at=event.at,
        blocked_by_at_start=item.blocked_by if item is not None else (),
        landing_round=answers,
    )
    state = _replace(state, agent_runs=_with(state.agent_runs, run.session_id, run))
    if answers and item is not None and sent is not None:
        taken = sent.model_copy(update={"answered_by": run.session_id})
        state = _replace(state, sent_back=_with(state.sent_back, item.id, taken))
    return state


def _complete_run(
    state: EngineState, event: PlannerCompleted | ImplementorCompleted | ReviewerCompleted
) -> EngineState:
    run = state.agent_runs.get(event.session_id)
    if run is None or run.is_terminal or run.role != event.result.role:
        return state
    changes: dict[str, Any] = {
        "status": "completed",
        "ended_at": event.at,
        "cost_usd": event.cost_usd,
        "turns": event.turns,
        "model": event.model,
    }
    if state.infrastructure.count:  # the model answered: the streak is over
        state = _replace(state, infrastructure=InfrastructureStreak())
    if state.model_health.retries:
        state = _replace(state, model_health=ModelHealth())
    changes["signal"] = None
    if isinstance(event, ImplementorCompleted):
        changes["outcome"] = event.result.outcome
        # Only a completed run with a patch has a follow-up write (the revision).
        changes["settled"] = not (event.result.outcome == "completed" and event.result.patch)
        if not (run.landing_round and event.result.outcome == "completed"):
            state = _count_attempt(state, event.result.role, run)
    elif isinstance(event, ReviewerCompleted):
        changes["outcome"] = event.result.review.verdict
        changes["settled"] = not review_is_current(state, run)
    return _put_run(state, run, changes)


def _fail_run(state: EngineState, event: AgentFailed) -> EngineState:
    run = state.agent_runs.get(event.session_id)
    if run is None or run.is_terminal:
        return state
    changes: dict[str, Any] = {
        "status": event.kind,
        "ended_at": event.at,
        "failure_reason": event.reason,
        "failure_class": event.failure_class,
        "settled": True,
        "cost_usd": event.cost_usd,
        "turns": event.turns,
        "model": event.model,
    }
    if event.kind == "cancelled" and event.failure_class != "infrastructure":
        return _put_run(state, run, changes)  # by shutdown or a person: no attempt used up
    if event.failure_class == "infrastructure":  # not the work's fault: no attempt either
        # (a run cancelled because the model API is down counts here too)
        streak = InfrastructureStreak(
            count=state.infrastructure.count + 1, last_at=event.at, last_reason=event.reason
        )
        return _put_run(_replace(state, infrastructure=streak), run, changes)
    state = _count_attempt(state, run.role, run)
    if state.infrastructure.count:
        state = _replace(state, infrastructure=InfrastructureStreak())
    return _put_run(state, run, changes)


def _signalled(state: EngineState, event: AgentSignalled) -> EngineState:
    """A live run's word on the model API: the run shows it; an outage retry extends the
    model's unhealthy streak and an answer ends it; the account's headroom and a spent window
    are kept per account. A late signal of a run that ended changes only the account."""
    signal, at = event.signal, event.at
    run = state.agent_runs.get(event.session_id)
    live = run is not None and run.is_active
    if signal.kind in ("quota", "rate_limited"):
        held = state.quota.get(signal.account, AccountQuota())
        update: dict[str, Any] = {}
        if signal.windows:  # a report may name some windows only: the others are kept
            merged = {w.name: w for w in held.windows} | {w.name: w for w in signal.windows}
            update |= {"windows": tuple(merged.values()), "reported_at": at}
        if signal.kind == "rate_limited" and signal.until is not None:
            update |= {"rejected_until": signal.until, "reason": describe_signal(signal)}
        state = _replace(
            state, quota=_with(state.quota, signal.account, held.model_copy(update=update))
        )
        if signal.kind == "quota" or run is None or not live:
            return state
        return _put_run(state, run, {"signal": signal})
    if run is None or not live:
        return state
    if signal.kind == "recovered":
        if state.model_health.retries:
            state = _replace(state, model_health=ModelHealth())
        return _put_run(state, run, {"signal": None})
    if signal.cause in OUTAGE_CAUSES:
        health = state.model_health
        health = ModelHealth(
            retries=health.retries + 1,
            since=health.since or at,
            last_at=at,
            last_reason=describe_cause(signal),
        )
        state = _replace(state, model_health=health)
    return _put_run(state, run, {"signal": signal})


def _deliver(
    state: EngineState, sid: SessionId | None, wid: WorkItemId, revision: Revision
) -> EngineState:
    state = _observe_revision(state, revision)
    state = _update_work_item(state, wid, linked_revision=revision.id)
    run = state.agent_runs.get(sid) if sid is not None else None
    if run is None:
        return state
    return _put_run(state, run, {"settled": True, "delivered_revision": revision.id})


def _update_revision(
    state: EngineState, rid: RevisionId, changes: Mapping[str, object]
) -> EngineState:
    known = state.revisions.get(rid)
    if known is None:
        return state
    updated = known.model_copy(update=dict(changes))
    return _replace(state, revisions=_with(state.revisions, rid, updated))


def _update_work_item(state: EngineState, wid: WorkItemId, **changes: object) -> EngineState:
    known = state.work_items.get(wid)
    if known is None:
        return state
    updated = known.model_copy(update=changes)
    return _replace(state, work_items=_with(state.work_items, wid, updated))


def _settle(state: EngineState, sid: SessionId | None) -> EngineState:
    run = state.agent_runs.get(sid) if sid is not None else None
    if run is None or run.settled:
        return state
    return _put_run(state, run, {"settled": True})


def _count_attempt(state: EngineState, role: AgentRole, run: AgentRun) -> EngineState:
    wid = run.work_item_id
    if role != "implementor" or wid is None:
        return state
    return _replace(state, attempts=_with(state.attempts, wid, state.attempts.get(wid, 0) + 1))


def _reset_attempts(state: EngineState, wid: WorkItemId) -> EngineState:
    if not state.attempts.get(wid):
        return state
    return _replace(state, attempts=_with(state.attempts, wid, 0))


def _put_run(state: EngineState, run: AgentRun, changes: Mapping[str, Any]) -> EngineState:
    updated = run.model_copy(update=dict(changes))
    return _replace(state, agent_runs=_with(state.agent_runs, run.session_id, updated))


def _replace(state: EngineState, **changes: object) -> EngineState:
    return state.model_copy(update=changes)


def _with(mapping: Mapping[K, V], key: K, value: V) -> dict[K, V]:
    return {**mapping, key: value}


def _without(mapping: Mapping[K, V], key: K) -> Mapping[K, V]:
    if key not in mapping:
        return mapping
    return {k: v for k, v in mapping.items() if k != key}

"""What the state records of an agent run's life: requested, completed, failed, its signals
about the model API, and the revision it delivered. Terminal events for a run that already
ended are ignored, so a duplicate delivery never counts an attempt twice."""

from __future__ import annotations

from typing import Any

from domain.events import (
    AgentFailed,
    AgentRequested,
    AgentSignalled,
    ImplementorCompleted,
    PlannerCompleted,
    ReviewerCompleted,
)
from domain.models import (
    OUTAGE_CAUSES,
    AccountQuota,
    AgentRun,
    EngineState,
    ImplementorStartParams,
    InfrastructureStreak,
    ModelHealth,
    Revision,
    SessionId,
    WorkItemId,
)
from domain.selectors import review_is_current
from domain.signals import describe_cause, describe_signal
from domain.state.edits import count_attempt, put_run, replace, update_work_item, with_key
from domain.state.observed import observe_revision


def request_run(state: EngineState, event: AgentRequested) -> EngineState:
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
    state = replace(state, agent_runs=with_key(state.agent_runs, run.session_id, run))
    if item is not None and item.id in state.asked:  # the run a person asked for started
        state = replace(state, asked=state.asked - {item.id})
    if answers and item is not None and sent is not None:
        taken = sent.model_copy(update={"answered_by": run.session_id})
        state = replace(state, sent_back=with_key(state.sent_back, item.id, taken))
    return state


def complete_run(
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
        state = replace(state, infrastructure=InfrastructureStreak())
    if state.model_health.retries:
        state = replace(state, model_health=ModelHealth())
    changes["signal"] = None
    if isinstance(event, ImplementorCompleted):
        changes["outcome"] = event.result.outcome
        # Only a completed run with a patch has a follow-up write (the revision).
        changes["settled"] = not (event.result.outcome == "completed" and event.result.patch)
        if not (run.landing_round and event.result.outcome == "completed"):
            state = count_attempt(state, event.result.role, run)
    elif isinstance(event, ReviewerCompleted):
        changes["outcome"] = event.result.review.verdict
        changes["settled"] = not review_is_current(state, run)
    return put_run(state, run, changes)


def fail_run(state: EngineState, event: AgentFailed) -> EngineState:
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
        return put_run(state, run, changes)  # by shutdown or a person: no attempt used up
    if event.failure_class == "infrastructure":  # not the work's fault: no attempt either
        # (a run cancelled because the model API is down counts here too)
        streak = InfrastructureStreak(
            count=state.infrastructure.count + 1, last_at=event.at, last_reason=event.reason
        )
        return put_run(replace(state, infrastructure=streak), run, changes)
    state = count_attempt(state, run.role, run)
    if state.infrastructure.count:
        state = replace(state, infrastructure=InfrastructureStreak())
    return put_run(state, run, changes)


def signalled(state: EngineState, event: AgentSignalled) -> EngineState:
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
        state = replace(
            state, quota=with_key(state.quota, signal.account, held.model_copy(update=update))
        )
        if signal.kind == "quota" or run is None or not live:
            return state
        return put_run(state, run, {"signal": signal})
    if run is None or not live:
        return state
    if signal.kind == "recovered":
        if state.model_health.retries:
            state = replace(state, model_health=ModelHealth())
        return put_run(state, run, {"signal": None})
    if signal.cause in OUTAGE_CAUSES:
        health = state.model_health
        health = ModelHealth(
            retries=health.retries + 1,
            since=health.since or at,
            last_at=at,
            last_reason=describe_cause(signal),
        )
        state = replace(state, model_health=health)
    return put_run(state, run, {"signal": signal})


def deliver(
    state: EngineState, sid: SessionId | None, wid: WorkItemId, revision: Revision
) -> EngineState:
    state = observe_revision(state, revision)
    state = update_work_item(state, wid, linked_revision=revision.id)
    run = state.agent_runs.get(sid) if sid is not None else None
    if run is None:
        return state
    return put_run(state, run, {"settled": True, "delivered_revision": revision.id})

"""Decisions the handlers share: where an item goes when its run ends, what a revision needs
next, which items may be dispatched, and how a branch is named.

Each is a pure function of the state *after* the event was applied, so the handler that reacts
to a run's end and the recovery that finds the same item later reach the same answer.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal

from domain.commands import (
    CancelAgent,
    EngineCommand,
    MergeRevision,
    StartAgent,
    TransitionStatus,
)
from domain.models import (
    OUTAGE_CAUSES,
    AgentRole,
    AgentRun,
    EngineState,
    ImplementorStartParams,
    ReviewerStartParams,
    Revision,
    Status,
    WorkItem,
    WorkItemId,
)
from domain.selectors import (
    active_runs,
    blockers_resolved,
    has_run_in_flight,
    latest_implementor_run,
    natural_key,
    ordered,
    planner_failures,
    reviewer_failures,
    reviewer_in_flight,
    revision_for,
)
from domain.signals import clock, window_name
from domain.workflow import Trigger, next_status


def transition(item: WorkItem, trigger: Trigger, reason: str | None = None) -> list[EngineCommand]:
    """``TransitionStatus`` per the workflow table, or nothing when the table has no row."""
    target = next_status(item.status, trigger)
    if target is None:
        return []
    return [TransitionStatus(work_item_id=item.id, to=target, reason=reason)]


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


def doubling(initial: float, maximum: float, times: int) -> float:
    """``initial`` seconds doubled ``times`` times, at most ``maximum`` (the backoffs' rule)."""
    return min(maximum, initial * float(2 ** min(max(times, 0), 32)))


@dataclass(frozen=True)
class DispatchPause:
    """Dispatch is paused until ``until`` after ``failures`` infrastructure failures in a row,
    the last for ``reason``; past ``until`` one probe run decides."""

    until: datetime
    reason: str
    failures: int
    outage: bool = False  # the model API is down (``outage_pause``), not runs failing


def breaker_pause(
    state: EngineState, *, failures: int, initial: float, maximum: float, outage_after: float
) -> DispatchPause | None:
    """The breaker's pause as the engine judges it: from infrastructure failures in a row
    (``dispatch_pause``) or an outage live runs report (``outage_pause``), the later one."""
    pauses = [
        pause
        for pause in (
            dispatch_pause(state, threshold=failures, initial=initial, maximum=maximum),
            outage_pause(state, after=outage_after, initial=initial, maximum=maximum),
        )
        if pause is not None
    ]
    return max(pauses, key=lambda pause: pause.until, default=None)


def dispatch_pause(
    state: EngineState, *, threshold: int, initial: float, maximum: float
) -> DispatchPause | None:
    """The circuit breaker: from ``threshold`` infrastructure failures in a row, dispatch waits
    ``initial`` seconds after the last one, doubling with each further failure up to
    ``maximum``. None when it is not paused."""
    streak = state.infrastructure
    if streak.count < threshold or streak.last_at is None:
        return None
    delay = doubling(initial, maximum, streak.count - threshold)
    return DispatchPause(
        until=streak.last_at + timedelta(seconds=delay),
        reason=streak.last_reason or "agent runs failed under the agent",
        failures=streak.count,
    )


def model_outage(state: EngineState, *, after: float) -> DispatchPause | None:
    """The model API is down: live runs have retried for an outage cause (``ModelHealth``)
    for at least ``after`` seconds with no answer in between (two retries at least). None when
    it is not. ``until`` is the last retry's time: ``outage_pause`` adds the pause."""
    health = state.model_health
    if health.retries < 2 or health.since is None or health.last_at is None:
        return None
    if (health.last_at - health.since).total_seconds() < after:
        return None
    reason = health.last_reason or "the model API fails"
    return DispatchPause(until=health.last_at, reason=reason, failures=health.retries)


def outage_pause(
    state: EngineState, *, after: float, initial: float, maximum: float
) -> DispatchPause | None:
    """Dispatch waits ``initial`` seconds after the last retry of an outage (``model_outage``),
    doubling with each further run the outage failed (the infrastructure streak), up to
    ``maximum``; then one probe run decides, as for ``dispatch_pause``."""
    outage = model_outage(state, after=after)
    if outage is None:
        return None
    delay = doubling(initial, maximum, max(0, state.infrastructure.count - 1))
    return DispatchPause(
        until=outage.until + timedelta(seconds=delay),
        reason=outage.reason,
        failures=outage.failures,
        outage=True,
    )


def outage_cancels(state: EngineState, *, after: float) -> list[EngineCommand]:
    """During an outage (``model_outage``), the runs whose CLI is retrying for an outage cause
    are cancelled as infrastructure failures: they spend no attempt and free their slot."""
    outage = model_outage(state, after=after)
    if outage is None:
        return []
    commands: list[EngineCommand] = []
    for run in active_runs(state):
        signal = run.signal
        if signal is None or signal.kind != "retrying" or signal.cause not in OUTAGE_CAUSES:
            continue
        if run.cancel_requested:
            continue
        reason = f"cancelled to free its slot while the model API is down: {outage.reason}"
        commands.append(CancelAgent(session_id=run.session_id, reason=reason, infrastructure=True))
    return commands


@dataclass(frozen=True)
class QuotaHold:
    """A model account may not start runs until ``until``, for ``reason``."""

    account: str
    until: datetime
    reason: str


def quota_hold(
    state: EngineState, account: str, now: datetime, *, margin: float, pause_at: float | None
) -> QuotaHold | None:
    """Whether runs on ``account`` wait: a spent usage window (``rate_limited``) until its reset
    plus ``margin`` seconds; with ``pause_at`` (0..1), a window used that much until it resets.
    None when they may start."""
    held = state.quota.get(account)
    if held is None:
        return None
    if held.rejected_until is not None:
        until = held.rejected_until + timedelta(seconds=margin)
        if now < until:
            return QuotaHold(account, until, held.reason or "a usage window is spent")
    if pause_at is None:
        return None
    for window in held.windows:
        used, reset = window.utilization, window.resets_at
        if used is None or reset is None or used < pause_at or now >= reset:
            continue
        reason = (
            f"{window_name(window.name)} window {used:.0%} used (pause_at {pause_at:.0%}), "
            f"resets {clock(reset)}"
        )
        return QuotaHold(account, reset + timedelta(seconds=margin), reason)
    return None


@dataclass(frozen=True)
class PlannerBackoff:
    """The next planner run on these spec versions waits until ``until``: ``failures`` runs
    failed on them, the last for ``reason``."""

    until: datetime
    reason: str
    failures: int


def planner_backoff(
    state: EngineState, spec_shas: Mapping[str, str], *, initial: float, maximum: float
) -> PlannerBackoff | None:
    """A planner that failed on a spec version is run again on it ``initial`` seconds after its
    last failure, doubling with each further failure up to ``maximum`` (the failures counted as
    ``planner_failures`` does: a run the infrastructure failed is the breaker's business). None
    when no spec of the batch has failed."""
    failures = max((planner_failures(state, p, sha) for p, sha in spec_shas.items()), default=0)
    if failures == 0:
        return None
    last = max(
        (
            run
            for run in state.agent_runs.values()
            if run.role == "planner"
            and run.status in ("failed", "timed-out")
            and run.failure_class != "infrastructure"
            and run.ended_at is not None
            and any(run.spec_shas.get(p) == sha for p, sha in spec_shas.items())
        ),
        key=lambda run: run.ended_at or datetime.min,
        default=None,
    )
    if last is None or last.ended_at is None:
        return None
    delay = doubling(initial, maximum, failures - 1)
    return PlannerBackoff(
        until=last.ended_at + timedelta(seconds=delay),
        reason=last.failure_reason or last.status,
        failures=failures,
    )


# The reason of a run that was active when cpe itself stopped (a crash, kill -9): failed at the
# next start, but nothing the work did, so its retry does not back off.
INTERRUPTED = "interrupted: cpe stopped while the run was active"


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
        return "it gained an open blocker: " + ", ".join(f"#{b}" for b in gained)
    return None


def work_failure(run: AgentRun) -> bool:
    """An ended implementor run that failed for the work's sake: failed or timed out (not under
    the agent, not interrupted by cpe's own stop), or completed with nothing delivered (invalid
    output, no patch)."""
    if run.in_flight or run.ended_at is None or run.failure_class == "infrastructure":
        return False
    if run.failure_reason == INTERRUPTED:
        return False
    if run.status in ("failed", "timed-out"):
        return True
    return run.status == "completed" and run.outcome != "blocked" and run.delivered_revision is None


def _jitter(key: str) -> float:
    """A factor in [1, 1.25) drawn from ``key``: retries of items that failed together spread
    out, and the same run always gives the same time (the decision stays a pure function)."""
    digest = hashlib.sha256(key.encode()).digest()
    return 1 + int.from_bytes(digest[:4], "big") / 2**32 / 4


@dataclass(frozen=True)
class RetryWait:
    """The next implementor run of an item waits until ``until``: its attempt ``attempt``
    failed, for ``reason``."""

    until: datetime
    reason: str
    attempt: int


def implementor_backoff(
    state: EngineState, work_item_id: WorkItemId, *, initial: float, maximum: float
) -> RetryWait | None:
    """After a work failure, an item's next run waits ``initial`` seconds, doubling with each
    attempt spent, up to ``maximum``, times a jitter of up to 25 %. None when its latest run was
    no such failure (a first run, a refinement after a review, an infrastructure failure)."""
    run = latest_implementor_run(state, work_item_id)
    if run is None or not work_failure(run) or run.ended_at is None:
        return None
    attempts = max(1, state.attempts.get(work_item_id, 1))
    delay = doubling(initial, maximum, attempts - 1) * _jitter(run.session_id)
    reason = run.failure_reason or (f"outcome {run.outcome}" if run.outcome else run.status)
    return RetryWait(until=run.ended_at + timedelta(seconds=delay), reason=reason, attempt=attempts)


def explain_transition(state: EngineState, work_item_id: WorkItemId, to: Status) -> str:
    """Why the engine moves an item to ``to``, in words for the log: ``#2 in-progress →
    blocked: attempts exhausted (3 runs); last failure: authentication refused``. An item
    that has ``to`` already is no change: ``#2 already in-progress``."""
    item = state.work_items.get(work_item_id)
    if item is not None and item.status == to:
        return f"#{work_item_id} already {to}"
    source = item.status if item is not None else "unknown"
    head = f"#{work_item_id} {source} → {to}"
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


def free_slots(state: EngineState, role: AgentRole, max_concurrent: Mapping[AgentRole, int]) -> int:
    return max(0, max_concurrent.get(role, 1) - len(active_runs(state, role)))


def dispatch_items(
    state: EngineState,
    candidates: Iterable[WorkItem],
    *,
    max_attempts: int,
    max_concurrent: Mapping[AgentRole, int],
    branch_prefix: str,
    item_budget: float | None = None,
    block_on_budget: bool = True,
) -> list[EngineCommand]:
    """Start implementors for the eligible candidates, as many as there are free slots.

    Eligible: pending with every blocker done, or needs-refinement; no run in flight. An item
    that would be eligible but has used its attempts is blocked instead; one whose runs have
    spent ``item_budget`` is blocked (``block_on_budget``) or left waiting.
    """
    commands: list[EngineCommand] = []
    slots = free_slots(state, "implementor", max_concurrent)
    seen: set[WorkItemId] = set()
    # Work already under review first, then items whose last run did not fail (a failed one
    # waits for its retry backoff, which the executor enforces, and must not hold a slot others
    # could use), then the failed ones by when they failed; each in natural id order.
    ranked = sorted(
        candidates,
        key=lambda i: (i.status != "needs-refinement", *_failed_at(state, i), natural_key(i.id)),
    )
    for item in ranked:
        if item.id in seen:
            continue
        seen.add(item.id)
        if not _eligible(state, item):
            continue
        if exhausted(state, item.id, max_attempts):
            why = f"attempts exhausted ({state.attempts.get(item.id, 0)} of {max_attempts})"
            commands += transition(item, "attempts-exhausted", why)
            continue
        if item_budget_spent(state, item.id, item_budget):
            spent = spent_on_item(state, item.id)
            why = f"budget: its runs cost ${spent:.2f} of [budget] per_item_usd ${item_budget:g}"
            commands += transition(item, "budget-spent", why) if block_on_budget else []
            continue
        if slots <= 0:
            continue
        slots -= 1
        commands.append(start_implementor(item, branch_prefix))
    return commands


def spent_on_item(state: EngineState, work_item_id: WorkItemId) -> float:
    """What every run for the item (implementors and reviewers, retries and refinements) has
    cost, in USD; a run that reported no cost counts nothing."""
    return sum(
        run.cost_usd or 0.0 for run in state.agent_runs.values() if run.work_item_id == work_item_id
    )


def spent_since(state: EngineState, since: datetime) -> float:
    """What the runs that ended at or after ``since`` cost, in USD."""
    return sum(
        run.cost_usd or 0.0
        for run in state.agent_runs.values()
        if run.ended_at is not None and run.ended_at >= since
    )


def item_budget_spent(state: EngineState, work_item_id: WorkItemId, budget: float | None) -> bool:
    return budget is not None and spent_on_item(state, work_item_id) >= budget


def _failed_at(state: EngineState, item: WorkItem) -> tuple[bool, float]:
    run = latest_implementor_run(state, item.id)
    if run is None or run.ended_at is None or not work_failure(run):
        return (False, 0.0)
    return (True, run.ended_at.timestamp())


def _eligible(state: EngineState, item: WorkItem) -> bool:
    if item.status == "pending":
        ready = blockers_resolved(state, item)
    else:
        ready = item.status == "needs-refinement"
    return ready and not has_run_in_flight(state, item.id)


def start_implementor(item: WorkItem, branch_prefix: str) -> StartAgent:
    return StartAgent(
        params=ImplementorStartParams(
            work_item_id=item.id, branch_name=branch_name(item, branch_prefix)
        )
    )


def revision_step(
    state: EngineState,
    item: WorkItem,
    revision: Revision,
    *,
    max_attempts: int,
    max_concurrent: Mapping[AgentRole, int],
    auto_merge: bool,
    merge_approved: bool,
    charge_baseline: bool = False,
    required: Required = "auto",
) -> list[EngineCommand]:
    """What a revision of ``item`` needs next: done, blocked, needs-refinement, a review, or a
    merge of an approved head (``merge_approved``, after a restart)."""
    current = revision_for(state, item)
    if revision.state == "merged":
        return transition(item, "revision-merged")
    if current is None or current.id != revision.id:
        return []  # an older revision of the item; the current one decides
    if revision.state == "closed":
        return transition(item, "revision-closed")
    if item.status == "in-review":
        if revision.pipeline.status == "failure" and not pipeline_acceptable(
            state, revision, charge_baseline
        ):
            return transition(item, "pipeline-failed")
        if needs_review(state, revision, max_attempts, charge_baseline) and free_slots(
            state, "reviewer", max_concurrent
        ):
            return [start_reviewer(item, revision)]
        return []
    if (
        item.status == "approved"
        and merge_approved
        and auto_merge
        and revision.reviewed_sha == revision.head_sha
        and (
            revision.pipeline.status == "success"
            or (revision.pipeline.status == "none" and untested_lands(state, required))
        )
    ):
        return [MergeRevision(work_item_id=item.id, revision_id=revision.id)]
    return []


# ``pipeline_required``: "auto", or always (True), or never (False).
Required = bool | Literal["auto"]


def untested_lands(state: EngineState, required: Required) -> bool:
    """Whether a head with no checks at all may land (``pipeline_required``): ``auto`` only
    while no pipeline has ever reported on the repository (once one has, no checks on a head
    means CI has not reported on it yet); ``True`` never; ``False`` always (CI that skips some
    changes, path filters)."""
    if required == "auto":
        return not state.pipelines_seen
    return not required


def inherited_failure(state: EngineState, revision: Revision) -> bool:
    """The revision's pipeline failed, but only in checks that fail on the default branch's head
    too (``EngineState.baseline``): not the revision's doing."""
    baseline, failed = state.baseline, revision.pipeline.failed_checks
    return (
        revision.pipeline.status == "failure"
        and baseline is not None
        and baseline.pipeline.status == "failure"
        and bool(failed)
        and set(failed) <= set(baseline.pipeline.failed_checks)
    )


def pipeline_acceptable(state: EngineState, revision: Revision, charge_baseline: bool) -> bool:
    """Green (or no CI); or, unless ``charge_baseline``, red only where the default branch is
    red too. Such a revision is reviewed and may be approved, never merged automatically."""
    if revision.pipeline.status in ("success", "none"):
        return True
    return not charge_baseline and inherited_failure(state, revision)


def needs_review(
    state: EngineState, revision: Revision, max_attempts: int, charge_baseline: bool = False
) -> bool:
    return (
        revision.state == "open"
        and pipeline_acceptable(state, revision, charge_baseline)
        and revision.reviewed_sha != revision.head_sha
        and not reviewer_in_flight(state, revision.id)
        and reviewer_failures(state, revision.id, revision.head_sha) < max_attempts
    )


def start_reviewer(item: WorkItem, revision: Revision) -> StartAgent:
    return StartAgent(
        params=ReviewerStartParams(work_item_id=item.id, revision_id=revision.id),
        subject_sha=revision.head_sha,
    )


def reviews_wanted(
    state: EngineState,
    *,
    max_attempts: int,
    max_concurrent: Mapping[AgentRole, int],
    charge_baseline: bool = False,
) -> list[EngineCommand]:
    """Reviewers for every in-review item whose head needs one, up to the free slots."""
    commands: list[EngineCommand] = []
    slots = free_slots(state, "reviewer", max_concurrent)
    for wid in ordered(state.work_items):
        item = state.work_items[wid]
        if slots <= 0:
            break
        if item.status != "in-review":
            continue
        revision = revision_for(state, item)
        if revision is not None and needs_review(state, revision, max_attempts, charge_baseline):
            commands.append(start_reviewer(item, revision))
            slots -= 1
    return commands


_NOT_IN_A_REF = re.compile(r"[^a-z0-9]+")


def branch_name(item: WorkItem, prefix: str = "cpe/") -> str:
    """``cpe/<id>-<slug>``: a valid git ref name whatever the id and title hold."""
    ident = _NOT_IN_A_REF.sub("-", item.id.lower()).strip("-") or "item"
    slug = _NOT_IN_A_REF.sub("-", item.title.lower()).strip("-")[:40].rstrip("-")
    return f"{prefix}{ident}-{slug}" if slug else f"{prefix}{ident}"

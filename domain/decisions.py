"""Decisions on when work waits: the circuit breaker's pause, a model outage, an account's
spent usage window, the retry backoffs of planners and implementors, and what runs have cost
(an item's budget, the daily one).

Each is a pure function of the state (and of ``now`` where a clock matters), so the engine,
``cpe status`` and the dashboard reach the same answer. The other decisions the handlers share
live by what they decide: ``domain.run_end`` (where an item goes when its run ends),
``domain.dispatch`` (which items start), ``domain.revisions`` (what a revision needs next).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta

from domain.commands import CancelAgent, EngineCommand
from domain.models import OUTAGE_CAUSES, AgentRun, EngineState, WorkItemId
from domain.selectors import active_runs, latest_implementor_run, planner_failures
from domain.signals import clock, window_name


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

"""Dispatch admission: whether an agent run may start now and, when it may not, why.

One rule, used everywhere a run's start is judged: the executor for each ``StartAgent``
(``admission``), the control socket for a person's retry and resume, and the dashboard's pause
banners (``dispatch_pauses``, the part of it a person can resume). The reasons, first found
first said:

1. a person's pause (``cpe pause``), until they resume it;
2. the breaker's pause (``breaker_pause``: runs failing under the agent, or the model API down)
   until it ends; past it, one probe run starts alone and its ending decides;
3. the daily budget, spent by the runs that ended today (in the budget's time zone), until the
   next midnight there;
4. the model account's quota (``quota_hold``), until its window resets;
5. the retry backoff of a failed item (``implementor_backoff``) or of a planner that failed on
   these spec versions (``planner_backoff``), unless a person asked for the run;
6. concurrency: one run per work item, one planner at a time, ``max_concurrent`` per role.

Each reason is data (what holds, until when) with its words (``words``), which the executor
puts in ``CommandRejected`` and the control socket in its refusal. Pure: the time, the runs
under way and the settings come in as arguments.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta, tzinfo
from typing import Literal

from domain.commands import StartAgent
from domain.decisions import (
    DispatchPause,
    PlannerBackoff,
    QuotaHold,
    RetryWait,
    breaker_pause,
    implementor_backoff,
    planner_backoff,
    quota_hold,
    spent_since,
)
from domain.models import (
    AgentRole,
    AgentStartParams,
    EngineState,
    ImplementorStartParams,
    PlannerStartParams,
    WorkItemId,
    item_ref,
)
from domain.requests import describe_pause

REASON_CHARS = 300  # of a failure's reason in a refusal's words, flattened to one line


@dataclass(frozen=True)
class BreakerRule:
    """The breaker's settings (``[breaker]``): ``failures`` infrastructure failures in a row
    pause dispatch ``initial`` seconds, doubling up to ``maximum``; live runs retrying the model
    API ``outage_after`` seconds with no answer pause it too."""

    failures: int = 3
    initial: float = 30
    maximum: float = 900
    outage_after: float = 15

    def pause(self, state: EngineState) -> DispatchPause | None:
        return breaker_pause(
            state,
            failures=self.failures,
            initial=self.initial,
            maximum=self.maximum,
            outage_after=self.outage_after,
        )


@dataclass(frozen=True)
class AdmissionSettings:
    """What admission is judged with: the breaker; a failed run's retry backoff (initial, max
    seconds); the daily budget (``per_day_usd``, 0: no limit) and the zone whose day it counts;
    the quota's ``margin`` and ``pause_at``; each role's model account (none named: "model")
    and its ``max_concurrent`` (none named: 1)."""

    breaker: BreakerRule = BreakerRule()
    retry_backoff: tuple[float, float] = (30, 900)
    per_day_usd: float = 0
    day_zone: tzinfo = UTC
    quota_margin: float = 60
    quota_pause_at: float | None = None
    accounts: Mapping[AgentRole, str] = field(default_factory=dict)
    max_concurrent: Mapping[AgentRole, int] = field(default_factory=dict)


# ---------------------------------------------------------------------------- the reasons


@dataclass(frozen=True)
class PersonPaused:
    """A person paused dispatch (``cpe pause``) ``since``, saying ``reason``."""

    reason: str
    since: datetime | None
    words: str
    until: None = None


@dataclass(frozen=True)
class BreakerPaused:
    """The breaker holds dispatch until ``pause.until`` (``pause.outage``: the model API is
    down, else runs failed under the agent)."""

    pause: DispatchPause

    @property
    def until(self) -> datetime:
        return self.pause.until

    @property
    def words(self) -> str:
        return f"dispatch paused: {_flat(self.pause.reason)}; next try at {_when(self.until)}"


@dataclass(frozen=True)
class ProbeUnderWay:
    """Past the breaker's pause, a run is under way: it is the probe, alone."""

    until: None = None
    words: str = "dispatch paused: a probe run is under way"


@dataclass(frozen=True)
class BudgetSpent:
    """The runs that ended today cost ``spent`` of ``per_day`` USD; the next day begins
    ``until``."""

    spent: float
    per_day: float
    until: datetime

    @property
    def words(self) -> str:
        return (
            f"dispatch paused: the daily budget is spent (${self.spent:.2f} of "
            f"${self.per_day:.2f}); next try at {self.until.isoformat(timespec='minutes')}"
        )


@dataclass(frozen=True)
class QuotaHeld:
    """The run's model account is held (``hold.account``, until ``hold.until``)."""

    hold: QuotaHold

    @property
    def until(self) -> datetime:
        return self.hold.until

    @property
    def words(self) -> str:
        return f"{self.hold.account}: {self.hold.reason}; runs start again at {_when(self.until)}"


@dataclass(frozen=True)
class ItemBackoff:
    """The item's last run failed: its next waits until ``wait.until``."""

    work_item_id: WorkItemId
    wait: RetryWait

    @property
    def until(self) -> datetime:
        return self.wait.until

    @property
    def words(self) -> str:
        return f"{item_ref(self.work_item_id)}: retry at {_when(self.until)}"


@dataclass(frozen=True)
class PlannerWaits:
    """The planner failed on these spec versions: its next run waits until ``wait.until``."""

    wait: PlannerBackoff

    @property
    def until(self) -> datetime:
        return self.wait.until

    @property
    def words(self) -> str:
        return (
            f"planner waits after {self.wait.failures} failed run(s); next try at "
            f"{_when(self.until)}"
        )


@dataclass(frozen=True)
class ConcurrencyFull:
    """No slot: a ``planner`` run is active (one at a time), a run of the same ``item`` is
    (``role`` its role), or ``active`` runs of ``role`` fill its ``limit`` (``slots``)."""

    kind: Literal["planner", "item", "slots"]
    role: AgentRole
    work_item_id: WorkItemId | None = None
    active: int = 0
    limit: int = 0
    until: None = None

    @property
    def words(self) -> str:
        if self.kind == "planner":
            return "a planner run is already active (one at a time)"
        if self.kind == "item":
            return f"a {self.role} run is already active for work item {self.work_item_id}"
        return f"{self.active} {self.role} runs are active (max_concurrent {self.limit})"


DispatchPaused = PersonPaused | BreakerPaused
Refusal = (
    PersonPaused
    | BreakerPaused
    | ProbeUnderWay
    | BudgetSpent
    | QuotaHeld
    | ItemBackoff
    | PlannerWaits
    | ConcurrencyFull
)


# ---------------------------------------------------------------------------- the rule


def admission(
    state: EngineState,
    now: datetime,
    settings: AdmissionSettings,
    start: StartAgent,
    active: Sequence[AgentStartParams] = (),
) -> Refusal | None:
    """Why the run ``start`` asks for may not start at ``now`` (the first reason, in the order
    above), or None when it may. ``active``: the runs under way (their start parameters), as
    the executor counts them (a run counts from its dispatch, before the state has it)."""
    params = start.params
    paused = dispatch_pauses(state, now, settings.breaker)
    if paused:
        return paused[0]
    if active and settings.breaker.pause(state) is not None:
        return ProbeUnderWay()  # past the pause (else it holds above): the probe runs alone
    return (
        budget_spent(state, now, settings)
        or _quota_held(state, now, settings, params.role)
        or backoff(state, now, settings, start)
        or concurrency_full(params, active, settings.max_concurrent.get(params.role, 1))
    )


def dispatch_pauses(
    state: EngineState, now: datetime, breaker: BreakerRule
) -> list[DispatchPaused]:
    """The pauses holding every run at ``now``, a person's before the breaker's: what a
    person's ``cpe resume`` lifts, and what the dashboard and ``cpe status`` show."""
    found: list[DispatchPaused] = []
    manual = state.manual_pause
    if manual is not None:
        words = f"dispatch paused {describe_pause(state)}"
        found.append(PersonPaused(manual.reason, manual.at, words))
    pause = breaker.pause(state)
    if pause is not None and now < pause.until:
        found.append(BreakerPaused(pause))
    return found


def budget_spent(
    state: EngineState, now: datetime, settings: AdmissionSettings
) -> BudgetSpent | None:
    """The daily budget, when the runs that ended today (in ``day_zone``) have spent it."""
    if not settings.per_day_usd:
        return None
    local = now.astimezone(settings.day_zone)
    midnight = local.replace(hour=0, minute=0, second=0, microsecond=0)
    spent = spent_since(state, midnight)
    if spent < settings.per_day_usd:
        return None
    tomorrow = midnight + timedelta(days=1)  # wall-clock arithmetic: the next midnight
    return BudgetSpent(spent, settings.per_day_usd, tomorrow)


def _quota_held(
    state: EngineState, now: datetime, settings: AdmissionSettings, role: AgentRole
) -> QuotaHeld | None:
    account = settings.accounts.get(role, "model")
    hold = quota_hold(
        state, account, now, margin=settings.quota_margin, pause_at=settings.quota_pause_at
    )
    return QuotaHeld(hold) if hold is not None else None


def backoff(
    state: EngineState, now: datetime, settings: AdmissionSettings, start: StartAgent
) -> ItemBackoff | PlannerWaits | None:
    """A failed item's or planner's retry backoff, while it lasts; a person's request does not
    wait."""
    params, (initial, maximum) = start.params, settings.retry_backoff
    if start.requested_by_user:
        return None
    if isinstance(params, ImplementorStartParams):
        retry = implementor_backoff(state, params.work_item_id, initial=initial, maximum=maximum)
        if retry is None or now >= retry.until:
            return None
        return ItemBackoff(params.work_item_id, retry)
    if params.role != "planner":
        return None
    wait = planner_backoff(state, start.spec_shas, initial=initial, maximum=maximum)
    if wait is None or now >= wait.until:
        return None
    return PlannerWaits(wait)


def concurrency_full(
    params: AgentStartParams, active: Sequence[AgentStartParams], limit: int
) -> ConcurrencyFull | None:
    """One run per work item, one planner at a time, ``limit`` runs of the role at once."""
    if isinstance(params, PlannerStartParams):
        if any(p.role == "planner" for p in active):
            return ConcurrencyFull("planner", "planner")
    else:
        for p in active:
            if not isinstance(p, PlannerStartParams) and p.work_item_id == params.work_item_id:
                return ConcurrencyFull("item", p.role, work_item_id=params.work_item_id)
    same_role = sum(1 for p in active if p.role == params.role)
    if same_role >= limit:
        return ConcurrencyFull("slots", params.role, active=same_role, limit=limit)
    return None


def _flat(reason: str) -> str:
    return " ".join(reason.split())[:REASON_CHARS]


def _when(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%d %H:%M:%S UTC")

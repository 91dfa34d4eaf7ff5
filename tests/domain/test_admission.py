"""Dispatch admission (``domain.admission``): each reason a run may not start, in its words, at
its boundaries, and which reason is said first when several hold."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

from hypothesis import given
from hypothesis import strategies as st

from domain.admission import (
    AdmissionSettings,
    BreakerPaused,
    BreakerRule,
    BudgetSpent,
    ConcurrencyFull,
    ItemBackoff,
    PersonPaused,
    PlannerWaits,
    ProbeUnderWay,
    QuotaHeld,
    admission,
    concurrency_full,
    dispatch_pauses,
)
from domain.commands import StartAgent
from domain.models import (
    AccountQuota,
    EngineState,
    ImplementorStartParams,
    InfrastructureStreak,
    ManualPause,
    PlannerStartParams,
    ReviewerStartParams,
    SessionId,
)
from tests.domain.builders import implementor_run, planner_run

NOW = datetime(2026, 11, 25, 10, 0, tzinfo=UTC)
SETTINGS = AdmissionSettings()
PLANNER = PlannerStartParams(session_id=SessionId("p"), spec_paths=("a.md",))
IMPLEMENTOR = ImplementorStartParams(session_id=SessionId("i"), work_item_id="1", branch_name="b")
REVIEWER = ReviewerStartParams(session_id=SessionId("r"), work_item_id="1", revision_id="r1")


def implementor(wid: str = "1", *, asked: bool = False) -> StartAgent:
    params = ImplementorStartParams(work_item_id=wid, branch_name=f"cpe/{wid}")
    return StartAgent(params=params, requested_by_user=asked)


def planner() -> StartAgent:
    return StartAgent(
        params=PlannerStartParams(spec_paths=("specs/a.md",)), spec_shas={"specs/a.md": "a1"}
    )


def streak(count: int, last: datetime = NOW, reason: str = "API Error: refused") -> EngineState:
    return EngineState(
        infrastructure=InfrastructureStreak(count=count, last_at=last, last_reason=reason)
    )


def person(at: datetime | None = NOW, reason: str = "deploy freeze") -> ManualPause:
    return ManualPause(reason=reason, at=at)


def spent(usd: float, ended: datetime = NOW) -> EngineState:
    run = implementor_run("s1", "9", status="completed", settled=True, cost_usd=usd, ended_at=ended)
    return EngineState(agent_runs={run.session_id: run})


def failed_item(ended: datetime = NOW) -> EngineState:
    run = implementor_run("s1", "1", status="failed", ended_at=ended, failure_reason="red")
    return EngineState(agent_runs={"s1": run}, attempts={"1": 1})


def failed_planner(ended: datetime = NOW) -> EngineState:
    run = planner_run(
        "p0",
        {"specs/a.md": "a1"},
        status="failed",
        ended_at=ended,
        failure_reason="the plan did not validate",
        failure_class="work",
    )
    return EngineState(agent_runs={"p0": run})


def held(account: str = "model", until: datetime = NOW + timedelta(minutes=5)) -> EngineState:
    quota = AccountQuota(rejected_until=until, reason="the five-hour window is spent")
    return EngineState(quota={account: quota})


# ---------------------------------------------------------------------------- each reason


def test_nothing_holds_a_run_on_an_empty_state() -> None:
    assert admission(EngineState(), NOW, SETTINGS, implementor()) is None
    assert dispatch_pauses(EngineState(), NOW, BreakerRule()) == []


def test_a_persons_pause_holds_every_run_until_they_resume_it() -> None:
    paused = EngineState(manual_pause=person())
    refusal = admission(paused, NOW + timedelta(days=30), SETTINGS, implementor(asked=True))
    assert refusal == PersonPaused(
        "deploy freeze",
        NOW,
        "dispatch paused by a person since 2026-11-25 10:00:00 UTC: deploy freeze",
    )
    assert refusal.until is None


def test_the_breaker_holds_until_its_pause_ends_then_one_probe_runs_alone() -> None:
    paused = streak(3)  # the default breaker: 3 failures, then 30 s
    refusal = admission(paused, NOW, SETTINGS, implementor())
    assert isinstance(refusal, BreakerPaused)
    assert refusal.until == NOW + timedelta(seconds=30)
    assert (
        refusal.words == "dispatch paused: API Error: refused; next try at 2026-11-25 10:00:30 UTC"
    )
    # the boundary: held just before the end, free at it
    before_end = NOW + timedelta(seconds=30) - timedelta(microseconds=1)
    assert isinstance(admission(paused, before_end, SETTINGS, implementor()), BreakerPaused)
    at_end = NOW + timedelta(seconds=30)
    assert admission(paused, at_end, SETTINGS, implementor()) is None  # the probe
    assert admission(paused, at_end, SETTINGS, implementor("2"), [IMPLEMENTOR]) == ProbeUnderWay()
    assert ProbeUnderWay().words == "dispatch paused: a probe run is under way"
    # below the threshold: no pause, and runs under way hold nothing up
    two = AdmissionSettings(max_concurrent={"implementor": 2})
    assert admission(streak(2), NOW, two, implementor("2"), [IMPLEMENTOR]) is None


def test_the_breakers_words_are_one_line_and_bounded() -> None:
    refusal = admission(
        streak(3, reason="line one\n  line two" + "x" * 900), NOW, SETTINGS, planner()
    )
    assert isinstance(refusal, BreakerPaused)
    assert "\n" not in refusal.words
    assert refusal.words.startswith("dispatch paused: line one line two")
    assert len(refusal.words) < 400


def test_the_breakers_own_settings_decide_its_threshold_and_length() -> None:
    settings = AdmissionSettings(breaker=BreakerRule(failures=5, initial=60, maximum=120))
    assert admission(streak(4), NOW, settings, implementor()) is None
    refusal = admission(streak(5), NOW, settings, implementor())
    assert isinstance(refusal, BreakerPaused)
    assert refusal.until == NOW + timedelta(seconds=60)


def test_the_daily_budget_holds_until_the_next_midnight_of_its_zone() -> None:
    paris = AdmissionSettings(per_day_usd=10, day_zone=ZoneInfo("Europe/Paris"))
    now = datetime(2026, 11, 25, 21, 0, tzinfo=UTC)  # 22:00 in Paris
    refusal = admission(spent(12, now - timedelta(hours=1)), now, paris, implementor())
    assert refusal == BudgetSpent(
        12, 10, datetime(2026, 11, 26, 0, 0, tzinfo=ZoneInfo("Europe/Paris"))
    )
    assert refusal.words == (
        "dispatch paused: the daily budget is spent ($12.00 of $10.00); "
        "next try at 2026-11-26T00:00+01:00"
    )
    # spent yesterday (23:30 in Paris): today is free
    yesterday = spent(50, datetime(2026, 11, 24, 22, 30, tzinfo=UTC))
    assert admission(yesterday, now, paris, implementor()) is None
    # the boundary: just under the budget starts, exactly the budget holds
    assert admission(spent(9.99, now), now, paris, implementor()) is None
    assert isinstance(admission(spent(10, now), now, paris, implementor()), BudgetSpent)
    # 0: no limit
    assert admission(spent(1000, now), now, SETTINGS, implementor()) is None


def test_a_held_model_account_holds_the_runs_of_the_roles_on_it() -> None:
    settings = AdmissionSettings(accounts={"implementor": "anthropic", "planner": "openai"})
    state = held("anthropic")
    refusal = admission(state, NOW, settings, implementor())
    assert isinstance(refusal, QuotaHeld)
    assert refusal.until == NOW + timedelta(minutes=5, seconds=60)  # the reset and the margin
    assert refusal.words == (
        "anthropic: the five-hour window is spent; runs start again at 2026-11-25 10:06:00 UTC"
    )
    assert admission(state, NOW, settings, planner()) is None  # another account
    assert admission(held("model"), NOW, SETTINGS, planner()) is not None  # none named: "model"
    assert admission(state, refusal.until, settings, implementor()) is None


def test_a_failed_item_backs_off_unless_a_person_asks() -> None:
    state = failed_item()
    refusal = admission(state, NOW, SETTINGS, implementor("1"))
    assert isinstance(refusal, ItemBackoff)
    assert timedelta(seconds=30) <= refusal.until - NOW < timedelta(seconds=37.5)
    assert refusal.words.startswith("#1: retry at 2026-11-25 10:00:3")
    assert admission(state, NOW, SETTINGS, implementor("1", asked=True)) is None
    assert admission(state, refusal.until, SETTINGS, implementor("1")) is None
    assert admission(state, NOW, SETTINGS, implementor("2")) is None  # another item


def test_a_failed_planner_backs_off_on_the_same_spec_versions() -> None:
    refusal = admission(failed_planner(), NOW, SETTINGS, planner())
    assert isinstance(refusal, PlannerWaits)
    assert refusal.words == (
        "planner waits after 1 failed run(s); next try at 2026-11-25 10:00:30 UTC"
    )
    settings = AdmissionSettings(retry_backoff=(60, 600))
    slower = admission(failed_planner(), NOW, settings, planner())
    assert slower is not None
    assert slower.until == NOW + timedelta(seconds=60)
    assert admission(failed_planner(), NOW + timedelta(seconds=30), SETTINGS, planner()) is None


def test_concurrency_names_what_stands_in_the_way_word_for_word() -> None:
    assert concurrency_full(PLANNER, [], 1) is None
    planner_full = concurrency_full(PLANNER, [PLANNER], 5)
    assert planner_full is not None
    assert planner_full.words == "a planner run is already active (one at a time)"
    same_item = concurrency_full(REVIEWER, [PLANNER, IMPLEMENTOR], 5)
    assert same_item == ConcurrencyFull("item", "implementor", work_item_id="1")
    assert same_item.words == "a implementor run is already active for work item 1"
    other = ImplementorStartParams(work_item_id="2", branch_name="b2")
    assert concurrency_full(other, [PLANNER, IMPLEMENTOR], 2) is None
    slots = concurrency_full(other, [PLANNER, IMPLEMENTOR], 1)
    assert slots is not None
    assert slots.words == "1 implementor runs are active (max_concurrent 1)"


def test_admission_counts_slots_by_the_roles_max_concurrent_and_one_when_unnamed() -> None:
    other = implementor("2")
    assert admission(EngineState(), NOW, SETTINGS, other, [IMPLEMENTOR]) == ConcurrencyFull(
        "slots", "implementor", active=1, limit=1
    )
    two = AdmissionSettings(max_concurrent={"implementor": 2})
    assert admission(EngineState(), NOW, two, other, [IMPLEMENTOR]) is None


# ---------------------------------------------------------------------------- precedence


def test_each_reason_gives_way_to_the_one_before_it() -> None:
    """A person's pause, the breaker, the budget, the quota, the backoff, the concurrency: with
    every one holding, lifting them in that order shows each in turn."""
    settings = AdmissionSettings(per_day_usd=1)
    run = implementor_run(
        "s1", "1", status="failed", ended_at=NOW, failure_reason="red", cost_usd=5
    )
    base = EngineState(
        agent_runs={"s1": run},
        attempts={"1": 1},
        quota=held().quota,
        infrastructure=streak(3).infrastructure,
        manual_pause=person(),
    )
    active = [ImplementorStartParams(session_id=SessionId("x"), work_item_id="1", branch_name="b")]
    seen = []
    state = base
    for lift in (
        {"manual_pause": None},
        {"infrastructure": InfrastructureStreak()},
        {"agent_runs": {}, "attempts": {}},  # the budget and the backoff go together
    ):
        refusal = admission(state, NOW, settings, implementor("1"), active)
        seen.append(type(refusal))
        state = state.model_copy(update=lift)
    seen.append(type(admission(state, NOW, settings, implementor("1"), active)))
    state = state.model_copy(update={"quota": {}})
    seen.append(type(admission(state, NOW, settings, implementor("1"), active)))
    assert seen == [PersonPaused, BreakerPaused, BudgetSpent, QuotaHeld, ConcurrencyFull]
    # the backoff comes after the quota and before the concurrency
    backoff_only = failed_item()
    refusal = admission(backoff_only, NOW, SETTINGS, implementor("1"), active)
    assert isinstance(refusal, ItemBackoff)
    with_quota = backoff_only.model_copy(update={"quota": held().quota})
    assert isinstance(admission(with_quota, NOW, SETTINGS, implementor("1"), active), QuotaHeld)


def test_dispatch_pauses_lists_a_persons_before_the_breakers() -> None:
    state = streak(3).model_copy(update={"manual_pause": person(at=None, reason="")})
    pauses = dispatch_pauses(state, NOW, BreakerRule())
    assert [type(p) for p in pauses] == [PersonPaused, BreakerPaused]
    assert pauses[0].words == "dispatch paused by a person"
    assert dispatch_pauses(state, NOW + timedelta(seconds=30), BreakerRule()) == pauses[:1]


@given(
    failures=st.integers(min_value=0, max_value=12),
    seconds=st.integers(min_value=-60, max_value=2_000),
    paused=st.booleans(),
)
def test_admission_refuses_exactly_while_a_dispatch_pause_holds(
    failures: int, seconds: int, paused: bool
) -> None:
    """With no budget, quota, backoff or run under way, a run starts exactly when nothing in
    ``dispatch_pauses`` holds: the control socket's and the executor's answers agree."""
    state = streak(failures).model_copy(update={"manual_pause": person() if paused else None})
    now = NOW + timedelta(seconds=seconds)
    pauses = dispatch_pauses(state, now, BreakerRule())
    refusal = admission(state, now, SETTINGS, implementor())
    assert (refusal is None) == (not pauses)
    if pauses:
        assert refusal == pauses[0]
        assert refusal.words.startswith("dispatch paused")

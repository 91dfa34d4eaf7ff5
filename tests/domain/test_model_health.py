"""The model's health as live runs report it (``AgentSignalled``): an outage pauses dispatch and
frees the slots of the runs retrying it, no attempt spent; a spent usage window holds its
account until the reset. Driven through the real reducer and handlers, as the engine does."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from domain.commands import CancelAgent
from domain.decisions import DispatchPause, breaker_pause, model_outage, quota_hold
from domain.events import (
    AgentFailed,
    AgentSignalled,
    EngineEvent,
    UserResumedDispatch,
)
from domain.handlers.options import HandlerOptions
from domain.models import EngineState, QuotaWindow, RunSignal
from domain.run_end import run_end_trigger
from domain.signals import describe_signal
from tests.domain.builders import implemented, implementor_run, item, state
from tests.domain.builders import step as step_with

T0 = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
OPTIONS = HandlerOptions(outage_after=15)


def step(before: EngineState, event: EngineEvent) -> tuple[EngineState, list[object]]:
    return step_with(before, event, OPTIONS)


def retrying(sid: str, at: float, cause: str = "unreachable", attempt: int = 1) -> AgentSignalled:
    signal = RunSignal.model_validate(
        {"kind": "retrying", "cause": cause, "attempt": attempt, "max_attempts": 10,
         "retry_in": 8, "detail": "no answer: connection refused, reset or timed out"}
    )  # fmt: skip
    return AgentSignalled(session_id=sid, signal=signal, at=T0 + timedelta(seconds=at))


def two_running() -> EngineState:
    return state(
        item("1", "in-progress"),
        item("2", "in-progress"),
        runs=[implementor_run("s1", "1"), implementor_run("s2", "2")],
    )


def pause(after: EngineState) -> DispatchPause | None:
    return breaker_pause(after, failures=3, initial=30, maximum=900, outage_after=15)


def test_a_retrying_run_shows_why_in_words() -> None:
    after, _ = step(two_running(), retrying("s1", 0, attempt=4))
    signal = after.agent_runs["s1"].signal
    assert signal is not None
    assert describe_signal(signal) == (
        "retrying: the model API is unreachable (no answer: connection refused, reset or timed "
        "out), retry 4/10 in 8 s"
    )


def test_retries_for_less_than_outage_after_neither_pause_nor_cancel() -> None:
    before = two_running()
    for at in (0, 1, 3, 7):
        before, commands = step(before, retrying("s1", at))
        assert commands == []
    assert before.model_health.retries == 4
    assert model_outage(before, after=15) is None
    assert pause(before) is None


def test_an_outage_pauses_dispatch_and_cancels_the_retrying_runs_as_infrastructure() -> None:
    before, _ = step(two_running(), retrying("s1", 0))
    before, _ = step(before, retrying("s2", 1))
    after, commands = step(before, retrying("s1", 16))
    cancels = [c for c in commands if isinstance(c, CancelAgent)]
    assert cancels == commands
    assert [(c.session_id, c.infrastructure) for c in cancels] == [("s1", True), ("s2", True)]
    assert "the model API is unreachable" in cancels[0].reason
    paused = breaker_pause(after, failures=3, initial=30, maximum=900, outage_after=15)
    assert paused is not None
    assert paused.outage
    assert paused.until == T0 + timedelta(seconds=16 + 30)


def test_a_rate_limited_run_is_not_an_outage_and_is_left_to_wait() -> None:
    before = two_running()
    for at in (0, 10, 20):
        before, commands = step(before, retrying("s1", at, cause="rate_limit"))
        assert commands == []
    assert before.model_health.retries == 0
    assert model_outage(before, after=15) is None


def test_cancel_retrying_false_leaves_the_runs_to_retry_but_still_pauses() -> None:
    options = HandlerOptions(outage_after=15, cancel_retrying=False)
    before, _ = step_with(two_running(), retrying("s1", 0), options)
    after, commands = step_with(before, retrying("s1", 20), options)
    assert commands == []
    assert pause(after) is not None


def test_a_run_cancelled_for_the_outage_spends_no_attempt_and_is_run_again() -> None:
    before, _ = step(two_running(), retrying("s1", 0))
    before, _ = step(before, retrying("s1", 20))
    cancelled = AgentFailed(
        session_id="s1",
        role="implementor",
        kind="cancelled",
        reason="cancelled to free its slot while the model API is down: …",
        failure_class="infrastructure",
        at=T0 + timedelta(seconds=21),
    )
    after, _ = step(before, cancelled)
    assert after.attempts.get("1", 0) == 0
    assert after.infrastructure.count == 1
    assert run_end_trigger(after, after.work_items["1"], 3) == "run-interrupted"


def test_the_pause_doubles_with_each_run_the_outage_failed() -> None:
    before, _ = step(two_running(), retrying("s1", 0))
    before, _ = step(before, retrying("s1", 20))
    for n, sid in enumerate(("s1", "s2"), start=1):
        failed = AgentFailed(
            session_id=sid, role="implementor", kind="cancelled", reason="down",
            failure_class="infrastructure", at=T0 + timedelta(seconds=20 + n),
        )  # fmt: skip
        before, _ = step(before, failed)
    paused = pause(before)
    assert paused is not None
    assert paused.until == T0 + timedelta(seconds=20 + 60)


def test_the_model_answering_again_ends_the_outage() -> None:
    before, _ = step(two_running(), retrying("s1", 0))
    before, _ = step(before, retrying("s1", 20))
    recovered = AgentSignalled(
        session_id="s1", signal=RunSignal(kind="recovered"), at=T0 + timedelta(seconds=25)
    )
    after, commands = step(before, recovered)
    assert commands == []
    assert after.model_health.retries == 0
    assert after.agent_runs["s1"].signal is None
    assert pause(after) is None


def test_a_completed_run_ends_the_outage_too() -> None:
    before, _ = step(two_running(), retrying("s1", 0))
    before, _ = step(before, retrying("s1", 20))
    after, _ = step(before, implemented("s2"))
    assert after.model_health.retries == 0


def test_a_spent_window_holds_its_account_until_the_reset_plus_the_margin() -> None:
    reset = T0 + timedelta(minutes=2)
    window = QuotaWindow(name="five_hour", utilization=1.0, resets_at=reset, status="rejected")
    signal = RunSignal(
        kind="rate_limited", account="anthropic", until=reset, window="five_hour",
        windows=(window,),
    )  # fmt: skip
    after, commands = step(two_running(), AgentSignalled(session_id="s1", signal=signal, at=T0))
    assert commands == []
    hold = quota_hold(after, "anthropic", T0, margin=60, pause_at=None)
    assert hold is not None
    assert hold.until == reset + timedelta(seconds=60)
    assert "5-hour spent until 2026-11-29 12:02 UTC" in hold.reason
    assert quota_hold(after, "openai", T0, margin=60, pause_at=None) is None
    assert quota_hold(after, "anthropic", hold.until, margin=60, pause_at=None) is None
    resumed, _ = step(after, UserResumedDispatch(at=T0))
    assert quota_hold(resumed, "anthropic", T0, margin=60, pause_at=None) is None


def test_headroom_is_kept_per_window_and_pause_at_holds_a_window_used_that_much() -> None:
    reset = T0 + timedelta(hours=3)
    five = QuotaWindow(name="five_hour", utilization=0.92, resets_at=reset, status="allowed")
    seven = QuotaWindow(name="seven_day", utilization=0.2, resets_at=reset, status="allowed")
    before = two_running()
    for window in (five, seven):
        signal = RunSignal(kind="quota", account="anthropic", windows=(window,))
        before, _ = step(before, AgentSignalled(session_id="s1", signal=signal, at=T0))
    assert before.quota["anthropic"].windows == (five, seven)
    assert quota_hold(before, "anthropic", T0, margin=0, pause_at=None) is None
    hold = quota_hold(before, "anthropic", T0, margin=0, pause_at=0.9)
    assert hold is not None
    assert hold.until == reset
    assert "5-hour window 92% used (pause_at 90%)" in hold.reason


def test_a_signal_of_a_run_that_ended_changes_only_its_account() -> None:
    ended = state(item("1", "in-review"), runs=[implementor_run("s1", "1", status="completed")])
    signal = RunSignal(
        kind="quota", account="openai", windows=(QuotaWindow(name="primary", utilization=0.5),)
    )
    after, _ = step(ended, AgentSignalled(session_id="s1", signal=signal, at=T0))
    assert after.quota["openai"].windows[0].utilization == 0.5
    after, _ = step(after, retrying("s1", 1))
    assert after.agent_runs["s1"].signal is None
    assert after.model_health.retries == 0

"""A person's requests (``domain.requests``): what each becomes against the state, what is
refused and why, and what the events do once the engine processes them."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from domain.commands import CancelAgent, StartAgent, TransitionStatus
from domain.decisions import dispatch_pause
from domain.events import (
    AgentFailed,
    DispatchDue,
    UserCancelledRun,
    UserPausedDispatch,
    UserRequestedImplementorRun,
    UserResumedDispatch,
    UserTransitionedStatus,
)
from domain.models import AccountQuota, EngineState, InfrastructureStreak, ManualPause, MergeWait
from domain.requests import (
    REQUEST_ADAPTER,
    Accepted,
    Cancel,
    Pause,
    RequestRefused,
    Resume,
    Retry,
    SetStatus,
    UserRequest,
    accept,
)
from domain.state import apply_event
from tests.domain.builders import implementor_run, item, reviewer_run, revision, state, step

AT = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
SLOTS = {"planner": 1, "implementor": 2, "reviewer": 2}


def judge(
    request: UserRequest, before: EngineState, paused: str | None = None, **kw: Any
) -> Accepted:
    return accept(
        request, before, at=AT, dispatch_paused=paused, max_concurrent=kw.get("slots", SLOTS)
    )


def refused(request: UserRequest, before: EngineState, **kw: Any) -> RequestRefused:
    with pytest.raises(RequestRefused) as caught:
        judge(request, before, **kw)
    assert "\n" not in str(caught.value)
    return caught.value


# ---------------------------------------------------------------------------- retry


@pytest.mark.parametrize("status", ["blocked", "needs-refinement", "pending"])
def test_a_retry_of_a_waiting_item_becomes_a_user_requested_run(status: str) -> None:
    accepted = judge(Retry(work_item_id="1"), state(item("1", status), attempts={"1": 3}))
    assert accepted.events == (UserRequestedImplementorRun(work_item_id="1", at=AT),)
    assert "attempt(s) start again" in accepted.message


@pytest.mark.parametrize("status", ["in-progress", "in-review", "done"])
def test_a_retry_of_an_item_past_implementation_is_refused_naming_the_statuses(
    status: str,
) -> None:
    refusal = refused(Retry(work_item_id="1"), state(item("1", status)))
    assert refusal.kind == "conflict"
    assert f"#1 is {status}" in str(refusal)
    assert "blocked, needs-refinement, pending (or approved" in str(refusal)


def test_a_retry_of_an_approved_item_asks_for_its_held_merge_again_at_once() -> None:
    held = state(item("1", "approved", linked_revision="r1")).model_copy(
        update={
            "merge_waits": {
                "r1": MergeWait(work_item_id="1", head_sha="h1", reason="checkout in the way")
            }
        }
    )
    accepted = judge(Retry(work_item_id="1"), held)
    assert accepted.events == (DispatchDue(at=AT),)
    assert "its merge is asked again now (held: checkout in the way)" in accepted.message


def test_a_retry_of_an_unknown_item_is_refused_as_not_found() -> None:
    refusal = refused(Retry(work_item_id="9"), state(item("1"), item("2")))
    assert refusal.kind == "not-found"
    assert "unknown work item '9'" in str(refusal)
    assert "#1, #2" in str(refusal)


def test_a_retry_while_dispatch_is_paused_is_refused_saying_how_to_resume() -> None:
    refusal = refused(Retry(work_item_id="1"), state(item("1", "blocked")), paused="paused")
    assert refusal.kind == "conflict"
    assert "cpe resume" in str(refusal)


def test_a_retry_without_a_free_implementor_slot_is_refused() -> None:
    before = state(
        item("1", "blocked"),
        item("2", "in-progress"),
        item("3", "in-progress"),
        runs=[implementor_run("s2", "2"), implementor_run("s3", "3")],
    )
    refusal = refused(Retry(work_item_id="1"), before)
    assert "no implementor slot is free (2 of 2" in str(refusal)


def test_a_retry_of_an_item_with_a_run_in_flight_is_refused() -> None:
    before = state(item("1", "pending"), runs=[implementor_run("s1", "1")])
    assert "has a run in flight: implementor s1" in str(refused(Retry(work_item_id="1"), before))


def test_a_user_requested_run_gives_the_item_its_attempts_back_and_starts_it() -> None:
    before = state(item("1", "blocked"), attempts={"1": 3})
    after, commands = step(before, UserRequestedImplementorRun(work_item_id="1", at=AT))
    assert after.attempts["1"] == 0
    assert [type(c) for c in commands] == [StartAgent]


# ---------------------------------------------------------------------------- cancel


def test_a_cancel_becomes_a_user_cancel_of_each_active_run_of_the_item() -> None:
    before = state(
        item("1", "in-review"),
        runs=[implementor_run("s1", "1", status="completed"), reviewer_run("v1", "1")],
    )
    accepted = judge(Cancel(work_item_id="1"), before)
    assert accepted.events == (UserCancelledRun(session_id="v1", at=AT),)
    assert "reviewer run v1" in accepted.message


def test_a_cancel_of_an_item_without_an_active_run_is_refused() -> None:
    refusal = refused(Cancel(work_item_id="1"), state(item("1", "blocked")))
    assert refusal.kind == "conflict"
    assert "#1 has no active agent run (it is blocked)" in str(refusal)


def test_a_cancelled_review_blocks_its_item_and_is_not_started_again() -> None:
    before = state(
        item("1", "in-review"),
        revisions=[revision("r1", "1", head="h1")],
        runs=[reviewer_run("v1", "1", head="h1")],
    )
    cancelling, commands = step(before, UserCancelledRun(session_id="v1"))
    assert commands == [CancelAgent(session_id="v1")]
    ended = AgentFailed(session_id="v1", role="reviewer", kind="cancelled", reason="by a person")
    _, commands = step(cancelling, ended)
    assert commands == [TransitionStatus(work_item_id="1", to="blocked")]


def test_a_review_cancelled_by_shutdown_is_started_again() -> None:
    before = state(
        item("1", "in-review"),
        revisions=[revision("r1", "1", head="h1")],
        runs=[reviewer_run("v1", "1", head="h1")],
    )
    ended = AgentFailed(session_id="v1", role="reviewer", kind="cancelled", reason="shutdown")
    _, commands = step(before, ended)
    assert [type(c) for c in commands] == [StartAgent]


# ---------------------------------------------------------------------------- set-status


def test_a_status_change_becomes_a_user_transition() -> None:
    accepted = judge(SetStatus(work_item_id="1", to="pending"), state(item("1", "blocked")))
    assert accepted.events == (UserTransitionedStatus(work_item_id="1", to="pending", at=AT),)
    assert "blocked → pending" in accepted.message


def test_a_status_change_to_the_current_status_is_accepted_with_no_event() -> None:
    accepted = judge(SetStatus(work_item_id="1", to="blocked"), state(item("1", "blocked")))
    assert accepted.events == ()
    assert "already blocked" in accepted.message


def test_a_status_change_of_an_item_with_a_run_in_flight_is_refused_saying_cancel_first() -> None:
    before = state(item("1", "in-progress"), runs=[implementor_run("s1", "1")])
    refusal = refused(SetStatus(work_item_id="1", to="pending"), before)
    assert "cpe work cancel 1" in str(refusal)


def test_an_illegal_status_does_not_parse_as_a_request() -> None:
    with pytest.raises(ValueError, match=r"set-status\.to"):
        REQUEST_ADAPTER.validate_python({"op": "set-status", "work_item_id": "1", "to": "gone"})


# ---------------------------------------------------------------------------- pause and resume


def test_a_pause_is_journaled_state_that_holds_until_a_resume() -> None:
    accepted = judge(Pause(reason="deploy freeze"), state())
    [event] = accepted.events
    paused = apply_event(state(), event)
    assert paused.manual_pause == ManualPause(reason="deploy freeze", at=AT)
    assert "already paused (by a person since 2026-01-02 03:04:05 UTC: deploy freeze)" in (
        judge(Pause(), paused).message
    )
    assert apply_event(paused, UserResumedDispatch(at=AT)).manual_pause is None


def test_a_resume_also_ends_the_breakers_pause() -> None:
    streak = InfrastructureStreak(count=5, last_at=AT, last_reason="401")
    before = state().model_copy(update={"infrastructure": streak})
    assert dispatch_pause(before, threshold=3, initial=30, maximum=900) is not None
    [event] = judge(Resume(), before, paused="breaker").events
    after = apply_event(before, event)
    assert dispatch_pause(after, threshold=3, initial=30, maximum=900) is None


def test_a_resume_ends_a_spent_usage_window_a_person_added_capacity_for() -> None:
    spent = AccountQuota(rejected_until=AT + timedelta(hours=1), reason="5-hour spent")
    before = state().model_copy(update={"quota": {"anthropic": spent}})
    [event] = judge(Resume(), before).events
    after = apply_event(before, event)
    assert after.quota["anthropic"].rejected_until is None
    past = AccountQuota(rejected_until=AT - timedelta(minutes=1))
    ended = state().model_copy(update={"quota": {"anthropic": past}})
    assert judge(Resume(), ended).events == ()


def test_a_resume_of_an_engine_that_is_not_paused_does_nothing() -> None:
    accepted = judge(Resume(), state())
    assert (accepted.events, accepted.message) == ((), "dispatch is not paused: nothing to resume")


def test_a_resume_wakes_what_waited_for_dispatch() -> None:
    before = state(item("1", "pending")).model_copy(
        update={"manual_pause": ManualPause(reason="x", at=AT)}
    )
    after, commands = step(before, UserResumedDispatch(at=AT))
    assert after.manual_pause is None
    assert [type(c) for c in commands] == [StartAgent]


def test_the_pause_events_round_trip_through_json() -> None:
    for event in (UserPausedDispatch(reason="r", at=AT), UserResumedDispatch(at=AT)):
        assert type(event).model_validate_json(event.model_dump_json()) == event


# ---------------------------------------------------------------------------- word for word


def test_a_retry_says_what_it_requests_and_whether_attempts_start_again() -> None:
    fresh = judge(Retry(work_item_id="1"), state(item("1", "pending", title="T")))
    assert fresh.message == "#1 'T': an implementor run is requested (pending → in-progress)"
    spent = judge(
        Retry(work_item_id="1"), state(item("1", "blocked", title="T"), attempts={"1": 3})
    )
    assert spent.message == (
        "#1 'T': an implementor run is requested (blocked → in-progress); its 3 attempt(s) "
        "start again from zero"
    )


def test_each_refusal_of_a_retry_is_a_conflict_saying_what_would_be_accepted() -> None:
    in_flight = refused(
        Retry(work_item_id="1"), state(item("1", "pending"), runs=[implementor_run("s1", "1")])
    )
    assert (in_flight.kind, str(in_flight)) == (
        "conflict",
        "#1 has a run in flight: implementor s1 (running)",
    )
    paused = refused(Retry(work_item_id="1"), state(item("1", "blocked")), paused="held")
    assert (paused.kind, str(paused)) == (
        "conflict",
        "held; resume dispatch (cpe resume) to retry #1",
    )
    busy = state(item("1", "blocked"), item("2", "in-progress"), runs=[implementor_run("s2", "2")])
    full = refused(Retry(work_item_id="1"), busy, slots={"implementor": 1})
    assert (full.kind, str(full)) == (
        "conflict",
        "no implementor slot is free (1 of 1 running, [workflow] max_concurrent); retry #1 when "
        "one ends",
    )


def test_a_retry_takes_the_last_free_slot_and_one_slot_when_none_is_configured() -> None:
    busy = state(item("1", "blocked"), item("2", "in-progress"), runs=[implementor_run("s2", "2")])
    assert judge(Retry(work_item_id="1"), busy, slots={"implementor": 2}).events
    assert "1 of 1 running" in str(refused(Retry(work_item_id="1"), busy, slots={}))
    assert judge(Retry(work_item_id="1"), state(item("1", "blocked")), slots={}).events


def test_a_pause_and_a_resume_say_what_they_do() -> None:
    pause = judge(Pause(reason="  deploy \n freeze "), state())
    assert pause.events == (UserPausedDispatch(reason="deploy freeze", at=AT),)
    assert pause.message == (
        "dispatch paused: no agent run starts until cpe resume; runs under way go on"
    )
    resumed = judge(Resume(), state(), paused="breaker")
    assert (resumed.events, resumed.message) == (
        (UserResumedDispatch(at=AT),),
        "dispatch resumed",
    )
    paused = apply_event(state(), pause.events[0])
    assert judge(Pause(), paused).events == ()

"""Where an item goes when its run ends, tested on their own: why it moves, in words for the
log; its way out of in-progress; why an active run is cancelled."""

from __future__ import annotations

from typing import Any

import pytest

from domain.run_end import explain_transition, run_end_trigger, why_cancel
from tests.domain.builders import implementor_run, item, planner_run, reviewer_run, revision, state

# ---------------------------------------------------------------------------- why, in the log


def test_a_block_the_implementor_asked_for_says_so() -> None:
    before = state(
        item("1", "in-progress"),
        runs=[implementor_run("s1", status="completed", outcome="blocked", settled=True)],
        attempts={"1": 1},
    )
    assert explain_transition(before, "1", "blocked") == (
        "#1 in-progress → blocked: the implementor reported it cannot proceed; "
        "last run: outcome blocked"
    )


def test_a_cancelled_run_blocks_or_returns_the_item_saying_which() -> None:
    runs = [implementor_run("s1", status="cancelled", failure_reason="a person  asked\n again")]
    before = state(item("1", "in-progress"), runs=runs, attempts={"1": 2})
    assert explain_transition(before, "1", "blocked") == (
        "#1 in-progress → blocked: its run was cancelled; last run: a person asked again"
    )
    assert explain_transition(before, "1", "pending") == (
        "#1 in-progress → pending: its run was interrupted; it will be run again; "
        "last run: a person asked again"
    )


def test_a_run_with_no_reason_is_named_by_its_status_and_a_long_reason_is_cut() -> None:
    bare = state(item("1", "in-progress"), runs=[implementor_run("s1", status="timed-out")])
    assert explain_transition(bare, "1", "pending") == (
        "#1 in-progress → pending: attempt 0 failed; it will be run again; last run: timed-out"
    )
    long = state(
        item("1", "in-progress"),
        runs=[implementor_run("s1", status="failed", failure_reason="x" * 400)],
    )
    assert explain_transition(long, "1", "pending").endswith("last run: " + "x" * 300)


def test_only_a_move_out_of_in_progress_after_a_run_is_explained() -> None:
    failed = [implementor_run("s1", status="failed", failure_reason="boom")]
    assert explain_transition(state(item("1", "pending"), runs=failed), "1", "blocked") == (
        "#1 pending → blocked"
    )
    assert explain_transition(state(item("1", "in-progress")), "1", "pending") == (
        "#1 in-progress → pending"
    )
    in_review = state(item("1", "in-progress"), runs=failed)
    assert explain_transition(in_review, "1", "in-review") == "#1 in-progress → in-review"
    assert explain_transition(state(), "9", "done") == "#9 unknown → done"


def test_a_status_the_item_has_already_is_no_change() -> None:
    assert explain_transition(state(item("1", "done")), "1", "done") == "#1 already done"
    # not "attempt 0 failed; it will be run again": the workflow's in-progress row says the
    # status again while the failed run's pending is on its way
    failed = [implementor_run("s1", status="failed", failure_reason="boom", settled=True)]
    again = state(item("1", "in-progress"), runs=failed)
    assert explain_transition(again, "1", "in-progress") == "#1 already in-progress"


# ---------------------------------------------------------------------------- a run's end


@pytest.mark.parametrize(
    ("fields", "attempts", "trigger"),
    [
        ({"status": "cancelled", "cancel_requested": True}, 0, "user-cancelled"),
        ({"status": "cancelled", "blocked_by_at_start": ()}, 0, "blocker-added"),
        ({"status": "cancelled", "blocked_by_at_start": ("2",)}, 0, "run-interrupted"),
        ({"status": "failed", "failure_class": "infrastructure"}, 0, "infrastructure-failed"),
        ({"status": "timed-out", "failure_class": "infrastructure"}, 1, "run-failed"),
        ({"status": "failed", "failure_class": "work"}, 1, "run-failed"),
        ({"status": "timed-out"}, 3, "attempts-exhausted"),
        ({"status": "completed", "outcome": "blocked", "settled": True}, 1, "outcome-blocked"),
        (
            {"status": "completed", "outcome": "completed", "settled": True,
             "delivered_revision": "r1"},
            1,
            "revision-delivered",
        ),
        ({"status": "completed", "outcome": "validation-failure", "settled": True}, 3,
         "attempts-exhausted"),
    ],
)  # fmt: skip
def test_an_items_way_out_of_in_progress_is_judged_by_its_latest_run(
    fields: dict[str, Any], attempts: int, trigger: str
) -> None:
    blocked = item("1", "in-progress", blocked_by=("2",))
    before = state(
        blocked, item("2"), runs=[implementor_run("s1", "1", **fields)], attempts={"1": attempts}
    )
    assert run_end_trigger(before, blocked, max_attempts=3) == trigger


def test_an_item_with_no_run_or_a_run_in_flight_is_interrupted_or_waits() -> None:
    lone = item("1", "in-progress")
    assert run_end_trigger(state(lone), lone, max_attempts=3) == "run-interrupted"
    busy = state(lone, runs=[implementor_run("s1", "1")])
    assert run_end_trigger(busy, lone, max_attempts=3) is None


# ------------------------------------------------------------------ why a run is cancelled


def test_why_an_implementor_run_no_longer_serves_anything() -> None:
    run = implementor_run("s1", "1", blocked_by_at_start=("2",))
    assert why_cancel(state(item("1", "in-progress"), runs=[run]), run) is None
    assert why_cancel(state(runs=[run]), run) == "the work item was deleted"
    for status in ("blocked", "done", "in-review", "approved"):
        at = state(item("1", status), runs=[run])
        assert why_cancel(at, run) == f"set to {status} by a person"
    gaining = state(
        item("1", "in-progress", blocked_by=("2", "3", "4")),
        item("2"),
        item("3"),
        item("4", "done"),
    )
    assert why_cancel(gaining, run) == "it gained an open blocker: #3"
    two = state(item("1", "in-progress", blocked_by=("3", "5")), item("3"))
    assert why_cancel(two, run) == "it gained an open blocker: #3, #5"  # #5: unknown, not done


def test_a_run_that_ended_was_cancelled_already_or_plans_is_never_cancelled_again() -> None:
    gone = state()
    assert why_cancel(gone, implementor_run("s1", "1", status="completed")) is None
    assert why_cancel(gone, implementor_run("s1", "1", cancel_requested=True)) is None
    assert why_cancel(gone, planner_run("p1")) is None
    assert why_cancel(gone, implementor_run("s1", "1", status="requested")) == (
        "the work item was deleted"
    )


def test_why_a_reviewer_run_no_longer_serves_anything() -> None:
    run = reviewer_run("v1", "1", "r1")
    reviewing = item("1", "in-review", linked_revision="r1")
    assert why_cancel(state(reviewing, revisions=[revision("r1", "1")], runs=[run]), run) is None
    assert why_cancel(state(reviewing, runs=[run]), run) == "revision r1 was deleted"
    merged = state(reviewing, revisions=[revision("r1", "1", state="merged")], runs=[run])
    assert why_cancel(merged, run) == "revision r1 was merged by hand"
    for status in ("blocked", "done"):
        held = state(item("1", status), revisions=[revision("r1", "1")], runs=[run])
        assert why_cancel(held, run) == f"set to {status} by a person"
    sent_back = state(item("1", "needs-refinement"), revisions=[revision("r1", "1")], runs=[run])
    assert why_cancel(sent_back, run) is None

"""Decisions the handlers and the executor share, tested on their own: the planner's backoff,
and why an item moves, in words for the log."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from domain.commands import StartAgent, TransitionStatus
from domain.decisions import PlannerBackoff, planner_backoff
from domain.dispatch import branch_name, dispatch_items
from domain.models import AgentRun, EngineState
from domain.revisions import reviews_wanted
from domain.run_end import explain_transition, run_end_trigger, why_cancel
from tests.domain.builders import (
    implementor_run,
    item,
    planner_run,
    reviewer_run,
    revision,
    spec,
    state,
)

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def failed_on(sid: str, shas: dict[str, str], minutes: int, **fields: Any) -> AgentRun:
    return planner_run(
        sid,
        shas,
        status=str(fields.pop("status", "failed")),
        ended_at=T0 + timedelta(minutes=minutes),
        failure_reason=fields.pop("failure_reason", f"{sid} broke"),
        **fields,
    )


def backoff(
    *runs: AgentRun, shas: dict[str, str] | None = None, initial: float = 30, maximum: float = 900
) -> PlannerBackoff | None:
    wanted = shas if shas is not None else {"specs/a.md": "a1"}
    current = state(specs=[spec(p, sha) for p, sha in wanted.items()], runs=runs)
    return planner_backoff(current, wanted, initial=initial, maximum=maximum)


def test_no_failure_on_the_batch_means_no_backoff() -> None:
    assert backoff() is None
    # failures on another version, or another spec, are not this batch's
    assert backoff(failed_on("p1", {"specs/a.md": "a0"}, 1)) is None
    assert backoff(failed_on("p1", {"specs/b.md": "b1"}, 1)) is None


def test_one_failure_waits_the_initial_delay_after_it_ended_with_its_reason() -> None:
    found = backoff(failed_on("p1", {"specs/a.md": "a1"}, 5, failure_reason="no plan"))
    assert found == PlannerBackoff(
        until=T0 + timedelta(minutes=5, seconds=30), reason="no plan", failures=1
    )


def test_each_further_failure_doubles_the_delay_from_the_last_one_up_to_the_cap() -> None:
    runs = [failed_on(f"p{n}", {"specs/a.md": "a1"}, n) for n in range(1, 4)]
    found = backoff(*runs)
    assert found is not None
    assert (found.failures, found.reason) == (3, "p3 broke")
    assert found.until == T0 + timedelta(minutes=3, seconds=120)  # 30, 60, 120
    capped = backoff(*runs, maximum=50)
    assert capped is not None
    assert capped.until == T0 + timedelta(minutes=3, seconds=50)


def test_the_last_failure_is_the_one_that_ended_last_whatever_its_order() -> None:
    late = failed_on("p-late", {"specs/a.md": "a1"}, 9, status="timed-out", failure_reason=None)
    early = failed_on("p-early", {"specs/a.md": "a1"}, 2)
    found = backoff(late, early)
    assert found is not None
    assert found.until == T0 + timedelta(minutes=9, seconds=60)
    assert found.reason == "timed-out"  # no reason recorded: its status says it


def test_infrastructure_failures_and_cancelled_runs_do_not_count() -> None:
    """Those are the breaker's business (or nobody's): no backoff of the planner for them."""
    infra = failed_on("p1", {"specs/a.md": "a1"}, 1, failure_class="infrastructure")
    cancelled = failed_on("p2", {"specs/a.md": "a1"}, 2, status="cancelled")
    assert backoff(infra, cancelled) is None
    work = failed_on("p3", {"specs/a.md": "a1"}, 3)
    found = backoff(infra, cancelled, work)
    assert found is not None
    assert (found.failures, found.until) == (1, T0 + timedelta(minutes=3, seconds=30))


def test_a_batch_waits_for_its_most_failed_spec() -> None:
    shas = {"specs/a.md": "a1", "specs/b.md": "b1"}
    runs = [
        failed_on("p1", {"specs/a.md": "a1"}, 1),
        failed_on("p2", {"specs/a.md": "a1", "specs/b.md": "b1"}, 2),
    ]
    found = backoff(*runs, shas=shas)
    assert found is not None
    assert (found.failures, found.until) == (2, T0 + timedelta(minutes=2, seconds=60))


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


@pytest.mark.parametrize(
    ("wid", "title", "branch"),
    [
        ("GH-12", "Fix: the Parser!", "cpe/gh-12-fix-the-parser"),
        ("--7--", "  Trailing dash -", "cpe/7-trailing-dash"),
        ("!!!", "x", "cpe/item-x"),  # nothing of the id fits a ref
        ("3", "!!!", "cpe/3"),  # nothing of the title does
        ("3", " lead", "cpe/3-lead"),
        ("Ab", "Tab\there", "cpe/ab-tab-here"),
        # cut at 40 characters, then no dash left at the end
        ("3", "a" * 39 + "-b" + "c" * 5, "cpe/3-" + "a" * 39),
        ("3", "b" * 45, "cpe/3-" + "b" * 40),
    ],
)
def test_a_branch_name_is_a_ref_of_the_id_and_the_titles_first_40_characters(
    wid: str, title: str, branch: str
) -> None:
    assert branch_name(item(wid, title=title)) == branch
    assert branch_name(item(wid, title=title), "team/") == "team/" + branch.removeprefix("cpe/")


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


# ---------------------------------------------------------------------------- reviewers wanted


def test_reviewers_are_started_for_in_review_items_up_to_the_free_slots() -> None:
    waiting = [item(str(n), "in-review", linked_revision=f"r{n}") for n in (2, 3, 4)]
    before = state(
        item("1", "in-progress"),
        *waiting,
        revisions=[revision(f"r{n}", str(n)) for n in (2, 3, 4)],
    )

    def wanted(slots: int) -> list[str]:
        commands = reviews_wanted(before, max_attempts=3, max_concurrent={"reviewer": slots})
        return [c.params.work_item_id for c in commands]  # type: ignore[attr-defined]

    assert wanted(0) == []
    assert wanted(1) == ["2"]  # an item not in review first does not stop the walk
    assert wanted(2) == ["2", "3"]
    assert wanted(5) == ["2", "3", "4"]
    busy = before.model_copy(update={"agent_runs": {"v9": reviewer_run("v9", "2", "r2")}})
    assert [
        c.params.work_item_id  # type: ignore[attr-defined]
        for c in reviews_wanted(busy, max_attempts=3, max_concurrent={"reviewer": 2})
    ] == ["3"]


# ---------------------------------------------------------------------------- dispatch


def dispatched(before: EngineState, slots: int = 2, **options: Any) -> list[str]:
    """What dispatch_items decides over every item: ``start #N`` or ``#N → status: why``."""
    said = []
    for command in dispatch_items(
        before,
        before.work_items.values(),
        max_attempts=3,
        max_concurrent={"implementor": slots},
        branch_prefix="cpe/",
        **options,
    ):
        if isinstance(command, StartAgent):
            said.append(f"start #{command.params.work_item_id}")  # type: ignore[union-attr]
        else:
            assert isinstance(command, TransitionStatus)
            said.append(f"#{command.work_item_id} → {command.to}: {command.reason}")
    return said


def test_dispatch_blocks_exhausted_and_spent_items_and_starts_the_rest_up_to_the_slots() -> None:
    costly = implementor_run("s4", "4", status="failed", cost_usd=30.0, settled=True)
    before = state(
        item("1", "pending"),
        item("2", "pending"),
        item("3", "pending"),
        item("4", "pending"),
        item("5", "in-progress"),
        item("6", "pending"),
        runs=[costly],
        attempts={"2": 3, "4": 1},
    )
    assert dispatched(before, slots=2, item_budget=25.0) == [
        "start #1",
        "#2 → blocked: attempts exhausted (3 of 3)",
        "start #3",
        "#4 → blocked: budget: its runs cost $30.00 of [budget] per_item_usd $25",
    ]
    # an item past the slots is not blocked for it; a budget that only holds leaves it waiting
    assert dispatched(before, slots=1, item_budget=25.0, block_on_budget=False) == [
        "start #1",
        "#2 → blocked: attempts exhausted (3 of 3)",
    ]
    assert dispatched(before, slots=0) == ["#2 → blocked: attempts exhausted (3 of 3)"]


def test_dispatch_takes_work_under_review_first_and_failed_items_last() -> None:
    failed = implementor_run(
        "s1", "1", status="failed", ended_at=T0, failure_reason="x", settled=True
    )
    before = state(
        item("1", "pending"), item("2", "pending"), item("3", "needs-refinement"), runs=[failed],
        attempts={"1": 1},
    )  # fmt: skip
    assert dispatched(before, slots=3) == ["start #3", "start #2", "start #1"]
    assert dispatched(before, slots=1) == ["start #3"]


def test_an_item_named_twice_is_started_once() -> None:
    before = state(item("1", "pending"))
    commands = dispatch_items(
        before,
        [before.work_items["1"], before.work_items["1"]],
        max_attempts=3,
        max_concurrent={"implementor": 2},
        branch_prefix="cpe/",
    )
    assert len(commands) == 1

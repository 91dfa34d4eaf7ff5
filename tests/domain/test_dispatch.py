"""Which items are dispatched, tested on their own: eligibility, order and slots; the branch a
run works on."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from domain.commands import ApplyPlan, StartAgent, TransitionStatus
from domain.dispatch import branch_name, dispatch_items
from domain.events import CommandFailed, PlanApplied, StatusTransitioned, WorkItemChanged
from domain.models import EngineState
from domain.results import PlannerResult
from tests.domain.builders import implementor_run, item, planner_run, state, step

T0 = datetime(2026, 1, 1, tzinfo=UTC)

# ---------------------------------------------------------------------------- branch names


@pytest.mark.parametrize(
    ("wid", "title", "branch"),
    [
        ("GH-12", "Fix: the Parser!", "cpe/GH-12-fix-the-parser"),  # a key keeps its case
        ("--7--", "  Trailing dash -", "cpe/7-trailing-dash"),
        ("!!!", "x", "cpe/item-x"),  # nothing of the id fits a ref
        ("3", "!!!", "cpe/3"),  # nothing of the title does
        ("3", " lead", "cpe/3-lead"),
        ("Ab", "Tab\there", "cpe/Ab-tab-here"),
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


def test_while_a_plan_is_being_applied_its_new_items_wait_and_its_end_dispatches_them() -> None:
    """A tracker writes an issue and its blocking links apart (Jira, Linear), and a link may
    wait out a rate limit: an item a plan made is listed before its blocker is. Until the plan
    is applied, items never run wait; an item already worked on does not."""
    applying = planner_run("p1", status="completed", settled=False)
    retried = implementor_run("s1", "1", status="failed", settled=True)
    before = state(
        item("1", "pending"), item("2", "pending"), runs=[applying, retried], attempts={"1": 1}
    )
    assert dispatched(before) == ["start #1"]
    after, commands = step(before, PlanApplied(session_id="p1", spec_shas={"specs/a.md": "b1"}))
    started = [c.params.work_item_id for c in commands if isinstance(c, StartAgent)]
    assert "2" in started
    assert dispatched(after) == ["start #1", "start #2"]


def test_a_plan_whose_writing_failed_lets_what_it_held_start() -> None:
    applying = planner_run("p1", status="completed", settled=False)
    before = state(item("2", "pending"), runs=[applying])
    assert dispatched(before) == []
    command = ApplyPlan(session_id="p1", result=PlannerResult(), spec_shas={})
    _, commands = step(before, CommandFailed(command=command, error="ProviderError: 503"))
    assert [c.params.work_item_id for c in commands if isinstance(c, StartAgent)] == ["2"]


def test_a_plans_blocker_holds_its_item_until_the_tracker_shows_it() -> None:
    """The blocker's link waited out a rate limit longer than a poll: the item was listed with
    no blocker, and when the plan was applied it must not run before its blocker is done."""
    applying = planner_run("p1", status="completed", settled=False)
    before = state(item("ENG-2", "pending"), item("ENG-3", "pending"), runs=[applying])
    applied = PlanApplied(
        session_id="p1",
        spec_shas={"specs/a.md": "b1"},
        created_ids=("ENG-2", "ENG-3"),
        blockers={"ENG-2": (), "ENG-3": ("ENG-2",)},
    )
    after, commands = step(before, applied)
    assert [c.params.work_item_id for c in commands if isinstance(c, StartAgent)] == ["ENG-2"]
    assert after.planned_blockers == {"ENG-3": ("ENG-2",)}
    # The poll shows the link: the tracker's word from then on.
    linked = WorkItemChanged(work_item=item("ENG-3", "pending", blocked_by=("ENG-2",)))
    seen, _ = step(after, linked)
    assert seen.planned_blockers == {}
    # Or the blocker is done before any poll shows the link: its dependents are looked at.
    done = StatusTransitioned(work_item_id="ENG-2", to="done")
    finished, commands = step(after, done)
    assert [c.params.work_item_id for c in commands if isinstance(c, StartAgent)] == ["ENG-3"]
    assert finished.planned_blockers == {"ENG-3": ("ENG-2",)}  # until a poll shows ENG-3

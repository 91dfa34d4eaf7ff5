"""Every row of the workflow table, driven through the real handlers.

Each scenario builds the state an item is in, delivers the event that is the row's trigger, and
the handlers must emit exactly the row's transition for that item.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from domain.commands import TransitionStatus
from domain.events import (
    AgentFailed,
    EngineEvent,
    LandingRefused,
    ReviewPosted,
    RevisionChanged,
    RevisionCreated,
    RevisionMerged,
    WorkItemChanged,
)
from domain.handlers.options import HandlerOptions
from domain.models import EngineState, ImplementorStartParams, LandingTest, SentBack
from domain.run_end import explain_transition
from domain.workflow import (
    ALLOWED_TRANSITIONS,
    TRIGGERS,
    WORKFLOW,
    next_status,
    render_table,
)
from tests.domain.builders import (
    implemented,
    implementor_run,
    item,
    requested,
    reviewer_run,
    revision,
    state,
    step,
)

Scenario = Callable[[], tuple[EngineState, EngineEvent]]
OPTIONS = HandlerOptions(max_attempts=3, item_budget_usd=5, auto_merge=True, max_landing_rounds=2)


def _requested_from(status: str) -> tuple[EngineState, EngineEvent]:
    params = ImplementorStartParams(work_item_id="1", branch_name="cpe/1-x")
    return state(item("1", status)), requested(params, sid="s1")


def _failed(attempts_before: int, kind: str = "failed", failure_class: str = "work", **run: object):
    def scenario() -> tuple[EngineState, EngineEvent]:
        before = state(
            item("1", "in-progress"),
            runs=[implementor_run("s1", **run)],
            attempts={"1": attempts_before},
        )
        event = AgentFailed.model_validate(
            {
                "session_id": "s1",
                "role": "implementor",
                "kind": kind,
                "reason": "boom",
                "failure_class": failure_class,
            }
        )
        return before, event

    return scenario


def _revision_event(status: str, **rev: object) -> tuple[EngineState, EngineEvent]:
    before = state(
        item("1", status, linked_revision="r1"), revisions=[revision("r1", reviewed_sha="h0")]
    )
    return before, RevisionChanged(revision=revision("r1", **rev))


def _posted(verdict: str) -> tuple[EngineState, EngineEvent]:
    before = state(item("1", "in-review", linked_revision="r1"), revisions=[revision("r1")])
    event = ReviewPosted.model_validate({"revision_id": "r1", "head_sha": "h1", "verdict": verdict})
    return before, event


def _delivered() -> tuple[EngineState, EngineEvent]:
    run = implementor_run("s1", status="completed", outcome="completed")
    before = state(item("1", "in-progress"), runs=[run], attempts={"1": 1})
    event = RevisionCreated.model_validate(
        {"session_id": "s1", "work_item_id": "1", "revision": revision("r1", pipeline="pending")}
    )
    return before, event


def _outcome_blocked() -> tuple[EngineState, EngineEvent]:
    before = state(item("1", "in-progress"), runs=[implementor_run("s1")])
    return before, implemented("s1", outcome="blocked", patch=None)


def _interrupted() -> tuple[EngineState, EngineEvent]:
    return state(), WorkItemChanged(work_item=item("1", "in-progress"))


def _blocker_added() -> tuple[EngineState, EngineEvent]:
    """The run was cancelled because #1 gained the open blocker #2; it has now ended."""
    run = implementor_run("s1")
    before = state(item("1", "in-progress", blocked_by=("2",)), item("2", "pending"), runs=[run])
    event = AgentFailed.model_validate(
        {"session_id": "s1", "role": "implementor", "kind": "cancelled", "reason": "gained #2"}
    )
    return before, event


def _budget_spent_on_sight(status: str) -> Scenario:
    """The item's runs cost $6 with a $5 item budget (OPTIONS): no further run, blocked."""

    def scenario() -> tuple[EngineState, EngineEvent]:
        spent = implementor_run("s1", status="completed", settled=True, cost_usd=6.0)
        return state(runs=[spent]), WorkItemChanged(work_item=item("1", status))

    return scenario


def _exhausted_on_sight(status: str) -> Scenario:
    def scenario() -> tuple[EngineState, EngineEvent]:
        return state(attempts={"1": 3}), WorkItemChanged(work_item=item("1", status))

    return scenario


def _review_cancelled() -> tuple[EngineState, EngineEvent]:
    run = reviewer_run("v1", "1", head="h1", cancel_requested=True)
    before = state(
        item("1", "in-review", linked_revision="r1"), revisions=[revision("r1")], runs=[run]
    )
    event = AgentFailed.model_validate(
        {"session_id": "v1", "role": "reviewer", "kind": "cancelled", "reason": "by a person"}
    )
    return before, event


def _merged_event() -> tuple[EngineState, EngineEvent]:
    before = state(
        item("1", "approved", linked_revision="r1"), revisions=[revision("r1", reviewed_sha="h1")]
    )
    return before, RevisionMerged.model_validate({"revision_id": "r1"})


def _conflict(status: str, rounds_before: int = 0) -> Scenario:
    """The merge queue's update (approved) or the run's revision write (in-progress) was
    refused: the revision conflicts with the default branch in app.py."""

    def scenario() -> tuple[EngineState, EngineEvent]:
        if status == "approved":
            before = state(
                item("1", "approved", linked_revision="r1"),
                revisions=[revision("r1", reviewed_sha="h1")],
            )
            refused = {"revision_id": "r1"}
        else:
            run = implementor_run("s1", status="completed", outcome="completed")
            before = state(item("1", "in-progress"), runs=[run], attempts={"1": 1})
            refused = {"session_id": "s1"}
        if rounds_before:
            back = SentBack(problem="conflict", reason="earlier", rounds=rounds_before)
            before = before.model_copy(update={"sent_back": {"1": back}})
        event = LandingRefused.model_validate(
            {"work_item_id": "1", "kind": "conflict", "reason": "conflicts in app.py",
             "files": ["app.py"], **refused}
        )  # fmt: skip
        return before, event

    return scenario


def _failed_merged() -> tuple[EngineState, EngineEvent]:
    """The revision, green on its own head h1, fails merged with the default branch (h2)."""
    test = LandingTest(
        work_item_id="1", approved_sha="h1", base_sha="b1", tested_sha="h2", heads=("h1", "h2")
    )
    tested = revision("r1", head="h2", reviewed_sha="h1", pipeline="pending")
    before = state(item("1", "approved", linked_revision="r1"), revisions=[tested])
    before = before.model_copy(update={"landing": {"r1": test}})
    failed = revision("r1", head="h2", reviewed_sha="h1", pipeline="failure")
    return before, RevisionChanged(revision=failed)


SCENARIOS: dict[str, Scenario] = {
    "approved--landing-conflict--needs-refinement": _conflict("approved"),
    "approved--landing-failed--needs-refinement": _failed_merged,
    "approved--landing-rounds-exhausted--blocked": _conflict("approved", rounds_before=2),
    "in-progress--patch-conflict--needs-refinement": _conflict("in-progress"),
    "in-progress--landing-rounds-exhausted--blocked": _conflict("in-progress", rounds_before=2),
    "pending--implementor-requested--in-progress": lambda: _requested_from("pending"),
    "needs-refinement--implementor-requested--in-progress": lambda: _requested_from(
        "needs-refinement"
    ),
    "blocked--implementor-requested--in-progress": lambda: _requested_from("blocked"),
    "in-progress--implementor-requested--in-progress": lambda: _requested_from("in-progress"),
    "in-progress--revision-delivered--in-review": _delivered,
    "in-progress--outcome-blocked--blocked": _outcome_blocked,
    "in-progress--run-failed--pending": _failed(0),
    # the last attempt was spent, yet it is not blocked: this failure was not the work's
    "in-progress--infrastructure-failed--pending": _failed(2, failure_class="infrastructure"),
    "in-progress--attempts-exhausted--blocked": _failed(2),
    "in-progress--run-interrupted--pending": _interrupted,
    "in-progress--user-cancelled--blocked": _failed(0, "cancelled", cancel_requested=True),
    "in-progress--blocker-added--pending": _blocker_added,
    "pending--budget-spent--blocked": _budget_spent_on_sight("pending"),
    "needs-refinement--budget-spent--blocked": _budget_spent_on_sight("needs-refinement"),
    "in-review--user-cancelled--blocked": _review_cancelled,
    "in-review--pipeline-failed--needs-refinement": lambda: _revision_event(
        "in-review", pipeline="failure"
    ),
    "in-review--review-approved--approved": lambda: _posted("approve"),
    "in-review--review-needs-changes--needs-refinement": lambda: _posted("needs-changes"),
    "pending--attempts-exhausted--blocked": _exhausted_on_sight("pending"),
    "needs-refinement--attempts-exhausted--blocked": _exhausted_on_sight("needs-refinement"),
    "in-review--revision-merged--done": lambda: _revision_event("in-review", state="merged"),
    "approved--revision-merged--done": _merged_event,
    "needs-refinement--revision-merged--done": lambda: _revision_event(
        "needs-refinement", state="merged"
    ),
    "in-review--revision-closed--blocked": lambda: _revision_event("in-review", state="closed"),
    "approved--revision-closed--blocked": lambda: _revision_event("approved", state="closed"),
    "needs-refinement--revision-closed--blocked": lambda: _revision_event(
        "needs-refinement", state="closed"
    ),
}


def test_every_workflow_row_has_a_scenario() -> None:
    assert set(SCENARIOS) == {row.name for row in WORKFLOW}


@pytest.mark.parametrize("row", WORKFLOW, ids=lambda row: row.name)
def test_workflow_row(row) -> None:
    before, event = SCENARIOS[row.name]()
    after, commands = step(before, event, OPTIONS)
    assert after.work_items["1"].status == row.source
    transitions = [c for c in commands if isinstance(c, TransitionStatus)]
    assert [(c.work_item_id, c.to) for c in transitions] == [("1", row.target)]


def test_next_status_has_no_row_for_a_trigger_from_the_wrong_status() -> None:
    assert next_status("done", "revision-merged") is None
    assert next_status("pending", "review-approved") is None
    assert next_status("blocked", "run-failed") is None


def test_done_is_final_for_the_engine() -> None:
    assert not [pair for pair in ALLOWED_TRANSITIONS if pair[0] == "done"]


def test_blocked_is_left_only_by_a_user_requested_run() -> None:
    assert [row.trigger for row in WORKFLOW if row.source == "blocked"] == ["implementor-requested"]


def test_the_table_has_one_row_per_status_and_trigger() -> None:
    keys = [(row.source, row.trigger) for row in WORKFLOW]
    assert len(keys) == len(set(keys))


def test_rendered_table_lists_every_row() -> None:
    table = render_table()
    for row in WORKFLOW:
        assert f"| {row.source} | {row.trigger} | {row.target} |" in table


def test_a_trigger_without_a_row_emits_no_transition() -> None:
    # A pipeline failure on an item that is only approved does not move it: no such row.
    before = state(item("1", "done", linked_revision="r1"), revisions=[revision("r1")])
    _, commands = step(before, RevisionChanged(revision=revision("r1", pipeline="failure")))
    assert commands == []


def test_every_trigger_is_used_by_a_row() -> None:
    assert {row.trigger for row in WORKFLOW} == set(TRIGGERS)


# ---------------------------------------------------------------------------- why, in the log


def test_a_transition_to_blocked_after_the_last_attempt_says_so_with_the_last_failure() -> None:
    before = state(
        item("1", "in-progress"),
        runs=[implementor_run("s1", status="failed", failure_reason="authentication refused")],
        attempts={"1": 3},
    )
    text = explain_transition(before, "1", "blocked")
    assert text == (
        "#1 in-progress → blocked: attempts exhausted (3 runs); last run: authentication refused"
    )


def test_a_retry_after_a_failed_attempt_says_which_attempt_and_why() -> None:
    before = state(
        item("1", "in-progress"),
        runs=[implementor_run("s1", status="timed-out", failure_reason="exceeded 1800s")],
        attempts={"1": 1},
    )
    assert explain_transition(before, "1", "pending") == (
        "#1 in-progress → pending: attempt 1 failed; it will be run again; last run: exceeded 1800s"
    )


def test_a_transition_with_a_run_in_flight_names_only_the_move() -> None:
    before = state(item("1", "pending"), runs=[implementor_run("s1", status="running")])
    assert explain_transition(before, "1", "in-progress") == "#1 pending → in-progress"

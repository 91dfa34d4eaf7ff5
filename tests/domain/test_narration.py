"""The engine's decisions in words (``domain.narration``): one line for each thing a person
follows, nothing for the rest."""

from __future__ import annotations

from domain.commands import TransitionStatus
from domain.events import (
    AgentFailed,
    AgentStarted,
    CommandFailed,
    EngineEvent,
    PlanApplied,
    ReviewPosted,
    RevisionChanged,
    RevisionCreated,
    RevisionMerged,
    StatusTransitioned,
    UserPausedDispatch,
    UserTransitionedStatus,
    WorkItemChanged,
)
from domain.models import EngineState, ImplementorStartParams
from domain.narration import Narrator, narrate
from domain.state import apply_event
from tests.domain.builders import (
    implemented,
    implementor_run,
    item,
    requested,
    reviewer_run,
    revision,
    state,
)


def say(before: EngineState, event: EngineEvent) -> list[str]:
    return narrate(event, before, apply_event(before, event))


def test_a_dispatch_names_the_item_the_attempt_and_the_session() -> None:
    before = state(item("3", title="Greeting"), attempts={"3": 1})
    params = ImplementorStartParams(work_item_id="3", branch_name="cpe/3-greeting")
    assert say(before, requested(params, sid="implementor-1")) == [
        "#3 'Greeting': implementor dispatched, attempt 2 (implementor-1)"
    ]


def test_a_completed_run_says_its_outcome_and_cost() -> None:
    before = state(item("3", "in-progress"), runs=[implementor_run("s1", "3")])
    event = implemented("s1").model_copy(update={"cost_usd": 0.0123})
    assert say(before, event) == ["#3: implementor s1 completed: completed, $0.0123"]


def test_a_failure_says_its_kind_and_reason_and_whether_it_was_under_the_agent() -> None:
    before = state(item("3", "in-progress"), runs=[implementor_run("s1", "3")])
    event = AgentFailed(
        session_id="s1",
        role="implementor",
        kind="failed",
        reason="401 refused\n  twice",
        failure_class="infrastructure",
    )
    assert say(before, event) == ["#3: implementor s1 failed under the agent: 401 refused twice"]


def test_a_status_change_gives_its_reason() -> None:
    run = implementor_run("s1", "3", status="failed", failure_reason="boom", settled=True)
    before = state(item("3", "in-progress"), runs=[run], attempts={"3": 3})
    [line] = say(before, StatusTransitioned(work_item_id="3", to="blocked"))
    assert line.startswith("#3 in-progress → blocked: attempts exhausted (3 runs)")


def test_a_status_change_out_of_review_says_whether_the_pipeline_or_the_review_sent_it() -> None:
    red = state(
        item("3", "in-review", linked_revision="r1"),
        revisions=[revision("r1", "3", pipeline="failure")],
    )
    [line] = say(red, StatusTransitioned(work_item_id="3", to="needs-refinement"))
    assert "CI failed" in line
    green = state(item("3", "in-review", linked_revision="r1"), revisions=[revision("r1", "3")])
    [line] = say(green, StatusTransitioned(work_item_id="3", to="needs-refinement"))
    assert "the reviewer asked for changes" in line


def test_revisions_pipelines_reviews_and_merges_are_told() -> None:
    before = state(item("3", "in-progress"))
    created = RevisionCreated(work_item_id="3", revision=revision("r1", "3", pipeline="pending"))
    assert say(before, created) == ["#3 'Item 3': revision r1 created (branch cpe/3-x, head h1)"]
    after = apply_event(before, created)
    green = RevisionChanged(revision=revision("r1", "3", pipeline="success"))
    assert say(after, green) == ["#3: revision r1 pipeline success at h1"]
    posted = ReviewPosted(revision_id="r1", head_sha="h1", verdict="approve")
    assert say(after, posted) == ["#3: review posted on revision r1 (h1): approve"]
    assert say(after, RevisionMerged(revision_id="r1", merge_sha="m1")) == [
        "#3: revision r1 merged as m1"
    ]


def test_a_plan_a_pause_and_a_failed_write_are_told() -> None:
    assert say(state(), PlanApplied(spec_shas={})) == ["plan applied: nothing new to create"]
    assert say(state(), UserPausedDispatch(reason="freeze")) == [
        "dispatch paused by a person: freeze"
    ]
    failed = CommandFailed(command=TransitionStatus(work_item_id="3", to="done"), error="409")
    assert say(state(), failed) == ["a write failed: TransitionStatus for #3: 409"]


def test_what_decides_nothing_says_nothing() -> None:
    before = state(item("3", "in-review"), runs=[reviewer_run("v1", "3", status="requested")])
    assert say(before, AgentStarted(session_id="v1")) == []
    assert say(before, WorkItemChanged(work_item=item("3", "in-review"))) == []


def test_a_status_a_person_set_is_told_as_theirs() -> None:
    narrator = Narrator()
    before = state(item("3", "pending"))
    asked = UserTransitionedStatus(work_item_id="3", to="blocked")
    assert narrator(asked, before, before) == ["#3: a person set the status to blocked"]
    [line] = narrator(StatusTransitioned(work_item_id="3", to="blocked"), before, before)
    assert line == "#3 pending → blocked: set by a person"

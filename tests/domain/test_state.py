"""apply_event: what each event records, and that it never mutates its input."""

from __future__ import annotations

import copy
from datetime import UTC, datetime

import pytest

from domain.commands import ApplyPlan, PostReview
from domain.events import (
    AgentFailed,
    AgentStarted,
    BaselineChanged,
    BaselineRemoved,
    CommandFailed,
    CommandRejected,
    MergeWaiting,
    PlanApplied,
    ReviewPosted,
    RevisionChanged,
    RevisionCreated,
    RevisionMerged,
    RevisionRemoved,
    SpecChanged,
    SpecRemoved,
    StatusTransitioned,
    WorkItemChanged,
    WorkItemRemoved,
    event_to_json,
    parse_event,
    parse_event_json,
)
from domain.models import (
    Baseline,
    EngineState,
    ImplementorStartParams,
    InfrastructureStreak,
    Pipeline,
    RevisionId,
    WorkItemId,
)
from domain.results import AgentReview, PlannerResult
from domain.selectors import natural_key, ordered
from domain.state import apply_event
from tests.domain.builders import (
    implemented,
    implementor_run,
    item,
    planner_run,
    requested,
    reviewed,
    reviewer_run,
    revision,
    spec,
    state,
)


def _events_over_a_full_state() -> list[object]:
    return [
        WorkItemChanged(work_item=item("1", "done")),
        WorkItemRemoved.model_validate({"work_item_id": "2"}),
        RevisionChanged(revision=revision("r1", head="h9")),
        RevisionRemoved.model_validate({"revision_id": "r1"}),
        SpecChanged(spec=spec("specs/a.md", "new")),
        SpecRemoved(path="specs/a.md"),
        requested(ImplementorStartParams(work_item_id="2", branch_name="b"), sid="s7"),
        AgentStarted.model_validate({"session_id": "s1", "log_file_path": "/tmp/x.log"}),
        implemented("s1"),
        reviewed("v1"),
        AgentFailed.model_validate(
            {"session_id": "s1", "role": "implementor", "kind": "failed", "reason": "x"}
        ),
        PlanApplied.model_validate({"session_id": "p1", "spec_shas": {"specs/a.md": "b1"}}),
        RevisionCreated.model_validate(
            {"session_id": "s1", "work_item_id": "1", "revision": revision("r2")}
        ),
        ReviewPosted.model_validate({"revision_id": "r1", "head_sha": "h1", "verdict": "approve"}),
        RevisionMerged.model_validate({"revision_id": "r1"}),
        MergeWaiting.model_validate(
            {"work_item_id": "1", "revision_id": "r1", "head_sha": "h1", "reason": "checks"}
        ),
        StatusTransitioned.model_validate({"work_item_id": "1", "to": "approved"}),
    ]


def _full_state() -> EngineState:
    return state(
        item("1", "in-progress"),
        item("2", "pending", blocked_by=["1"]),
        revisions=[revision("r1")],
        runs=[implementor_run("s1", status="requested"), reviewer_run("v1"), planner_run("p1")],
        specs=[spec()],
        attempts={"1": 1},
    )


@pytest.mark.parametrize("event", _events_over_a_full_state(), ids=lambda e: e.type)
def test_apply_event_never_mutates_its_input(event) -> None:
    before = _full_state()
    snapshot = copy.deepcopy(before.model_dump())
    apply_event(before, event)
    assert before.model_dump() == snapshot


def test_work_item_changed_keeps_the_link_the_engine_made() -> None:
    before = state(item("1", "in-review", linked_revision="r1"))
    after = apply_event(before, WorkItemChanged(work_item=item("1", "in-review", title="New")))
    assert after.work_items["1"].linked_revision == "r1"
    assert after.work_items["1"].title == "New"


def test_a_person_unblocking_an_item_gives_it_fresh_attempts() -> None:
    before = state(item("1", "blocked"), attempts={"1": 3})
    after = apply_event(before, WorkItemChanged(work_item=item("1", "pending")))
    assert after.attempts["1"] == 0


def test_revision_changed_keeps_the_review_the_engine_posted_and_links_the_item() -> None:
    before = state(item("1", "in-review"), revisions=[revision("r1", reviewed_sha="h1")])
    after = apply_event(before, RevisionChanged(revision=revision("r1")))
    assert after.revisions["r1"].reviewed_sha == "h1"
    assert after.work_items["1"].linked_revision == "r1"


def test_a_run_goes_requested_running_completed() -> None:
    s = apply_event(
        state(),
        requested(ImplementorStartParams(work_item_id="1", branch_name="b"), sid="s1"),
    )
    assert s.agent_runs["s1"].status == "requested"
    s = apply_event(s, AgentStarted.model_validate({"session_id": "s1", "log_file_path": "/l"}))
    assert (s.agent_runs["s1"].status, s.agent_runs["s1"].log_file_path) == ("running", "/l")
    s = apply_event(s, implemented("s1"))
    run = s.agent_runs["s1"]
    assert (run.status, run.outcome, run.settled, run.in_flight) == (
        "completed",
        "completed",
        False,
        True,
    )
    assert s.attempts["1"] == 1


def test_a_second_terminal_event_for_a_run_is_ignored() -> None:
    s = apply_event(state(runs=[implementor_run("s1")]), implemented("s1"))
    again = apply_event(s, implemented("s1"))
    failed = apply_event(
        s,
        AgentFailed.model_validate(
            {"session_id": "s1", "role": "implementor", "kind": "failed", "reason": "late"}
        ),
    )
    assert again == s
    assert failed == s


def test_a_requested_event_for_a_known_session_is_ignored() -> None:
    before = state(runs=[implementor_run("s1")])
    event = requested(ImplementorStartParams(work_item_id="5", branch_name="b"), sid="s1")
    assert apply_event(before, event) == before


def test_plan_applied_records_the_planned_blobs_and_settles_the_run() -> None:
    before = state(runs=[planner_run("p1", status="completed")], last_planned={"x.md": "1"})
    event = PlanApplied.model_validate({"session_id": "p1", "spec_shas": {"specs/a.md": "b1"}})
    after = apply_event(before, event)
    assert after.last_planned_shas == {"x.md": "1", "specs/a.md": "b1"}
    assert after.agent_runs["p1"].settled


def test_revision_created_links_the_item_and_marks_the_run_delivered() -> None:
    before = state(item("1", "in-progress"), runs=[implementor_run("s1", status="completed")])
    event = RevisionCreated.model_validate(
        {"session_id": "s1", "work_item_id": "1", "revision": revision("r3")}
    )
    after = apply_event(before, event)
    assert after.work_items["1"].linked_revision == "r3"
    assert after.agent_runs["s1"].delivered_revision == "r3"
    assert "r3" in after.revisions


def test_review_posted_records_the_reviewed_head() -> None:
    before = state(revisions=[revision("r1", head="h5")])
    event = ReviewPosted.model_validate(
        {"revision_id": "r1", "head_sha": "h5", "verdict": "approve"}
    )
    assert apply_event(before, event).revisions["r1"].reviewed_sha == "h5"


def test_a_rejected_follow_up_settles_its_run() -> None:
    before = state(runs=[reviewer_run("v1", status="completed")])
    command = PostReview(
        session_id="v1",
        work_item_id="1",
        revision_id="r1",
        head_sha="h1",
        review=AgentReview(verdict="approve", summary="ok"),
    )
    after = apply_event(before, CommandRejected(command=command, reason="policy"))
    assert after.agent_runs["v1"].settled


def test_an_apply_plan_failure_settles_the_planner_run() -> None:
    before = state(runs=[planner_run("p1", status="completed")])
    command = ApplyPlan(session_id="p1", result=PlannerResult(), spec_shas={})
    after = apply_event(before, CommandFailed(command=command, error="500"))
    assert after.agent_runs["p1"].settled


def _waiting(head: str = "h1", reason: str = "checks", minute: int = 0) -> MergeWaiting:
    return MergeWaiting(
        work_item_id=WorkItemId("1"),
        revision_id=RevisionId("r1"),
        head_sha=head,
        reason=reason,
        at=datetime(2026, 11, 25, 10, minute, tzinfo=UTC),
    )


def test_a_waiting_merge_records_why_since_when_and_how_many_tries() -> None:
    first = apply_event(state(revisions=[revision("r1")]), _waiting())
    again = apply_event(first, _waiting(reason="a review", minute=5))
    wait = again.merge_waits[RevisionId("r1")]
    assert (wait.work_item_id, wait.head_sha, wait.reason, wait.tries) == ("1", "h1", "a review", 2)
    assert wait.since == datetime(2026, 11, 25, 10, 0, tzinfo=UTC)
    assert wait.last_at == datetime(2026, 11, 25, 10, 5, tzinfo=UTC)


@pytest.mark.parametrize(
    "event",
    [
        RevisionMerged.model_validate({"revision_id": "r1"}),
        RevisionRemoved.model_validate({"revision_id": "r1"}),
        RevisionChanged(revision=revision("r1", head="h2")),
        RevisionChanged(revision=revision("r1").model_copy(update={"state": "closed"})),
    ],
    ids=["merged", "removed", "new head", "closed"],
)
def test_a_merge_wait_ends_with_the_merge_or_the_head_it_was_for(event: object) -> None:
    waiting = apply_event(state(revisions=[revision("r1")]), _waiting())
    assert RevisionId("r1") not in apply_event(waiting, event).merge_waits


def test_a_merge_wait_outlives_an_unchanged_observation() -> None:
    waiting = apply_event(state(revisions=[revision("r1")]), _waiting())
    seen = apply_event(waiting, RevisionChanged(revision=revision("r1")))
    assert RevisionId("r1") in seen.merge_waits


def test_status_transitioned_for_an_unknown_item_changes_nothing() -> None:
    before = state()
    event = StatusTransitioned.model_validate({"work_item_id": "9", "to": "done"})
    assert apply_event(before, event) == before


def test_a_status_transition_made_twice_changes_nothing_the_second_time() -> None:
    # Decided again before the first one's result was processed: the item keeps its place in
    # the merge queue (when it was first approved), and done twice is done.
    first = datetime(2026, 1, 1, tzinfo=UTC)
    approved = StatusTransitioned(work_item_id="1", to="approved", at=first)
    once = apply_event(state(item("1", "in-review")), approved)
    later = approved.model_copy(update={"at": datetime(2026, 1, 2, tzinfo=UTC)})
    assert apply_event(once, later) == once
    assert once.approved_at == {"1": first}
    done = StatusTransitioned(work_item_id="1", to="done", at=first)
    merged = apply_event(once, done)
    assert apply_event(merged, done) == merged


def test_events_round_trip_through_json() -> None:
    for event in _events_over_a_full_state():
        assert parse_event_json(event_to_json(event)) == event
        assert parse_event(event.model_dump(mode="json")) == event


def test_ids_sort_naturally() -> None:
    assert ordered(["10", "b", "2", "a"]) == ["2", "10", "a", "b"]
    assert natural_key("3") < natural_key("x")


def test_keys_sort_by_project_then_number() -> None:
    """Linear's and Jira's keys: ENG-9 before ENG-10 (a plain sort puts ENG-10 first)."""
    keys = ["ENG-10", "API-3", "ENG-9", "7", "ENG-x", "-4"]
    assert ordered(keys) == ["7", "API-3", "ENG-9", "ENG-10", "-4", "ENG-x"]


# ------------------------------------------------------------- what a run's end records

END = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


def test_a_completed_run_records_when_it_ended_what_it_cost_and_its_outcome() -> None:
    streak = InfrastructureStreak(count=2, last_at=END, last_reason="503")
    before = state(item("1", "in-progress"), runs=[implementor_run("s1", "1")]).model_copy(
        update={"infrastructure": streak}
    )
    event = implemented("s1", outcome="blocked", patch=None).model_copy(
        update={"at": END, "cost_usd": 0.5, "turns": 7, "model": "m-1"}
    )
    after = apply_event(before, event)
    run = after.agent_runs["s1"]
    assert (run.status, run.ended_at, run.cost_usd, run.turns, run.model, run.outcome) == (
        "completed",
        END,
        0.5,
        7,
        "m-1",
        "blocked",
    )
    assert run.settled  # no patch: no revision to write
    assert after.infrastructure == InfrastructureStreak()  # the model answered


def test_a_completed_review_records_its_verdict() -> None:
    before = state(
        item("1", "in-review", linked_revision="r1"),
        revisions=[revision("r1", "1")],
        runs=[reviewer_run("v1", "1")],
    )
    run = apply_event(before, reviewed("v1", "needs-changes")).agent_runs["v1"]
    assert (run.status, run.outcome, run.settled) == ("completed", "needs-changes", False)


def test_a_failed_run_records_its_kind_reason_class_and_cost() -> None:
    before = state(item("1", "in-progress"), runs=[implementor_run("s1", "1")])
    event = AgentFailed(
        session_id="s1",
        role="implementor",
        kind="timed-out",
        reason="30 s",
        at=END,
        cost_usd=0.25,
        turns=4,
        model="m-2",
    )
    run = apply_event(before, event).agent_runs["s1"]
    assert (run.status, run.ended_at, run.failure_reason, run.failure_class) == (
        "timed-out",
        END,
        "30 s",
        "work",
    )
    assert (run.cost_usd, run.turns, run.model, run.settled) == (0.25, 4, "m-2", True)


def test_a_start_records_when_and_where_the_transcript_is() -> None:
    before = state(item("1", "in-progress"), runs=[implementor_run("s1", "1", status="requested")])
    run = apply_event(before, AgentStarted(session_id="s1", at=END, log_file_path="/t")).agent_runs[
        "s1"
    ]
    assert (run.status, run.started_at, run.log_file_path) == ("running", END, "/t")


def test_a_removed_spec_and_a_removed_baseline_are_forgotten() -> None:
    before = apply_event(
        state(specs=[spec("specs/a.md"), spec("specs/b.md")]),
        BaselineChanged(baseline=Baseline(sha="h1", pipeline=Pipeline(status="success"))),
    )
    assert before.baseline is not None
    after = apply_event(before, SpecRemoved(path="specs/a.md"))
    assert list(after.specs) == ["specs/b.md"]
    assert apply_event(after, BaselineRemoved()).baseline is None


def test_a_revision_delivered_links_its_item_and_settles_its_run() -> None:
    before = state(item("1", "in-progress"), item("2"), runs=[implementor_run("s1", "1")])
    event = RevisionCreated(session_id="s1", work_item_id="1", revision=revision("r1", "1"))
    after = apply_event(before, event)
    assert after.work_items["1"].linked_revision == "r1"
    assert after.work_items["2"].linked_revision is None
    run = after.agent_runs["s1"]
    assert (run.settled, run.delivered_revision) == (True, "r1")


def test_a_posted_review_marks_the_head_reviewed_and_settles_its_run() -> None:
    before = state(
        item("1", "in-review", linked_revision="r1"),
        revisions=[revision("r1", "1")],
        runs=[reviewer_run("v1", "1", status="completed")],
    )
    after = apply_event(
        before, ReviewPosted(session_id="v1", revision_id="r1", head_sha="h1", verdict="approve")
    )
    assert after.revisions["r1"].reviewed_sha == "h1"
    assert after.agent_runs["v1"].settled

"""The engine's decisions in words (``domain.narration``): one line for each thing a person
follows, nothing for the rest."""

from __future__ import annotations

import pytest

from domain.commands import ApplyPlan, StartAgent, TransitionStatus
from domain.events import (
    AgentFailed,
    AgentStarted,
    CommandFailed,
    CommandRejected,
    EngineEvent,
    PlanApplied,
    PlannerCompleted,
    ReviewPosted,
    RevisionChanged,
    RevisionCreated,
    RevisionMerged,
    RevisionUpdated,
    SpecChanged,
    StatusTransitioned,
    UserCancelledRun,
    UserPausedDispatch,
    UserRequestedImplementorRun,
    UserResumedDispatch,
    UserTransitionedStatus,
    WorkItemChanged,
    WorkItemRemoved,
)
from domain.models import (
    EngineState,
    ImplementorStartParams,
    PlannerStartParams,
    ReviewerStartParams,
    Spec,
)
from domain.narration import Narrator, narrate
from domain.results import PlannerResult
from domain.state import apply_event
from tests.domain.builders import (
    implemented,
    implementor_run,
    item,
    planner_run,
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


def test_a_merge_answered_again_from_the_journal_is_told_once() -> None:
    """The merge queue asks for the same merge again while the first is under way (each event
    before its result moves the queue); the write is made once and each ask is answered from the
    journal with the same ``RevisionMerged``: one line, not one per ask (seen on GitLab, whose
    merges take seconds: "revision 2 merged as a794d10e1d" ten times)."""
    narrator = Narrator()
    before = state(item("3", "approved"), revisions=[revision("r1", "3")])
    merged = RevisionMerged(revision_id="r1", merge_sha="m1")
    after = apply_event(before, merged)
    assert narrator(merged, before, after) == ["#3: revision r1 merged as m1"]
    for _ in range(3):
        assert narrator(merged, after, apply_event(after, merged)) == []
    other = RevisionMerged(revision_id="r2", merge_sha="m2")
    with_r2 = state(item("3", "approved"), revisions=[revision("r2", "3")])
    assert narrator(other, with_r2, apply_event(with_r2, other)) == ["#3: revision r2 merged as m2"]


def test_a_plan_a_pause_and_a_failed_write_are_told() -> None:
    assert say(state(), PlanApplied(spec_shas={})) == ["plan applied: nothing new to create"]
    assert say(state(), UserPausedDispatch(reason="freeze")) == [
        "dispatch paused by a person: freeze"
    ]
    failed = CommandFailed(command=TransitionStatus(work_item_id="3", to="done"), error="409")
    assert say(state(), failed) == ["a write failed: TransitionStatus for #3: 409"]


def test_a_run_a_person_asked_for_that_a_guard_refused_is_told_with_where_the_item_stays() -> None:
    """The request was answered "requested" on a slot that was free when it was judged; the
    executor's guard then found it taken (trial of issue 39: the person saw nothing more and
    the item stayed pending, no run)."""
    params = ImplementorStartParams(work_item_id="206", branch_name="cpe/206-slow")
    full = "2 implementor runs are active (max_concurrent 2)"
    asked = StartAgent(params=params, requested_by_user=True)
    before = state(item("206", "pending", title="Slow"), item("7", "blocked"))
    assert say(before, CommandRejected(command=asked, reason=full)) == [
        "#206: the implementor run a person asked for did not start: 2 implementor runs are "
        "active (max_concurrent 2); #206 stays pending, and runs first when a slot frees"
    ]
    waiting = apply_event(before, CommandRejected(command=asked, reason=full))
    assert say(waiting, CommandRejected(command=asked, reason=full)) == []  # told once
    blocked = ImplementorStartParams(work_item_id="7", branch_name="cpe/7-x")
    refused = CommandRejected(
        command=StartAgent(params=blocked, requested_by_user=True), reason="the day's budget"
    )
    assert say(before, refused) == [
        "#7: the implementor run a person asked for did not start: the day's budget; "
        "#7 stays blocked, and runs first when a slot frees"
    ]
    # cpe's own dispatch refused for a full slot is routine: it starts again when one frees
    assert say(before, CommandRejected(command=StartAgent(params=params), reason=full)) == []


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


def test_a_status_cpe_wrote_that_a_poll_saw_first_is_told_once_with_its_reason() -> None:
    # The poll read cpe's own write before the engine processed its StatusTransitioned (queued
    # behind the poll's events): not a change on the tracker.
    run = implementor_run("s1", "3", status="failed", failure_reason="boom", settled=True)
    before = state(item("3", "in-progress"), runs=[run], attempts={"3": 3})
    transition = StatusTransitioned(work_item_id="3", to="blocked")
    queue: list[EngineEvent] = [transition]
    narrator = Narrator(lambda: queue)
    polled = WorkItemChanged(work_item=item("3", "blocked"))
    seen = apply_event(before, polled)
    assert narrator(polled, before, seen) == []
    queue.clear()
    [line] = narrator(transition, seen, apply_event(seen, transition))
    assert line.startswith("#3 in-progress → blocked: attempts exhausted (3 runs)")


def test_a_status_changed_on_the_tracker_with_no_write_of_cpes_queued_is_told_as_such() -> None:
    before = state(item("3", "in-progress"))
    other = StatusTransitioned(work_item_id="4", to="blocked")
    narrator = Narrator(lambda: [other, StatusTransitioned(work_item_id="3", to="done")])
    polled = WorkItemChanged(work_item=item("3", "blocked"))
    assert narrator(polled, before, apply_event(before, polled)) == [
        "#3 in-progress → blocked (changed on the tracker)"
    ]


def test_an_item_moved_to_review_by_hand_without_a_revision_is_told_it_waits() -> None:
    """On Linear or Jira a person drags an issue to "In Review": cpe reviews revisions, and has
    none of this one; said, not left silent."""
    before = state(item("ENG-3", "pending"))
    polled = WorkItemChanged(work_item=item("ENG-3", "in-review"))
    [line] = narrate(polled, before, apply_event(before, polled))
    assert line == (
        "ENG-3 pending → in-review (changed on the tracker); cpe has no revision of it, so it "
        "waits (set it to pending for cpe to implement it)"
    )
    with_revision = state(item("ENG-3", "pending"), revisions=[revision("r1", "ENG-3")])
    [line] = narrate(polled, with_revision, apply_event(with_revision, polled))
    assert line == "ENG-3 pending → in-review (changed on the tracker)"


# Every line narrate() can say, word for word: a person reads these in the log and on the
# dashboard, and the tests above only check their gist.
LONG = "x" * 400
CHECKS = revision("r1", "3", pipeline="failure")
CHECKS = CHECKS.model_copy(
    update={"pipeline": CHECKS.pipeline.model_copy(update={"failed_checks": ("lint", "tests")})}
)
LINES: list[tuple[str, EngineState, EngineEvent, list[str]]] = [
    (
        "a planner dispatched",
        state(),
        requested(PlannerStartParams(spec_paths=("specs/a.md",)), sid="p1"),
        ["planner dispatched on specs/a.md (p1)"],
    ),
    (
        "a reviewer dispatched",
        state(item("3", "in-review", title="G"), revisions=[revision("r1", "3")]),
        requested(
            ReviewerStartParams(work_item_id="3", revision_id="r1"),
            sid="v1",
            subject_sha="abcdef0123456789",
        ),
        ["#3 'G': reviewer dispatched on head abcdef0123 (v1)"],
    ),
    (
        "a planner completed, no cost",
        state(runs=[planner_run("p1")]),
        PlannerCompleted(session_id="p1", result=PlannerResult(create=())),
        ["planner p1 completed"],
    ),
    (
        "a failure, not under the agent, its reason cut at 300 characters",
        state(runs=[planner_run("p1")]),
        AgentFailed(session_id="p1", role="planner", kind="timed-out", reason=LONG),
        ["planner p1 timed-out: " + "x" * 300],
    ),
    (
        "the end of a run the state does not know",
        state(),
        AgentFailed(session_id="zz", role="planner", kind="failed", reason="x"),
        [],
    ),
    ("a completed run the state does not know", state(), implemented("zz"), []),
    (
        "a plan that created items, one unknown to the state",
        state(item("1", title="A"), item("2", title="B")),
        PlanApplied(spec_shas={}, created_ids=["1", "2", "9"]),
        ["plan applied: created #1 'A', #2 'B', #9"],
    ),
    (
        "a revision updated",
        state(item("3", "in-progress")),
        RevisionUpdated(work_item_id="3", revision=revision("r1", "3", head="0123456789abcdef")),
        ["#3 'Item 3': revision r1 updated (branch cpe/3-x, head 0123456789)"],
    ),
    (
        "a revision of an item the state does not know",
        state(),
        RevisionCreated(work_item_id="7", revision=revision("r1", "7")),
        ["#7: revision r1 created (branch cpe/7-x, head h1)"],
    ),
    (
        "a revision merged on the forge (GitHub, GitLab or local: whatever the tracker)",
        state(item("3", "in-review"), revisions=[revision("r1", "3")]),
        RevisionChanged(revision=revision("r1", "3", state="merged")),
        ["#3: revision r1 merged (on the forge)"],
    ),
    (
        "a revision closed on the forge, its pipeline still running",
        state(item("3", "in-review"), revisions=[revision("r1", "3")]),
        RevisionChanged(revision=revision("r1", "3", state="closed", pipeline="pending")),
        ["#3: revision r1 closed (on the forge)"],
    ),
    (
        "a red pipeline names its failed checks",
        state(item("3", "in-review"), revisions=[revision("r1", "3", pipeline="pending")]),
        RevisionChanged(revision=CHECKS),
        ["#3: revision r1 pipeline failure at h1 (failed: lint, tests)"],
    ),
    (
        "a new head with the same result",
        state(item("3", "in-review"), revisions=[revision("r1", "3")]),
        RevisionChanged(revision=revision("r1", "3", head="h2")),
        ["#3: revision r1 pipeline success at h2"],
    ),
    (
        "the same revision again",
        state(item("3", "in-review"), revisions=[revision("r1", "3")]),
        RevisionChanged(revision=revision("r1", "3")),
        [],
    ),
    (
        "a new revision whose pipeline runs",
        state(),
        RevisionChanged(revision=revision("r1", "3", pipeline="pending")),
        [],
    ),
    (
        "a new revision of no item, green",
        state(),
        RevisionChanged(revision=revision("r1", None)),
        ["revision r1 pipeline success at h1"],
    ),
    (
        "a review of a revision of no item",
        state(revisions=[revision("r1", None)]),
        ReviewPosted(revision_id="r1", head_sha="0123456789abc", verdict="needs-changes"),
        ["review posted on revision r1 (0123456789): needs-changes"],
    ),
    (
        "a merge without its commit",
        state(item("3"), revisions=[revision("r1", "3")]),
        RevisionMerged(revision_id="r1"),
        ["#3: revision r1 merged"],
    ),
    (
        "a start that failed, its error on one line",
        state(),
        CommandFailed(
            command=StartAgent(
                params=ImplementorStartParams(work_item_id="4", branch_name="cpe/4-x")
            ),
            error="e\n e",
        ),
        ["a write failed: StartAgent for #4: e e"],
    ),
    (
        "a failed write of no item",
        state(),
        CommandFailed(command=ApplyPlan(result=PlannerResult(create=()), spec_shas={}), error="b"),
        ["a write failed: ApplyPlan: b"],
    ),
    (
        "an item seen for the first time",
        state(),
        WorkItemChanged(work_item=item("3", title="T")),
        ["#3 'T' seen (pending)"],
    ),
    (
        "a status changed on the tracker",
        state(item("3")),
        WorkItemChanged(work_item=item("3", "in-progress")),
        ["#3 pending → in-progress (changed on the tracker)"],
    ),
    (
        "an item removed",
        state(item("3")),
        WorkItemRemoved(work_item_id="3"),
        ["#3 removed from the tracker"],
    ),
    (
        "a person asked for a run",
        state(item("3")),
        UserRequestedImplementorRun(work_item_id="3"),
        ["#3: a person asked for an implementor run"],
    ),
    (
        "a person cancelled",
        state(),
        UserCancelledRun(session_id="s1"),
        ["a person cancelled run s1"],
    ),
    ("a pause without a reason", state(), UserPausedDispatch(), ["dispatch paused by a person"]),
    ("a resume", state(), UserResumedDispatch(), ["dispatch resumed by a person"]),
    (
        "a status change of an unknown item",
        state(),
        StatusTransitioned(work_item_id="9", to="blocked"),
        ["#9 unknown → blocked"],
    ),
    (
        "a status change no row of the table makes, no person's request known",
        state(item("3", "done")),
        StatusTransitioned(work_item_id="3", to="in-review"),
        ["#3 done → in-review: set by cpe"],
    ),
    (
        "a status change no row of the table makes, with the reason its command carried",
        state(item("3", "done")),
        StatusTransitioned(work_item_id="3", to="blocked", reason="the run's\n  budget is spent"),
        ["#3 done → blocked: the run's budget is spent"],
    ),
    (
        "a status the item had already",
        state(item("3", "done")),
        StatusTransitioned(work_item_id="3", to="done"),
        [],
    ),
    (
        "a status the item had already, by the workflow's in-progress row",
        state(item("3", "in-progress")),
        StatusTransitioned(work_item_id="3", to="in-progress"),
        [],
    ),
    (
        "a status change a row makes, with the row's why",
        state(item("3", "pending")),
        StatusTransitioned(work_item_id="3", to="in-progress"),
        ["#3 pending → in-progress: an implementor run was requested for an unblocked item"],
    ),
]


@pytest.mark.parametrize(
    ("before", "event", "lines"), [case[1:] for case in LINES], ids=[case[0] for case in LINES]
)
def test_each_line_word_for_word(before: EngineState, event: EngineEvent, lines: list[str]) -> None:
    assert say(before, event) == lines


def test_a_persons_request_another_transition_overtook_is_forgotten() -> None:
    narrator = Narrator()
    before = state(item("3"))
    narrator(UserTransitionedStatus(work_item_id="3", to="blocked"), before, before)
    [overtaking] = narrator(StatusTransitioned(work_item_id="3", to="in-progress"), before, before)
    assert overtaking.endswith(": an implementor run was requested for an unblocked item")
    [later] = narrator(StatusTransitioned(work_item_id="3", to="blocked"), before, before)
    assert later == "#3 pending → blocked: a retry is due but max_attempts runs have ended"


def test_a_transition_made_twice_is_told_once_and_never_as_a_persons() -> None:
    # Decided again before the first one's result was processed (a poll's RevisionChanged
    # after the merge's RevisionMerged): the second changes nothing, and no person asked.
    narrator = Narrator()
    before = state(item("3", "approved"))
    merged = StatusTransitioned(work_item_id="3", to="done")
    after = apply_event(before, merged)
    assert narrator(merged, before, after) == ["#3 approved → done: the revision was merged"]
    assert narrator(merged, after, apply_event(after, merged)) == []
    in_review = state(item("3", "in-review"))
    approved = StatusTransitioned(work_item_id="3", to="approved")
    assert narrator(approved, in_review, apply_event(in_review, approved)) == [
        "#3 in-review → approved: the reviewer approved the head on a green pipeline, or one "
        "red only where the default branch is red too"
    ]
    again = apply_event(in_review, approved)
    assert narrator(approved, again, again) == []


def test_a_persons_request_the_item_had_met_already_is_no_change_and_is_forgotten() -> None:
    narrator = Narrator()
    done = state(item("3", "done"))
    assert narrator(UserTransitionedStatus(work_item_id="3", to="done"), done, done) == [
        "#3: a person set the status to done"
    ]
    assert narrator(StatusTransitioned(work_item_id="3", to="done"), done, done) == []
    pending = state(item("3", "pending"))
    [later] = narrator(StatusTransitioned(work_item_id="3", to="done"), pending, pending)
    assert later == "#3 pending → done: set by cpe"


def test_a_skipped_spec_is_told_once_per_version() -> None:
    """A spec that cannot be planned is said when its version is first seen; the same version
    seen again (each start's full poll) is not said again; a new broken version is."""
    empty = Spec(path="specs/a.md", blob_sha="e69de29b", problem="empty")

    def said(before: EngineState, spec: Spec) -> list[str]:
        return say(before, SpecChanged(spec=spec))

    fresh = EngineState()
    assert said(fresh, empty) == ["spec specs/a.md skipped: empty"]
    known = apply_event(fresh, SpecChanged(spec=empty))
    assert said(known, empty) == []
    broken = Spec(path="specs/a.md", blob_sha="0badc0de", problem="not UTF-8 text")
    assert said(known, broken) == ["spec specs/a.md skipped: not UTF-8 text"]
    assert said(fresh, Spec(path="specs/b.md", blob_sha="1234abcd")) == []  # planned, not told

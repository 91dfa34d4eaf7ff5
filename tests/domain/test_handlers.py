"""Each of the seven handlers: what it emits, and the cases where it must emit nothing."""

from __future__ import annotations

from typing import Any

import pytest

from domain.commands import (
    ApplyPlan,
    CancelAgent,
    CreateRevision,
    MergeRevision,
    PostReview,
    StartAgent,
    TransitionStatus,
    UpdateRevision,
)
from domain.decisions import dispatch_pause
from domain.events import (
    AgentFailed,
    AgentRequested,
    CommandFailed,
    DispatchDue,
    EngineEvent,
    PlanApplied,
    PlannerCompleted,
    ReviewPosted,
    RevisionChanged,
    RevisionRemoved,
    SpecChanged,
    StatusTransitioned,
    UserCancelledRun,
    UserRequestedImplementorRun,
    UserTransitionedStatus,
    WorkItemChanged,
    WorkItemRemoved,
)
from domain.handlers import HANDLER_FUNCTIONS, create_handlers, run_handlers
from domain.handlers.options import HandlerOptions
from domain.models import (
    ImplementorStartParams,
    PlannerStartParams,
    ReviewerStartParams,
    RevisionId,
    Spec,
    WorkItemId,
)
from domain.results import PlannedWorkItem, PlannerResult
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
    step,
)

AUTO_MERGE = HandlerOptions(auto_merge=True)
# A provider whose writer cannot land through the merge queue (the seed's interface): approved
# revisions are merged as they are.
DIRECT_MERGE = HandlerOptions(auto_merge=True, merge_queue=False)


def failed(sid: str, role: str = "implementor", kind: str = "failed") -> AgentFailed:
    return AgentFailed.model_validate(
        {"session_id": sid, "role": role, "kind": kind, "reason": "it broke"}
    )


def starts(commands: list[Any], role: str) -> list[StartAgent]:
    return [c for c in commands if isinstance(c, StartAgent) and c.params.role == role]


def transitions(commands: list[Any]) -> list[tuple[str, str]]:
    return [(c.work_item_id, c.to) for c in commands if isinstance(c, TransitionStatus)]


# ---------------------------------------------------------------------------- wiring


def test_create_handlers_returns_the_seven_handlers_in_order() -> None:
    handlers = create_handlers()
    assert [h.name for h in handlers] == [
        "plan",
        "apply_plan",
        "dispatch",
        "implementor_done",
        "revision",
        "review_done",
        "recovery",
    ]
    assert len(HANDLER_FUNCTIONS) == 7


def test_run_handlers_gives_every_handler_the_same_snapshot() -> None:
    snapshot = state(item("1"))
    seen: list[object] = []

    def spy(name: str):
        def handler(event, s):
            seen.append(s)
            return [TransitionStatus(work_item_id=name, to="done")]

        return handler

    event = WorkItemChanged(work_item=item("1"))
    commands = run_handlers([spy("a"), spy("b")], event, snapshot)
    assert seen == [snapshot, snapshot]
    assert all(s is snapshot for s in seen)
    assert transitions(commands) == [("a", "done"), ("b", "done")]


def test_run_handlers_keeps_a_command_two_handlers_emit_once() -> None:
    same = TransitionStatus(work_item_id="1", to="done")
    commands = run_handlers(
        [lambda e, s: [same], lambda e, s: [same]], WorkItemChanged(work_item=item()), state()
    )
    assert commands == [same]


# ---------------------------------------------------------------------------- 1. plan


def test_plan_starts_one_planner_for_every_spec_whose_blob_changed() -> None:
    before = state(specs=[spec("specs/b.md", "b2")], last_planned={"specs/b.md": "old"})
    _, commands = step(before, SpecChanged(spec=spec("specs/a.md", "a1")))
    [start] = starts(commands, "planner")
    assert start.params == PlannerStartParams(spec_paths=("specs/a.md", "specs/b.md"))
    assert start.spec_shas == {"specs/a.md": "a1", "specs/b.md": "b2"}


def test_plan_emits_nothing_while_a_planner_is_running() -> None:
    before = state(runs=[planner_run("p1")])
    _, commands = step(before, SpecChanged(spec=spec("specs/z.md", "z1")))
    assert commands == []


def test_plan_emits_nothing_while_a_planner_result_is_not_applied_yet() -> None:
    before = state(runs=[planner_run("p1", status="completed")])
    _, commands = step(before, SpecChanged(spec=spec("specs/z.md", "z1")))
    assert commands == []


def test_plan_emits_nothing_for_a_spec_already_planned_at_that_blob() -> None:
    before = state(last_planned={"specs/a.md": "b1"})
    _, commands = step(before, SpecChanged(spec=spec("specs/a.md", "b1")))
    assert commands == []


def test_plan_applied_plans_a_spec_that_changed_during_the_run() -> None:
    before = state(
        specs=[spec("specs/a.md", "a1"), spec("specs/b.md", "b1")],
        runs=[planner_run("p1", {"specs/a.md": "a1"}, status="completed")],
    )
    event = PlanApplied.model_validate({"session_id": "p1", "spec_shas": {"specs/a.md": "a1"}})
    _, commands = step(before, event)
    [start] = starts(commands, "planner")
    assert start.spec_shas == {"specs/b.md": "b1"}


def test_a_failed_planner_is_retried_on_the_same_blobs() -> None:
    before = state(specs=[spec("specs/a.md", "a1")], runs=[planner_run("p1", {"specs/a.md": "a1"})])
    _, commands = step(before, failed("p1", role="planner", kind="timed-out"))
    [start] = starts(commands, "planner")
    assert start.spec_shas == {"specs/a.md": "a1"}


def test_a_planner_that_failed_max_attempts_times_waits_for_the_next_change() -> None:
    """Three runs (max_attempts) failed on a1: no fourth; a cancelled run did not count."""
    earlier = [
        planner_run("p0", {"specs/a.md": "a1"}, status="failed"),
        planner_run("p1", {"specs/a.md": "a1"}, status="timed-out"),
        planner_run("px", {"specs/a.md": "a1"}, status="cancelled"),
    ]
    before = state(
        specs=[spec("specs/a.md", "a1")], runs=[*earlier, planner_run("p2", {"specs/a.md": "a1"})]
    )
    _, commands = step(before, failed("p2", role="planner"))
    assert starts(commands, "planner") == []
    # with one more attempt allowed, it is retried
    _, commands = step(before, failed("p2", role="planner"), HandlerOptions(max_attempts=4))
    assert len(starts(commands, "planner")) == 1
    # a new version of the spec is planned again
    changed = state(
        specs=[spec("specs/a.md", "a2")], runs=[*earlier, planner_run("p2", {"specs/a.md": "a1"})]
    )
    _, commands = step(changed, failed("p2", role="planner"))
    [start] = starts(commands, "planner")
    assert start.spec_shas == {"specs/a.md": "a2"}


def test_a_spec_version_whose_planning_spent_its_budget_waits_for_the_next_change() -> None:
    """[budget] per_spec_usd: the planner runs on a1 cost $6 + $5 ≥ $10, so no third run on
    a1 (attempts are left); b1 in the same batch is still planned; a2 is planned again."""
    runs = [
        planner_run("p0", {"specs/a.md": "a1", "specs/b.md": "b1"}, status="failed", cost_usd=6.0),
        planner_run("p1", {"specs/a.md": "a1"}),
    ]
    before = state(specs=[spec("specs/a.md", "a1"), spec("specs/b.md", "b1")], runs=runs)
    options = HandlerOptions(max_attempts=5, spec_budget_usd=10)
    ended = failed("p1", role="planner").model_copy(update={"cost_usd": 5.0})
    _, commands = step(before, ended, options)
    [start] = starts(commands, "planner")
    assert start.spec_shas == {"specs/b.md": "b1"}
    # more budget: a1 is retried too
    _, commands = step(before, ended, HandlerOptions(max_attempts=5))
    [start] = starts(commands, "planner")
    assert start.spec_shas == {"specs/a.md": "a1", "specs/b.md": "b1"}
    changed = state(specs=[spec("specs/a.md", "a2")], runs=runs)
    _, commands = step(changed, ended, options)
    [start] = starts(commands, "planner")
    assert start.spec_shas == {"specs/a.md": "a2"}


def test_a_failed_planner_lets_specs_changed_meanwhile_be_planned() -> None:
    before = state(
        specs=[spec("specs/a.md", "a1"), spec("specs/b.md", "b1")],
        runs=[planner_run("p1", {"specs/a.md": "a1"})],
    )
    # a1 has had its last attempt; b1 changed while that run went
    _, commands = step(before, failed("p1", role="planner"), HandlerOptions(max_attempts=1))
    [start] = starts(commands, "planner")
    assert start.params.spec_paths == ("specs/b.md",)
    # with attempts left, the retry takes both
    _, commands = step(before, failed("p1", role="planner"))
    [start] = starts(commands, "planner")
    assert start.params.spec_paths == ("specs/a.md", "specs/b.md")


def test_specs_failing_in_separate_planner_runs_get_at_most_max_attempts_runs_each() -> None:
    """Every planner run fails, and each spec changes at a moment that splits the runs: the
    loop stops by itself, with no more than ``max_attempts`` runs on each spec version."""
    options = HandlerOptions(max_attempts=3)
    current = state()
    pending: list[EngineEvent] = [SpecChanged(spec=spec("specs/a.md", "a1"))]
    runs: list[dict[str, str]] = []
    later = [SpecChanged(spec=spec("specs/b.md", "b1"))]  # b arrives after a's first run
    while pending and len(runs) < 50:
        current, commands = step(current, pending.pop(0), options)
        for start in starts(commands, "planner"):
            sid = f"p{len(runs)}"
            runs.append(dict(start.spec_shas))
            current, _ = step(current, requested(start.params, sid=sid, spec_shas=start.spec_shas))
            pending.append(failed(sid, role="planner"))
            pending += later
            later = []
    assert pending == [], "the planner loop did not stop"
    for path, sha in (("specs/a.md", "a1"), ("specs/b.md", "b1")):
        assert sum(1 for shas in runs if shas.get(path) == sha) == 3, runs


# ---------------------------------------------------------------------------- 2. apply plan


def _planner_result() -> PlannerResult:
    return PlannerResult(
        create=(PlannedWorkItem(temp_id="t1", title="Do it", body="body"),),
    )


def test_apply_plan_applies_the_planner_result_with_the_planned_blobs() -> None:
    before = state(runs=[planner_run("p1", {"specs/a.md": "a1"})])
    event = PlannerCompleted.model_validate({"session_id": "p1", "result": _planner_result()})
    _, commands = step(before, event)
    assert commands == [
        ApplyPlan(session_id="p1", result=_planner_result(), spec_shas={"specs/a.md": "a1"})
    ]


def test_apply_plan_ignores_a_result_from_an_unknown_session() -> None:
    event = PlannerCompleted.model_validate({"session_id": "ghost", "result": _planner_result()})
    _, commands = step(state(), event)
    assert commands == []


# ---------------------------------------------------------------------------- 3. dispatch


def test_dispatch_starts_an_implementor_for_an_unblocked_pending_item() -> None:
    _, commands = step(state(), WorkItemChanged(work_item=item("7", title="Add login: OAuth!")))
    [start] = starts(commands, "implementor")
    assert start.params == ImplementorStartParams(
        work_item_id="7",
        branch_name="cpe/7-add-login-oauth",
    )


def test_dispatch_emits_nothing_for_an_item_with_an_unresolved_blocker() -> None:
    before = state(item("1", "in-review"))
    _, commands = step(before, WorkItemChanged(work_item=item("2", blocked_by=["1"])))
    assert commands == []


def test_dispatch_treats_an_unknown_blocker_as_unresolved() -> None:
    _, commands = step(state(), WorkItemChanged(work_item=item("2", blocked_by=["99"])))
    assert commands == []


def test_dispatch_starts_dependents_when_their_blocker_is_done() -> None:
    before = state(item("1", "approved"), item("2", blocked_by=["1"]), item("3", blocked_by=["1"]))
    event = StatusTransitioned.model_validate({"work_item_id": "1", "to": "done"})
    _, commands = step(before, event)
    assert [s.params.work_item_id for s in starts(commands, "implementor")] == ["2", "3"]


def test_dispatch_emits_nothing_when_a_run_is_already_active_for_the_item() -> None:
    before = state(runs=[implementor_run("s1", "1", status="requested")])
    _, commands = step(before, WorkItemChanged(work_item=item("1")))
    assert commands == []


def test_dispatch_resumes_a_needs_refinement_item() -> None:
    before = state(revisions=[revision("r1", pipeline="failure")])
    event = WorkItemChanged(work_item=item("1", "needs-refinement", linked_revision="r1"))
    _, commands = step(before, event)
    assert len(starts(commands, "implementor")) == 1


def test_dispatch_respects_the_implementor_concurrency_limit() -> None:
    options = HandlerOptions(max_concurrent={"implementor": 2, "reviewer": 1, "planner": 1})
    before = state(item("1"), item("2"), item("3"), runs=[implementor_run("s0", "9")])
    _, commands = step(before, failed("s0"), options)
    assert [s.params.work_item_id for s in starts(commands, "implementor")] == ["1", "2"]


def test_dispatch_on_a_finished_run_picks_up_items_that_waited_for_a_slot() -> None:
    options = HandlerOptions(max_concurrent={"implementor": 1, "reviewer": 1, "planner": 1})
    before = state(item("4"), runs=[implementor_run("s0", "9")])
    _, waiting = step(before, WorkItemChanged(work_item=item("4")), options)
    assert waiting == []
    _, commands = step(before, failed("s0"), options)
    assert len(starts(commands, "implementor")) == 1


def test_dispatch_marks_the_item_in_progress_when_the_run_is_requested() -> None:
    params = ImplementorStartParams(session_id="s1", work_item_id="1", branch_name="cpe/1-x")
    event = AgentRequested(session_id=params.session_id, params=params)
    after, commands = step(state(item("1")), event)
    assert transitions(commands) == [("1", "in-progress")]
    assert after.agent_runs["s1"].status == "requested"


@pytest.mark.spec("S002-04")
def test_a_user_request_starts_a_run_even_for_a_blocked_item() -> None:
    before = state(item("1", "blocked"), attempts={"1": 9})
    _, commands = step(before, UserRequestedImplementorRun.model_validate({"work_item_id": "1"}))
    assert len(starts(commands, "implementor")) == 1


@pytest.mark.parametrize("status", ["in-progress", "in-review", "approved", "done"])
def test_a_user_request_for_an_item_past_implementation_emits_nothing(status: str) -> None:
    before = state(item("1", status))
    _, commands = step(before, UserRequestedImplementorRun.model_validate({"work_item_id": "1"}))
    assert commands == []


def test_a_user_request_while_a_run_is_active_emits_nothing() -> None:
    before = state(item("1"), runs=[implementor_run("s1")])
    _, commands = step(before, UserRequestedImplementorRun.model_validate({"work_item_id": "1"}))
    assert commands == []


# ---------------------------------------------------------------------------- 4. implementor done


def test_a_completed_patch_without_a_revision_creates_one() -> None:
    before = state(item("1", "in-progress", title="Add login"), runs=[implementor_run("s1")])
    _, commands = step(before, implemented("s1"))
    [create] = commands
    assert isinstance(create, CreateRevision)
    assert (create.session_id, create.work_item_id, create.branch_name) == ("s1", "1", "cpe/1-x")
    assert create.title == "Add login"
    assert create.patch == "diff --git a/x b/x\n"
    assert "did it" in create.body


def test_a_completed_patch_with_an_open_revision_updates_it() -> None:
    before = state(
        item("1", "in-progress", linked_revision="r1"),
        revisions=[revision("r1")],
        runs=[implementor_run("s1")],
    )
    _, commands = step(before, implemented("s1"))
    assert commands == [
        UpdateRevision(
            session_id="s1", work_item_id="1", revision_id="r1", patch="diff --git a/x b/x\n"
        )
    ]


def test_a_completed_patch_whose_revision_was_closed_creates_a_new_one() -> None:
    before = state(
        item("1", "in-progress", linked_revision="r1"),
        revisions=[revision("r1", state="closed")],
        runs=[implementor_run("s1")],
    )
    _, commands = step(before, implemented("s1"))
    assert [type(c) for c in commands] == [CreateRevision]


def test_outcome_blocked_blocks_the_item() -> None:
    before = state(item("1", "in-progress"), runs=[implementor_run("s1")])
    _, commands = step(before, implemented("s1", outcome="blocked", patch=None))
    assert transitions(commands) == [("1", "blocked")]


def test_validation_failure_counts_as_a_failed_attempt() -> None:
    before = state(item("1", "in-progress"), runs=[implementor_run("s1")])
    after, commands = step(before, implemented("s1", outcome="validation-failure", patch=None))
    assert transitions(commands) == [("1", "pending")]
    assert after.attempts["1"] == 1


def test_validation_failure_on_the_last_attempt_blocks_the_item() -> None:
    before = state(item("1", "in-progress"), runs=[implementor_run("s1")], attempts={"1": 2})
    _, commands = step(before, implemented("s1", outcome="validation-failure", patch=None))
    assert transitions(commands) == [("1", "blocked")]


def test_completed_without_a_patch_is_a_failed_attempt_not_a_revision() -> None:
    before = state(item("1", "in-progress"), runs=[implementor_run("s1")])
    _, commands = step(before, implemented("s1", patch=""))
    assert transitions(commands) == [("1", "pending")]


def test_implementor_done_ignores_an_unknown_session() -> None:
    _, commands = step(state(item("1", "in-progress")), implemented("ghost"))
    # recovery does not act either: the event is not about the item's own observation
    assert commands == []


# ---------------------------------------------------------------------------- 5. revision


def _in_review(**rev: Any) -> Any:
    return state(item("1", "in-review", linked_revision="r1"), revisions=[revision("r1", **rev)])


def test_a_green_unreviewed_head_gets_a_reviewer() -> None:
    _, commands = step(_in_review(), RevisionChanged(revision=revision("r1", head="h2")))
    [start] = starts(commands, "reviewer")
    assert start.params == ReviewerStartParams(work_item_id="1", revision_id="r1")
    assert start.subject_sha == "h2"


def test_a_head_with_no_ci_configured_gets_a_reviewer() -> None:
    _, commands = step(_in_review(), RevisionChanged(revision=revision("r1", pipeline="none")))
    assert len(starts(commands, "reviewer")) == 1


def test_a_reviewed_head_gets_no_second_reviewer() -> None:
    event = RevisionChanged(revision=revision("r1", head="h1", reviewed_sha="h1"))
    _, commands = step(_in_review(), event)
    assert commands == []


def test_a_pending_pipeline_waits() -> None:
    _, commands = step(_in_review(), RevisionChanged(revision=revision("r1", pipeline="pending")))
    assert commands == []


def test_no_second_reviewer_while_one_is_running_for_the_revision() -> None:
    before = _in_review().model_copy(update={"agent_runs": {"v1": reviewer_run("v1", head="h1")}})
    _, commands = step(before, RevisionChanged(revision=revision("r1", head="h2")))
    assert starts(commands, "reviewer") == []


def test_no_reviewer_once_reviews_of_this_head_failed_max_attempts_times() -> None:
    runs = {f"v{i}": reviewer_run(f"v{i}", head="h1", status="failed") for i in range(3)}
    before = _in_review().model_copy(update={"agent_runs": runs})
    _, commands = step(before, RevisionChanged(revision=revision("r1", head="h1")))
    assert commands == []


def test_an_item_becoming_in_review_on_a_green_head_gets_a_reviewer() -> None:
    before = state(item("1", "in-progress", linked_revision="r1"), revisions=[revision("r1")])
    event = StatusTransitioned.model_validate({"work_item_id": "1", "to": "in-review"})
    _, commands = step(before, event)
    assert len(starts(commands, "reviewer")) == 1


def test_an_approved_head_seen_after_a_restart_is_merged_with_auto_merge_and_no_queue() -> None:
    before = state(item("1", "approved", linked_revision="r1"))
    event = RevisionChanged(revision=revision("r1", reviewed_sha="h1"))
    _, commands = step(before, event, DIRECT_MERGE)
    assert commands == [MergeRevision(work_item_id="1", revision_id="r1")]
    _, without = step(before, event)
    assert without == []


def test_an_older_revision_of_the_item_closing_changes_nothing() -> None:
    before = state(
        item("1", "in-review", linked_revision="r2"),
        revisions=[revision("r1"), revision("r2", head="h2")],
    )
    _, commands = step(before, RevisionChanged(revision=revision("r1", state="closed")))
    assert commands == []


def test_a_revision_for_no_known_work_item_is_ignored() -> None:
    _, commands = step(state(), RevisionChanged(revision=revision("r5", wid=None)))
    assert commands == []


# ---------------------------------------------------------------------------- 6. review done


def test_a_review_of_the_current_head_is_posted() -> None:
    before = _in_review().model_copy(update={"agent_runs": {"v1": reviewer_run("v1")}})
    _, commands = step(before, reviewed("v1", "needs-changes"))
    [post] = commands
    assert isinstance(post, PostReview)
    assert (post.session_id, post.revision_id, post.head_sha) == ("v1", "r1", "h1")
    assert post.review.verdict == "needs-changes"
    assert post.review.comments[0].line == 3


def test_a_stale_review_is_dropped_and_the_new_head_reviewed() -> None:
    before = _in_review(head="h2").model_copy(
        update={"agent_runs": {"v1": reviewer_run("v1", head="h1")}}
    )
    after, commands = step(before, reviewed("v1"))
    assert not [c for c in commands if isinstance(c, PostReview)]
    [start] = starts(commands, "reviewer")
    assert start.subject_sha == "h2"
    assert after.agent_runs["v1"].settled


def test_an_approval_is_recorded_and_merged_with_auto_merge_and_no_queue() -> None:
    event = ReviewPosted.model_validate(
        {"revision_id": "r1", "head_sha": "h1", "verdict": "approve"}
    )
    _, commands = step(_in_review(), event, DIRECT_MERGE)
    assert commands == [
        TransitionStatus(work_item_id="1", to="approved"),
        MergeRevision(work_item_id="1", revision_id="r1"),
    ]


def test_a_posted_review_of_an_old_head_moves_nothing() -> None:
    event = ReviewPosted.model_validate(
        {"revision_id": "r1", "head_sha": "h0", "verdict": "approve"}
    )
    _, commands = step(_in_review(), event, AUTO_MERGE)
    assert commands == []


# ---------------------------------------------------------------------------- red baseline


def _red_baseline(*checks: str) -> Any:
    from domain.models import Baseline, Pipeline  # noqa: PLC0415

    return Baseline(sha="m1", pipeline=Pipeline(status="failure", failed_checks=checks))


def _with_baseline(before: Any, *checks: str) -> Any:
    return before.model_copy(update={"baseline": _red_baseline(*checks)})


def test_a_revision_failing_only_where_the_default_branch_fails_is_reviewed_not_sent_back() -> None:
    """The tests fail at collection on the default branch too: not the implementor's doing."""
    red = {"pipeline": "failure", "failed": ("pytest",)}
    before = _with_baseline(_in_review(**red), "pytest", "lint")
    _, commands = step(before, RevisionChanged(revision=revision("r1", head="h2", **red)))
    assert [c.type for c in commands] == ["StartAgent"]
    assert len(starts(commands, "reviewer")) == 1
    # charged all the same when so configured
    charged = HandlerOptions(charge_baseline_failures=True)
    _, commands = step(before, RevisionChanged(revision=revision("r1", head="h2", **red)), charged)
    assert commands == [TransitionStatus(work_item_id="1", to="needs-refinement")]


def test_a_check_the_default_branch_passes_is_the_revisions_failure() -> None:
    red = {"pipeline": "failure", "failed": ("pytest", "mypy")}
    before = _with_baseline(_in_review(**red), "pytest")
    _, commands = step(before, RevisionChanged(revision=revision("r1", head="h2", **red)))
    assert commands == [TransitionStatus(work_item_id="1", to="needs-refinement")]
    # a failure that names no check cannot be compared: charged
    unnamed = {"pipeline": "failure"}
    before = _with_baseline(_in_review(**unnamed), "pytest")
    _, commands = step(before, RevisionChanged(revision=revision("r1", head="h2", **unnamed)))
    assert commands == [TransitionStatus(work_item_id="1", to="needs-refinement")]


def test_a_baseline_turning_red_gets_a_waiting_revision_reviewed() -> None:
    from domain.events import BaselineChanged  # noqa: PLC0415

    before = _in_review(pipeline="failure", failed=("pytest",))
    after, commands = step(before, BaselineChanged(baseline=_red_baseline("pytest")))
    assert after.baseline == _red_baseline("pytest")
    assert len(starts(commands, "reviewer")) == 1


def test_an_approval_on_a_pipeline_red_as_the_default_branch_approves_but_does_not_merge() -> None:
    event = ReviewPosted.model_validate(
        {"revision_id": "r1", "head_sha": "h1", "verdict": "approve"}
    )
    before = _with_baseline(_in_review(pipeline="failure", failed=("pytest",)), "pytest")
    _, commands = step(before, event, AUTO_MERGE)
    assert commands == [TransitionStatus(work_item_id="1", to="approved")]


def test_an_approval_on_a_red_pipeline_does_not_approve() -> None:
    event = ReviewPosted.model_validate(
        {"revision_id": "r1", "head_sha": "h1", "verdict": "approve"}
    )
    _, commands = step(_in_review(pipeline="failure"), event, AUTO_MERGE)
    assert commands == []


# ---------------------------------------------------------------------------- 7. recovery


@pytest.mark.spec("S002-06")
def test_recovery_returns_an_in_progress_item_with_no_run_to_pending() -> None:
    _, commands = step(state(), WorkItemChanged(work_item=item("1", "in-progress")))
    assert transitions(commands) == [("1", "pending")]


def test_an_in_progress_transition_that_arrives_after_its_run_ended_is_recovered() -> None:
    before = state(
        item("1", "pending"), runs=[implementor_run("s1", status="cancelled", settled=True)]
    )
    event = StatusTransitioned.model_validate({"work_item_id": "1", "to": "in-progress"})
    _, commands = step(before, event)
    assert transitions(commands) == [("1", "pending")]


def test_an_in_progress_transition_with_its_run_going_changes_nothing() -> None:
    before = state(item("1", "pending"), runs=[implementor_run("s1")])
    event = StatusTransitioned.model_validate({"work_item_id": "1", "to": "in-progress"})
    _, commands = step(before, event)
    assert commands == []


def test_recovery_leaves_an_item_with_an_active_run_alone() -> None:
    before = state(runs=[implementor_run("s1")])
    _, commands = step(before, WorkItemChanged(work_item=item("1", "in-progress")))
    assert commands == []


def test_recovery_leaves_an_item_whose_patch_is_being_turned_into_a_revision_alone() -> None:
    before = state(runs=[implementor_run("s1", status="completed", outcome="completed")])
    _, commands = step(before, WorkItemChanged(work_item=item("1", "in-progress")))
    assert commands == []


def test_a_run_cancelled_by_shutdown_returns_the_item_to_pending_without_an_attempt() -> None:
    before = state(item("1", "in-progress"), runs=[implementor_run("s1")])
    after, commands = step(before, failed("s1", kind="cancelled"))
    assert transitions(commands) == [("1", "pending")]
    assert after.attempts.get("1", 0) == 0


def test_a_revision_write_that_failed_is_a_failed_attempt() -> None:
    run = implementor_run("s1", status="completed", outcome="completed")
    before = state(item("1", "in-progress"), runs=[run], attempts={"1": 1})
    command = CreateRevision(
        session_id="s1",
        work_item_id="1",
        branch_name="cpe/1-x",
        title="t",
        body="b",
        patch="p",
    )
    after, commands = step(before, CommandFailed(command=command, error="422"))
    assert transitions(commands) == [("1", "pending")]
    assert after.agent_runs["s1"].settled


def test_a_user_cancel_cancels_the_active_run() -> None:
    before = state(item("1", "in-progress"), runs=[implementor_run("s1")])
    after, commands = step(before, UserCancelledRun.model_validate({"session_id": "s1"}))
    assert commands == [CancelAgent(session_id="s1")]
    assert after.agent_runs["s1"].cancel_requested


def test_a_user_cancel_of_an_unknown_or_ended_run_emits_nothing() -> None:
    before = state(runs=[implementor_run("s1", status="failed")])
    for sid in ("s1", "ghost"):
        _, commands = step(before, UserCancelledRun.model_validate({"session_id": sid}))
        assert commands == []


def test_a_user_status_change_is_written_to_the_provider() -> None:
    before = state(item("1", "blocked"), attempts={"1": 3})
    event = UserTransitionedStatus.model_validate({"work_item_id": "1", "to": "pending"})
    after, commands = step(before, event)
    assert commands == [TransitionStatus(work_item_id="1", to="pending")]
    assert after.attempts["1"] == 0


def test_a_user_status_change_to_the_current_status_emits_nothing() -> None:
    event = UserTransitionedStatus.model_validate({"work_item_id": "1", "to": "blocked"})
    _, commands = step(state(item("1", "blocked")), event)
    assert commands == []


def test_a_spec_with_a_problem_is_not_planned_and_the_others_of_its_batch_are() -> None:
    bad = Spec(path="specs/bad.md", blob_sha="b1", problem="not UTF-8 text")
    before = state(specs=[bad])
    _, commands = step(before, SpecChanged(spec=spec("specs/good.md", "g1")))
    [start] = starts(commands, "planner")
    assert start.spec_shas == {"specs/good.md": "g1"}
    _, commands = step(state(), SpecChanged(spec=bad))
    assert starts(commands, "planner") == []


# ------------------------------------------------------------------ infrastructure failures


def _infra_failed(sid: str, role: str = "implementor", minute: int = 0) -> AgentFailed:
    return AgentFailed.model_validate(
        {
            "session_id": sid,
            "role": role,
            "kind": "failed",
            "reason": "the model API failed: Not logged in",
            "failure_class": "infrastructure",
            "at": f"2026-11-25T10:{minute:02d}:00Z",
        }
    )


def test_an_infrastructure_failure_spends_no_attempt_and_the_item_goes_back_to_pending() -> None:
    before = state(item("1", "in-progress"), runs=[implementor_run("s1")], attempts={"1": 2})
    after, commands = step(before, _infra_failed("s1"), HandlerOptions(max_attempts=3))
    assert after.attempts["1"] == 2
    assert transitions(commands) == [("1", "pending")]
    assert after.infrastructure.count == 1
    assert after.infrastructure.last_reason == "the model API failed: Not logged in"


def test_infrastructure_failures_do_not_count_against_a_planners_attempts() -> None:
    runs = [planner_run(f"p{n}", {"specs/a.md": "a1"}) for n in range(4)]
    current = state(specs=[spec("specs/a.md", "a1")], runs=runs)
    for n in range(3):
        current, _ = step(current, _infra_failed(f"p{n}", role="planner", minute=n))
    _, commands = step(current, _infra_failed("p3", role="planner", minute=3))
    assert len(starts(commands, "planner")) == 1  # still planned: none of them was its fault


def test_a_run_that_ends_otherwise_resets_the_streak() -> None:
    current = state(item("1", "in-progress"), runs=[implementor_run("s1"), implementor_run("s2")])
    current, _ = step(current, _infra_failed("s1"))
    current, _ = step(current, failed("s2"))
    assert current.infrastructure.count == 0


def test_dispatch_pauses_after_the_threshold_and_doubles_the_pause_with_each_failure() -> None:
    """Failures at 10:00, 10:01 … 10:04; from the third one the pause is 30 s after the last
    failure, then 60 s, then 120 s capped at 100 s."""
    current = state(runs=[implementor_run(f"s{n}") for n in range(5)])
    untils = []
    for n in range(5):
        current, _ = step(current, _infra_failed(f"s{n}", minute=n))
        pause = dispatch_pause(current, threshold=3, initial=30, maximum=100)
        untils.append(pause.until.strftime("%H:%M:%S") if pause else None)
    assert untils == [None, None, "10:02:30", "10:04:00", "10:05:40"]
    assert pause is not None
    assert (pause.failures, pause.reason) == (5, "the model API failed: Not logged in")


def test_dispatch_due_lets_what_waited_start() -> None:
    before = state(item("1", "pending"))
    _, commands = step(before, DispatchDue())
    assert len(starts(commands, "implementor")) == 1


# ---------------------------------------------------------------------------- retry backoff


def test_a_failed_item_retries_after_a_doubling_jittered_wait_capped() -> None:
    from datetime import UTC, datetime, timedelta  # noqa: PLC0415

    from domain.decisions import INTERRUPTED, implementor_backoff  # noqa: PLC0415

    t0 = datetime(2026, 11, 26, 9, 0, tzinfo=UTC)

    def wait(attempts: int, **run: Any) -> timedelta | None:
        fields = {"status": "failed", "ended_at": t0, "failure_reason": "tests failed", **run}
        snapshot = state(item("1", "pending"), runs=[implementor_run("s1", **fields)])
        snapshot = snapshot.model_copy(update={"attempts": {"1": attempts}})
        retry = implementor_backoff(snapshot, WorkItemId("1"), initial=30, maximum=900)
        return None if retry is None else retry.until - t0

    first, second, late = wait(1), wait(2), wait(9)
    assert first is not None
    assert second is not None
    assert late is not None
    assert timedelta(seconds=30) <= first < timedelta(seconds=37.5)  # jitter: up to 25 %
    assert second / first == 2  # the same run: the same jitter
    assert timedelta(seconds=900) <= late < timedelta(seconds=1125)  # capped, then jittered
    assert wait(1, status="timed-out") == first
    done = {"status": "completed", "settled": True}
    assert wait(1, **done, outcome="completed") == first  # nothing delivered
    # no wait: a revision delivered, the implementor said blocked, under the agent, interrupted
    assert wait(1, **done, delivered_revision="r1") is None
    assert wait(1, **done, outcome="blocked") is None
    assert wait(1, failure_class="infrastructure") is None
    assert wait(1, failure_reason=INTERRUPTED) is None
    assert wait(1, status="cancelled") is None


def test_items_whose_last_run_failed_are_dispatched_after_the_others() -> None:
    """A failed item waits for its backoff: it must not take the one slot another could use."""
    from datetime import UTC, datetime  # noqa: PLC0415

    failed = implementor_run(
        "s1", "1", status="failed", ended_at=datetime(2026, 11, 26, tzinfo=UTC)
    )
    before = state(item("1", "pending"), item("2", "pending"), runs=[failed])
    options = HandlerOptions(max_concurrent={"planner": 1, "implementor": 1, "reviewer": 1})
    _, commands = step(before, DispatchDue(), options)
    [start] = starts(commands, "implementor")
    assert start.params.work_item_id == "2"


def test_a_persons_request_is_marked_so_that_no_backoff_holds_it() -> None:
    before = state(item("1", "blocked"))
    _, commands = step(before, UserRequestedImplementorRun(work_item_id=WorkItemId("1")))
    [start] = starts(commands, "implementor")
    assert start.requested_by_user


# ---------------------------------------------------------------------------- reconciliation


def _cancels(commands: list[Any]) -> list[tuple[str, str]]:
    return [(c.session_id, c.reason) for c in commands if c.type == "CancelAgent"]


@pytest.mark.parametrize("status", ["blocked", "done", "in-review", "approved"])
def test_an_item_a_person_moves_under_its_running_implementor_cancels_the_run(status: str) -> None:
    before = state(item("1", "in-progress"), runs=[implementor_run("s1", "1")])
    _, commands = step(before, WorkItemChanged(work_item=item("1", status)))
    assert _cancels(commands) == [("s1", f"#1: run cancelled: set to {status} by a person")]


def test_a_deleted_item_or_a_gained_open_blocker_cancels_the_run_but_not_old_blockers() -> None:
    running = implementor_run("s1", "1", blocked_by_at_start=("2",))
    before = state(
        item("1", "in-progress", blocked_by=("2",)), item("2", "pending"), item("3"), runs=[running]
    )
    _, commands = step(before, WorkItemRemoved(work_item_id=WorkItemId("1")))
    assert _cancels(commands) == [("s1", "#1: run cancelled: the work item was deleted")]
    # a person's run went on despite #2: that blocker is no reason; a new one, #3, is
    _, commands = step(
        before, WorkItemChanged(work_item=item("1", "in-progress", blocked_by=("2",)))
    )
    assert _cancels(commands) == []
    after, commands = step(
        before, WorkItemChanged(work_item=item("1", "in-progress", blocked_by=("2", "3")))
    )
    assert _cancels(commands) == [("s1", "#1: run cancelled: it gained an open blocker: #3")]
    # when the cancelled run ends, the item waits for its blocker, with no attempt spent
    ended, commands = step(after, failed("s1", kind="cancelled"))
    assert TransitionStatus(work_item_id="1", to="pending") in commands  # others may start
    assert ended.attempts.get("1", 0) == 0


def test_a_revision_closed_or_merged_by_hand_cancels_its_reviewer() -> None:
    from tests.domain.builders import reviewer_run  # noqa: PLC0415

    before = state(
        item("1", "in-review", linked_revision="r1"),
        revisions=[revision("r1")],
        runs=[reviewer_run("v1")],
    )
    for gone in ("closed", "merged"):
        _, commands = step(before, RevisionChanged(revision=revision("r1", state=gone)))
        why = f"#1: run cancelled: revision r1 was {gone} by hand"
        assert _cancels(commands) == [("v1", why)]
    _, commands = step(before, RevisionRemoved(revision_id=RevisionId("r1")))
    assert _cancels(commands) == [("v1", "#1: run cancelled: revision r1 was deleted")]
    _, commands = step(before, RevisionChanged(revision=revision("r1", head="h2")))
    assert _cancels(commands) == []  # a new head: the stale review is handled when it ends


def test_an_item_past_its_budget_waits_instead_when_so_configured() -> None:
    spent = implementor_run("s1", "1", status="completed", settled=True, cost_usd=6.0)
    before = state(item("1", "pending"), runs=[spent])
    _, commands = step(before, DispatchDue(), HandlerOptions(item_budget_usd=5))
    why = "budget: its runs cost $6.00 of [budget] per_item_usd $5"
    assert commands == [TransitionStatus(work_item_id="1", to="blocked", reason=why)]
    waiting = HandlerOptions(item_budget_usd=5, block_on_item_budget=False)
    _, commands = step(before, DispatchDue(), waiting)
    assert commands == []
    _, commands = step(before, DispatchDue(), HandlerOptions(item_budget_usd=10))
    assert len(starts(commands, "implementor")) == 1

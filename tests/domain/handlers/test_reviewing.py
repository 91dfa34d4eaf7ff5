"""Handlers 5 and 6, revision and review done: what they emit, and when they must emit
nothing; a pipeline red where the default branch is red too."""

from __future__ import annotations

from typing import Any

from domain.commands import MergeRevision, PostReview, TransitionStatus
from domain.events import ReviewPosted, RevisionChanged, StatusTransitioned
from domain.handlers.options import HandlerOptions
from domain.models import ReviewerStartParams
from tests.domain.builders import item, reviewed, reviewer_run, revision, state, step
from tests.domain.handlers.support import AUTO_MERGE, DIRECT_MERGE, starts

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


def test_an_approval_given_while_the_pipeline_ran_approves_once_it_turns_green() -> None:
    """The reviewer started on a head CI had not reported on yet (no checks: acceptable), CI
    started meanwhile, and the approval was posted on a pending pipeline: the pipeline decides.
    When it turns green the item is approved — before, nothing ever moved it again (found on
    the fake GitLab under load: in-review with an approved, green merge request, for good)."""
    run = reviewer_run(head="h1", status="completed", settled=True, outcome="approve")
    before = _in_review(head="h1", reviewed_sha="h1", pipeline="pending")
    before = before.model_copy(update={"agent_runs": {run.session_id: run}})
    posted = ReviewPosted.model_validate(
        {"revision_id": "r1", "head_sha": "h1", "verdict": "approve"}
    )
    waiting, commands = step(before, posted, AUTO_MERGE)
    assert commands == []  # approved, but the pipeline runs
    green = revision("r1", head="h1", reviewed_sha="h1", pipeline="success")
    _, commands = step(waiting, RevisionChanged(revision=green), AUTO_MERGE)
    assert commands == [TransitionStatus(work_item_id="1", to="approved")]
    _, commands = step(waiting, RevisionChanged(revision=green), DIRECT_MERGE)
    assert commands == [
        TransitionStatus(work_item_id="1", to="approved"),
        MergeRevision(work_item_id="1", revision_id="r1"),
    ]


def test_changes_requested_while_the_pipeline_ran_approve_nothing_when_it_turns_green() -> None:
    run = reviewer_run(head="h1", status="completed", settled=True, outcome="needs-changes")
    before = _in_review(head="h1", reviewed_sha="h1", pipeline="pending")
    before = before.model_copy(update={"agent_runs": {run.session_id: run}})
    green = revision("r1", head="h1", reviewed_sha="h1", pipeline="success")
    _, commands = step(before, RevisionChanged(revision=green), AUTO_MERGE)
    assert commands == []

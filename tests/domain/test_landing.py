"""The merge queue (domain/landing.py and its reducer): driven through the real reducer and
handlers, one event at a time, as the engine does."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from domain.commands import MergeRevision, TransitionStatus, UpdateBranch
from domain.events import (
    BaselineChanged,
    BranchUpdated,
    CommandFailed,
    EngineEvent,
    LandingRefused,
    RevisionChanged,
    RevisionMerged,
    StatusTransitioned,
    WorkItemChanged,
)
from domain.handlers.options import HandlerOptions
from domain.landing import describe_queue, landing_queue, why_not_merged
from domain.models import (
    Baseline,
    EngineState,
    ImplementorStartParams,
    MergeWait,
    Pipeline,
    SentBack,
)
from tests.domain.builders import implemented, implementor_run, item, requested, revision, state
from tests.domain.builders import step as step_with

QUEUE = HandlerOptions(auto_merge=True, max_landing_rounds=2)
T0 = datetime(2026, 11, 28, 12, 0, tzinfo=UTC)


def step(before: EngineState, event: EngineEvent) -> tuple[EngineState, list[object]]:
    return step_with(before, event, QUEUE)


def approved(*wids: str, pipeline: str = "success") -> EngineState:
    """Items approved in the order given (a minute apart), each with its revision r<id> whose
    head h<id> was reviewed on a ``pipeline`` pipeline."""
    before = state(
        *(item(w, "in-review", linked_revision=f"r{w}") for w in wids),
        revisions=[
            revision(f"r{w}", w, head=f"h{w}", reviewed_sha=f"h{w}", pipeline=pipeline)
            for w in wids
        ],
    )
    for n, wid in enumerate(wids):
        before, _ = step(before, transitioned(wid, "approved", T0 + timedelta(minutes=n)))
    return before


def transitioned(wid: str, to: str, at: datetime | None = None, **extra: object) -> EngineEvent:
    return StatusTransitioned.model_validate({"work_item_id": wid, "to": to, "at": at, **extra})


def updated(wid: str, head: str, base: str, pipeline: str = "pending") -> BranchUpdated:
    rev = revision(f"r{wid}", wid, head=head, reviewed_sha=f"h{wid}", pipeline=pipeline)
    return BranchUpdated(work_item_id=wid, revision=rev, base_sha=base)


def seen(wid: str, head: str, pipeline: str, **fields: object) -> RevisionChanged:
    rev = revision(f"r{wid}", wid, head=head, reviewed_sha=f"h{wid}", pipeline=pipeline, **fields)
    return RevisionChanged(revision=rev)


def update(wid: str, head: str, stale: str | None = None) -> UpdateBranch:
    return UpdateBranch(work_item_id=wid, revision_id=f"r{wid}", head_sha=head, stale_base=stale)


def test_the_queue_keeps_the_order_of_approval_not_of_ids() -> None:
    before = approved("2", "1")
    assert [i.id for i, _ in landing_queue(before)] == ["2", "1"]


def test_an_approval_brings_the_first_entry_up_to_date_and_the_next_waits_its_turn() -> None:
    before = approved("1")
    second = item("2", "in-review", linked_revision="r2")
    rev = revision("r2", "2", head="h2", reviewed_sha="h2")
    before = before.model_copy(
        update={
            "work_items": {**before.work_items, "2": second},
            "revisions": {**before.revisions, "r2": rev},
        }
    )
    after, commands = step(before, transitioned("2", "approved", T0 + timedelta(hours=1)))
    assert commands == [update("1", "h1")]
    steps = [entry.step for entry in describe_queue(after)]
    assert steps[1] == "waits its turn"


def test_a_green_tested_head_is_merged_with_the_base_it_was_tested_on() -> None:
    before, _ = step(approved("1"), updated("1", "m1", "base1"))
    assert before.landing["r1"].tested_sha == "m1"
    assert before.revisions["r1"].head_sha == "m1"
    _after, commands = step(before, seen("1", "m1", "success"))
    assert commands == [
        MergeRevision(work_item_id="1", revision_id="r1", expected_base="base1", head_sha="m1")
    ]


def test_a_revision_already_up_to_date_is_merged_on_its_approved_green() -> None:
    after, commands = step(approved("1"), updated("1", "h1", "base1", pipeline="success"))
    assert after.landing["r1"].tests == 0  # no pipeline spent: the approved head was the tree
    assert commands == [
        MergeRevision(work_item_id="1", revision_id="r1", expected_base="base1", head_sha="h1")
    ]


def test_a_new_head_with_no_checks_yet_waits_where_the_approved_head_had_ci() -> None:
    before, _ = step(approved("1"), updated("1", "m1", "base1"))
    _, commands = step(before, seen("1", "m1", "none"))
    assert commands == []  # "none" here is CI not reported yet, not "no CI"


def test_without_ci_at_all_the_updated_head_lands() -> None:
    before, _ = step(approved("1", pipeline="none"), updated("1", "m1", "base1", "none"))
    _, commands = step(before, seen("1", "m1", "none"))
    assert [type(c) for c in commands] == [MergeRevision]


def test_a_head_reviewed_before_ci_reported_is_not_landed_untested_once_ci_was_seen() -> None:
    # The reviewer approved h1 before CI reported on it, but CI has reported on the default
    # branch: "none" is CI not reported yet, so the updated head waits for its checks.
    green = Baseline(sha="base1", pipeline=Pipeline(status="success"))
    before, _ = step(approved("1", pipeline="none"), BaselineChanged(baseline=green))
    assert before.pipelines_seen
    before, commands = step(before, updated("1", "m1", "base1", "none"))
    assert commands == []
    before, commands = step(before, seen("1", "m1", "none"))
    assert commands == []
    assert describe_queue(before)[0].step.startswith("testing m1")
    _, commands = step(before, seen("1", "m1", "failure"))
    assert [type(c) for c in commands] == [TransitionStatus]  # sent back, not merged


def test_pipelines_seen_stays_once_any_head_reported_a_pipeline() -> None:
    before, _ = step(approved("1", pipeline="none"), seen("1", "h1", "pending"))
    assert before.pipelines_seen
    after, _ = step(before, seen("1", "h1", "none"))
    assert after.pipelines_seen


def test_pipeline_required_true_never_lands_a_head_with_no_checks() -> None:
    options = HandlerOptions(auto_merge=True, pipeline_required=True)
    before, _ = step_with(
        approved("1", pipeline="none"), updated("1", "m1", "base1", "none"), options
    )
    assert not before.pipelines_seen
    _, commands = step_with(before, seen("1", "m1", "none"), options)
    assert commands == []
    assert describe_queue(before, required=True)[0].step.startswith("testing m1")


def test_pipeline_required_false_lands_a_head_with_no_checks_where_ci_skips_it() -> None:
    options = HandlerOptions(auto_merge=True, pipeline_required=False)
    green = Baseline(sha="base1", pipeline=Pipeline(status="success"))
    before, _ = step_with(approved("1", pipeline="none"), BaselineChanged(baseline=green), options)
    before, _ = step_with(before, updated("1", "m1", "base1", "none"), options)
    _, commands = step_with(before, seen("1", "m1", "none"), options)
    assert [type(c) for c in commands] == [MergeRevision]


def test_without_the_queue_an_approved_head_with_no_checks_is_not_merged_once_ci_was_seen() -> None:
    options = HandlerOptions(auto_merge=True, merge_queue=False)
    green = Baseline(sha="base1", pipeline=Pipeline(status="success"))
    before = approved("1", pipeline="none")
    _, commands = step_with(before, seen("1", "h1", "none"), options)
    assert [type(c) for c in commands] == [MergeRevision]  # no CI on this repository
    before, _ = step_with(before, BaselineChanged(baseline=green), options)
    _, commands = step_with(before, seen("1", "h1", "none"), options)
    assert commands == []
    _, commands = step_with(before, seen("1", "h1", "success"), options)
    assert [type(c) for c in commands] == [MergeRevision]


def test_a_tested_tree_that_fails_sends_the_item_back_with_the_failing_checks() -> None:
    before, _ = step(approved("1"), updated("1", "m1", "base1"))
    failing = seen("1", "m1", "failure", reason="ImportError: old_name", failed=("unit",))
    after, commands = step(before, failing)
    [command] = commands
    assert isinstance(command, TransitionStatus)
    assert command.to == "needs-refinement"
    assert command.landing is not None
    assert command.landing.problem == "failed"
    assert "ImportError: old_name" in command.landing.detail
    assert "unit" in command.landing.reason
    back, _ = step(after, transitioned("1", "needs-refinement", landing=command.landing))
    assert back.sent_back["1"].rounds == 1
    assert "r1" not in back.landing
    assert "1" not in back.approved_at


def test_a_red_tree_red_only_where_the_default_branch_is_red_is_held_and_the_next_goes() -> None:
    red = Baseline(sha="base1", pipeline=Pipeline(status="failure", failed_checks=("unit",)))
    before, _ = step(approved("1", "2"), BaselineChanged(baseline=red))
    before, _ = step(before, updated("1", "m1", "base1"))
    after, commands = step(before, seen("1", "m1", "failure", failed=("unit",)))
    assert commands == [update("2", "h2")]  # #1 lands nothing, sends nothing back
    assert "fails only where the default branch fails" in describe_queue(after)[0].step


def test_a_moved_default_branch_tests_the_entry_again_on_the_new_head() -> None:
    before, _ = step(approved("1"), updated("1", "m1", "base1"))
    moved = LandingRefused(work_item_id="1", revision_id="r1", kind="moved", reason="moved")
    after, commands = step(before, moved)
    assert after.landing["r1"].stale
    assert commands == [update("1", "m1", stale="base1")]
    again, _ = step(after, updated("1", "m2", "base2"))
    assert (again.landing["r1"].base_sha, again.landing["r1"].tests) == ("base2", 2)


def test_a_conflict_sends_the_item_back_and_is_recorded_for_its_next_prompt() -> None:
    refused = LandingRefused(
        work_item_id="1", revision_id="r1", kind="conflict", reason="conflicts in app.py",
        files=("app.py",), detail="app.py:\n<<<<<<< ours",
    )  # fmt: skip
    after, commands = step(approved("1"), refused)
    report = after.sent_back["1"]
    assert (report.problem, report.files, report.rounds) == ("conflict", ("app.py",), 1)
    assert commands == [
        TransitionStatus(
            work_item_id="1", to="needs-refinement", reason="conflicts in app.py", landing=report
        )
    ]


def test_past_max_landing_rounds_the_item_is_blocked() -> None:
    before = approved("1").model_copy(
        update={"sent_back": {"1": SentBack(problem="conflict", reason="before", rounds=2)}}
    )
    refused = LandingRefused(work_item_id="1", revision_id="r1", kind="conflict", reason="again")
    _, commands = step(before, refused)
    [command] = commands
    assert isinstance(command, TransitionStatus)
    assert command.to == "blocked"
    assert "sent back by the merge queue 2 times" in (command.reason or "")


def test_the_run_answering_a_send_back_spends_no_attempt_and_a_later_one_does() -> None:
    back = SentBack(problem="conflict", reason="conflicts", rounds=1)
    before = state(item("1", "needs-refinement"), attempts={"1": 1})
    before = before.model_copy(update={"sent_back": {"1": back}})
    params = ImplementorStartParams(work_item_id="1", branch_name="cpe/1-x")
    after, _ = step(before, requested(params, sid="s2"))
    assert after.agent_runs["s2"].landing_round
    assert after.sent_back["1"].answered_by == "s2"
    after, _ = step(after, implemented("s2"))
    assert after.attempts["1"] == 1
    after, _ = step(after, requested(params, sid="s3"))
    after, _ = step(after, implemented("s3"))
    assert not after.agent_runs["s3"].landing_round
    assert after.attempts["1"] == 2


def test_a_patch_that_no_longer_applies_gives_its_attempt_back_and_sends_the_item_back() -> None:
    run = implementor_run("s1", status="completed", outcome="completed")
    before = state(item("1", "in-progress"), runs=[run], attempts={"1": 1})
    refused = LandingRefused(
        work_item_id="1", session_id="s1", kind="conflict", reason="conflicts", files=("a.py",)
    )
    after, commands = step(before, refused)
    assert after.attempts["1"] == 0
    assert after.agent_runs["s1"].settled
    assert after.agent_runs["s1"].conflicted
    assert [(c.to, c.landing is not None) for c in commands] == [("needs-refinement", True)]


def test_a_head_pushed_outside_cpe_is_not_landed() -> None:
    before, _ = step(approved("1"), updated("1", "m1", "base1"))
    after, commands = step(before, seen("1", "pushed-by-a-person", "success"))
    assert commands == []
    assert "pushed outside cpe" in describe_queue(after)[0].step


def test_a_held_merge_is_asked_again_without_holding_the_queue() -> None:
    before, _ = step(approved("1", "2"), updated("1", "m1", "base1", pipeline="success"))
    wait = MergeWait(work_item_id="1", head_sha="m1", reason="a review is required")
    before = before.model_copy(update={"merge_waits": {"r1": wait}})
    _, commands = step(before, seen("1", "m1", "success"))
    assert commands == [
        MergeRevision(work_item_id="1", revision_id="r1", expected_base="base1", head_sha="m1"),
        update("2", "h2"),
    ]


def test_a_landing_is_recorded_with_its_time_in_queue_and_tests() -> None:
    before, _ = step(approved("1"), updated("1", "m1", "base1"))
    merged = RevisionMerged(revision_id="r1", merge_sha="merge1", at=T0 + timedelta(minutes=5))
    after, _ = step(before, merged)
    [landed] = after.landed
    assert (landed.work_item_id, landed.merge_sha, landed.tests) == ("1", "merge1", 1)
    assert landed.approved_at == T0
    assert after.landings_total == 1
    assert "r1" not in after.landing


def test_a_landing_a_poll_saw_before_its_result_is_counted_once() -> None:
    before, _ = step(approved("1"), updated("1", "m1", "base1"))
    before, _ = step(before, seen("1", "m1", "success", state="merged"))  # the poll, first
    merged = RevisionMerged(revision_id="r1", merge_sha="merge1", at=T0 + timedelta(minutes=5))
    after, _ = step(before, merged)
    assert after.landings_total == 1
    assert [entry.revision_id for entry in after.landed] == ["r1"]
    again, _ = step(after, merged)  # the same result delivered twice
    assert again.landings_total == 1


def test_the_item_landing_next_is_told_which_merge_moved_the_branch() -> None:
    params = ImplementorStartParams(work_item_id="2", branch_name="cpe/2-x")
    before, _ = step(approved("1", "2"), requested(params, sid="s2", at=T0))
    before, _ = step(before, updated("1", "h1", "base1", pipeline="success"))
    before, _ = step(before, RevisionMerged(revision_id="r1", merge_sha="abcdef123456789", at=T0))
    refused = LandingRefused(work_item_id="2", revision_id="r2", kind="conflict", reason="c")
    after, _ = step(before, refused)
    assert after.sent_back["2"].moved_by == "the merge of #1 (revision #r1, abcdef123456)"


def test_without_auto_merge_nothing_is_brought_up_to_date() -> None:
    before = approved("1")
    _, commands = step_with(before, seen("1", "h1", "success"), HandlerOptions())
    assert commands == []


def test_an_entry_held_on_a_red_default_branch_is_tested_again_once_the_branch_is_fixed() -> None:
    red = Baseline(sha="base1", pipeline=Pipeline(status="failure", failed_checks=("unit",)))
    before, _ = step(approved("1"), BaselineChanged(baseline=red))
    before, _ = step(before, updated("1", "m1", "base1"))
    before, commands = step(before, seen("1", "m1", "failure", failed=("unit",)))
    assert commands == []  # held
    fixed = Baseline(sha="base2", pipeline=Pipeline(status="success"))
    _, commands = step(before, BaselineChanged(baseline=fixed))
    assert commands == [update("1", "m1", stale="base1")]  # not sent back: tested again


def test_the_same_refusal_delivered_twice_is_one_round() -> None:
    refused = LandingRefused(
        work_item_id="1", revision_id="r1", kind="conflict", reason="c", head_sha="h1"
    )
    once, _ = step(approved("1"), refused)
    twice, _ = step(once, refused)
    assert twice.sent_back["1"].rounds == 1


def test_a_poll_seeing_an_item_outside_the_queue_does_not_ask_the_queue_again() -> None:
    before = approved("1")
    other = item("9", "in-review", linked_revision="r9")
    _, on_item = step(before, WorkItemChanged(work_item=other))
    _, on_revision = step(before, RevisionChanged(revision=revision("r9", "9", head="h9")))
    _, on_queued = step(before, seen("1", "h1", "success"))
    assert on_item == []
    assert [c for c in on_revision if isinstance(c, UpdateBranch)] == []
    assert on_queued == [update("1", "h1")]


def test_a_held_merge_whose_base_moved_meanwhile_is_tested_again_not_asked_again() -> None:
    before, _ = step(approved("1", "2"), updated("1", "m1", "base1", pipeline="success"))
    wait = MergeWait(work_item_id="1", head_sha="m1", reason="a review is required")
    before = before.model_copy(update={"merge_waits": {"r1": wait}})
    moved = LandingRefused(work_item_id="1", revision_id="r1", kind="moved", reason="moved")
    after, commands = step(before, moved)
    assert "r1" not in after.merge_waits
    assert commands == [update("1", "m1", stale="base1")]


def test_a_branch_update_that_failed_is_asked_again_at_the_next_poll_and_says_why() -> None:
    """The forge failing the queue's write (its retries spent) must not leave the queue waiting
    for an event that never comes: the revision is due each poll, the step asked again."""
    before = approved("1", "2")
    failed = CommandFailed(command=update("1", "h1"), error="GitLab: 502 Bad Gateway", at=T0)
    after, commands = step(before, failed)
    assert commands == []
    assert after.landing_failures["r1"].tries == 1
    [first, _second] = describe_queue(after)
    assert "the last try failed since 2026-11-28 12:00:00 UTC: GitLab: 502 Bad Gateway" in (
        first.step
    )
    assert "tried again each poll" in first.step
    # The next poll reports the revision unchanged (it is due): the step is asked again.
    again, commands = step(after, seen("1", "h1", "success"))
    assert commands == [update("1", "h1")]
    twice, _ = step(again, failed.model_copy(update={"at": T0 + timedelta(minutes=1)}))
    assert twice.landing_failures["r1"].tries == 2
    assert "failed, 2 times since" in describe_queue(twice)[0].step
    # It goes through: the failure is over.
    done, _ = step(twice, updated("1", "m1", "base1"))
    assert done.landing_failures == {}
    assert "failed" not in describe_queue(done)[0].step


def test_a_merge_that_failed_is_asked_again_and_a_new_head_ends_the_failure() -> None:
    before, _ = step(approved("1"), updated("1", "m1", "base1", pipeline="success"))
    merge = MergeRevision(work_item_id="1", revision_id="r1", expected_base="base1", head_sha="m1")
    after, _ = step(before, CommandFailed(command=merge, error="timed out", at=T0))
    assert after.landing_failures["r1"].step == "merge"
    _, commands = step(after, seen("1", "m1", "success"))
    assert commands == [merge]
    moved, _ = step(after, seen("1", "m2", "pending"))
    assert moved.landing_failures == {}


def test_without_the_queue_a_merge_that_failed_says_so_and_is_asked_again() -> None:
    plain = HandlerOptions(auto_merge=True, merge_queue=False)
    before = approved("1")
    merge = MergeRevision(work_item_id="1", revision_id="r1")
    after, _ = step_with(before, CommandFailed(command=merge, error="timed out", at=T0), plain)
    why = why_not_merged(after, after.work_items["1"], auto_merge=True, merge_queue=False)
    assert why is not None
    assert why.startswith("merging (the last try failed since")
    _, commands = step_with(after, seen("1", "h1", "success"), plain)
    assert [type(c).__name__ for c in commands] == ["MergeRevision"]

"""Handler 7, recovery and failures: what it emits, and when it must emit nothing; failures
under the agent; runs cancelled when their item changes under them."""

from __future__ import annotations

from typing import Any

import pytest

from domain.commands import CancelAgent, CreateRevision, TransitionStatus
from domain.decisions import dispatch_pause
from domain.events import (
    AgentFailed,
    CommandFailed,
    DispatchDue,
    RevisionChanged,
    RevisionRemoved,
    StatusTransitioned,
    UserCancelledRun,
    UserTransitionedStatus,
    WorkItemChanged,
    WorkItemRemoved,
)
from domain.handlers.options import HandlerOptions
from domain.models import RevisionId, WorkItemId
from tests.domain.builders import (
    implementor_run,
    item,
    planner_run,
    reviewer_run,
    revision,
    spec,
    state,
    step,
)
from tests.domain.handlers.support import failed, starts, transitions

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

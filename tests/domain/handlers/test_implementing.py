"""Handlers 3 and 4, dispatch and implementor done: what they emit, and when they must emit
nothing; the retry backoff of a failed item."""

from __future__ import annotations

from typing import Any

import pytest

from domain.commands import CreateRevision, TransitionStatus, UpdateRevision
from domain.events import (
    AgentRequested,
    DispatchDue,
    StatusTransitioned,
    UserRequestedImplementorRun,
    WorkItemChanged,
)
from domain.handlers.options import HandlerOptions
from domain.models import ImplementorStartParams, WorkItemId
from tests.domain.builders import implemented, implementor_run, item, revision, state, step
from tests.domain.handlers.support import failed, starts, transitions

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


def test_a_run_a_person_asked_for_that_a_guard_refused_takes_the_next_free_slot() -> None:
    """Trial of issue 39: on a busy engine each of three retries was answered "requested" (a
    slot looked free in the state) and refused by the executor's guard (the slot had just been
    taken); the items then waited behind every other pending one. The next slot is theirs."""
    from domain.commands import StartAgent  # noqa: PLC0415
    from domain.events import CommandRejected, UserTransitionedStatus  # noqa: PLC0415
    from domain.state import apply_event  # noqa: PLC0415
    from tests.domain.builders import requested  # noqa: PLC0415

    options = HandlerOptions(max_concurrent={"planner": 1, "implementor": 1, "reviewer": 1})
    busy = implementor_run("s1", "1", status="running")
    before = state(
        item("1", "in-progress"), item("2", "pending"), item("9", "blocked"), runs=[busy]
    )
    params = ImplementorStartParams(work_item_id=WorkItemId("9"), branch_name="cpe/9-x")
    refused = CommandRejected(
        command=StartAgent(params=params, requested_by_user=True),
        reason="1 implementor run is active (max_concurrent 1)",
    )
    waiting = apply_event(before, refused)
    assert waiting.asked == {"9"}
    # #1's run ends: the slot goes to #9 (blocked, asked for), not to #2 (pending, first in line)
    _, commands = step(waiting, failed("s1"), options)
    [start] = starts(commands, "implementor")
    assert (start.params.work_item_id, start.requested_by_user) == ("9", True)
    # its run requested, it waits for nothing more; a person's new decision forgets it too
    assert apply_event(waiting, requested(start.params, sid="s2")).asked == set()
    assert apply_event(waiting, UserTransitionedStatus(work_item_id="9", to="done")).asked == set()
    # cpe's own refused dispatch is not kept
    own = CommandRejected(command=StartAgent(params=params), reason="full")
    assert apply_event(before, own).asked == set()

"""The executor's log lines, word for word, and the parts of its results a person relies on.

Each line is what an operator reads to know why a command was refused, a run waits or dispatch
paused: its name and every one of its fields are asserted as they are written."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from structlog.testing import capture_logs

from actors.executor import EXECUTE_TIMEOUT, Execute, asking
from actors.settings import DailyBudget
from domain.commands import (
    CancelAgent,
    CreateRevision,
    MergeRevision,
    TransitionStatus,
    idempotency_key,
)
from domain.events import AgentRequested, CommandFailed, RevisionMerged
from domain.models import (
    AgentRun,
    EngineState,
    ImplementorStartParams,
    InfrastructureStreak,
    Revision,
    SessionId,
    WorkItem,
)
from domain.policy import DenyCommands
from tests.actors.test_executor import Rig, _failed_planner, _planner, implementor
from tests.domain.builders import implementor_run


@pytest.fixture
def rig(tmp_path: Path) -> Rig:
    return Rig(tmp_path)


def _lines(logs: list[dict[str, Any]], event: str) -> list[dict[str, Any]]:
    return [line for line in logs if line["event"] == event]


# ---------------------------------------------------------------------------- execute


def test_a_policy_rejection_is_logged_with_the_command_and_why(tmp_path: Path) -> None:
    rig = Rig(tmp_path, policy=DenyCommands(["MergeRevision"], "a person merges"))
    with capture_logs() as logs:
        rig.run(MergeRevision(work_item_id="1", revision_id="r1"))
    assert logs == [
        {
            "event": "command rejected by policy",
            "command": "MergeRevision",
            "reason": "MergeRevision: a person merges",
            "log_level": "info",
        }
    ]


def test_a_cancelled_run_is_logged_with_its_session_and_reason(rig: Rig) -> None:
    rig.run(implementor("1"))
    [sid] = rig.spawned
    got: list[str | None] = []
    rig.sessions.attach(SessionId(sid), lambda reason, _: got.append(reason))  # its canceller
    with capture_logs() as logs:
        assert rig.run(CancelAgent(session_id=sid, reason="the item was closed")) == []
    assert got == ["the item was closed"]  # the command's reason is the run's
    assert logs == [
        {
            "event": "agent run cancelled",
            "session_id": sid,
            "reason": "the item was closed",
            "log_level": "warning",
        }
    ]


def test_a_cancel_of_an_unknown_session_is_logged_as_such(rig: Rig) -> None:
    with capture_logs() as logs:
        assert rig.run(CancelAgent(session_id=SessionId("gone-1"))) == []
    assert logs == [
        {
            "event": "cancel of an unknown or ended session",
            "session_id": "gone-1",
            "log_level": "info",
        }
    ]


# ---------------------------------------------------------------------------- dispatch refused


def test_a_breaker_pause_is_logged_with_its_streak_and_next_try(rig: Rig) -> None:
    streak = InfrastructureStreak(count=3, last_at=rig.now, last_reason="API Error: refused")
    with capture_logs() as logs:
        rig.executor.execute(implementor("1"), EngineState(infrastructure=streak))
    assert _lines(logs, "dispatch paused") == [
        {
            "event": "dispatch paused",
            "reason": "API Error: refused",
            "failures_in_a_row": 3,
            "next_try_at": "2026-11-25T10:00:30+00:00",
            "log_level": "error",
        }
    ]


@pytest.mark.parametrize("refused_by", ["the executor", "the session manager"])
def test_a_refused_dispatch_is_logged_with_the_role_and_why(rig: Rig, refused_by: str) -> None:
    """Refused before it is asked for (the executor's shutdown flag) or when its session is
    registered (the session manager closed): the same line."""
    if refused_by == "the executor":
        rig.executor.no_new_agents.set()
    else:
        rig.sessions.close()
    with capture_logs() as logs:
        rig.run(implementor("1"))
    assert logs == [
        {
            "event": "agent dispatch rejected",
            "role": "implementor",
            "reason": "the engine is shutting down",
            "log_level": "info",
        }
    ]
    assert rig.spawned == []


def test_a_deferred_retry_is_logged_with_its_attempt_next_try_and_last_failure(rig: Rig) -> None:
    """The failure is said on one line, its runs of white space made single spaces."""
    run = implementor_run(
        "s1", "1", status="failed", ended_at=rig.now, failure_reason="tests  failed:\n  3 red"
    )
    snapshot = EngineState(agent_runs={"s1": run}, attempts={"1": 2})
    with capture_logs() as logs:
        rig.executor.execute(implementor("1"), snapshot)
    [wake] = rig.wakeups
    assert _lines(logs, "retry deferred") == [
        {
            "event": "retry deferred",
            "next_try_at": wake.isoformat(timespec="seconds"),
            "work_item_id": "1",
            "failed_attempt": 2,
            "last_failure": "tests failed: 3 red",
            "log_level": "warning",
        }
    ]


def test_a_deferred_planner_run_is_logged_with_its_failures_and_next_try(rig: Rig) -> None:
    one = EngineState(agent_runs={"p0": _failed_planner("p0", rig.now)})
    with capture_logs() as logs:
        rig.executor.execute(_planner(), one)
    assert _lines(logs, "planner run deferred") == [
        {
            "event": "planner run deferred",
            "next_try_at": "2026-11-25T10:00:30+00:00",
            "failures": 1,
            "last_failure": "the plan did not validate",
            "log_level": "warning",
        }
    ]


def test_a_spent_daily_budget_is_logged_with_what_was_spent_of_what(rig: Rig) -> None:
    rig.executor.daily_budget = DailyBudget(per_day_usd=10, timezone="UTC")
    run = implementor_run(
        "s1",
        "1",
        status="completed",
        settled=True,
        cost_usd=12.34567,
        ended_at=rig.now - timedelta(hours=1),
    )
    with capture_logs() as logs:
        rig.executor.execute(implementor("5"), EngineState(agent_runs={"s1": run}))
    event = "dispatch paused: the daily budget is spent"
    assert _lines(logs, event) == [
        {
            "event": event,
            "next_try_at": "2026-11-26T00:00:00+00:00",
            "spent_usd": 12.3457,
            "per_day_usd": 10.0,
            "log_level": "warning",
        }
    ]


def test_agent_requested_is_queued_even_once_the_inbox_refuses_outside_events(rig: Rig) -> None:
    """The executor's own event: the closed inbox (shutdown) still takes it, so the run it
    starts is never without its request in the journal."""
    rig.inbox.close()
    assert rig.run(implementor("1")) == []
    [requested] = rig.queued()
    assert isinstance(requested, AgentRequested)
    assert rig.spawned == [requested.session_id]


# ---------------------------------------------------------------------------- writes


def _failed_run_state(*, status: str = "in-progress") -> EngineState:
    params = ImplementorStartParams(session_id="s1", work_item_id="1", branch_name="cpe/1")
    run = AgentRun.model_validate(
        {"session_id": "s1", "params": params, "status": "failed", "failure_reason": "no key"}
    )
    return EngineState(
        work_items={"1": WorkItem(id="1", title="t", status=status)},
        agent_runs={"s1": run},
        attempts={"1": 3},
    )


def test_a_status_change_the_state_explains_does_not_repeat_the_commands_reason(
    rig: Rig,
) -> None:
    rig.tracker.add_item("1", "in-progress")
    command = TransitionStatus(work_item_id="1", to="blocked", reason="attempts exhausted")
    with capture_logs() as logs:
        rig.executor.execute(command, _failed_run_state())
    assert logs == [
        {
            "event": "status changed",
            "change": "#1 in-progress → blocked: attempts exhausted (3 runs); last run: no key",
            "log_level": "info",
        }
    ]


def test_a_status_change_the_state_cannot_explain_says_the_commands_reason(rig: Rig) -> None:
    rig.tracker.add_item("1", "pending")
    command = TransitionStatus(work_item_id="1", to="blocked", reason="a person asked")
    with capture_logs() as logs:
        rig.executor.execute(command, _failed_run_state(status="pending"))
    assert logs == [
        {
            "event": "status changed",
            "change": "#1 pending → blocked: a person asked",
            "log_level": "info",
        }
    ]


def test_a_status_the_item_has_already_is_written_again_and_logged_as_no_change(
    rig: Rig,
) -> None:
    # The workflow's in-progress row: a new run while the pending of the last one's end is on
    # its way. The write is made (the provider must hold in-progress last); nothing changed.
    rig.tracker.add_item("1", "pending")
    command = TransitionStatus(work_item_id="1", to="in-progress")
    with capture_logs() as logs:
        [result] = rig.executor.execute(command, _failed_run_state())
    assert rig.tracker.work_items["1"].status == "in-progress"
    assert result.to == "in-progress"
    assert logs == [
        {
            "event": "status written again",
            "work_item_id": "1",
            "status": "in-progress",
            "log_level": "info",
        }
    ]
    rig.tracker.add_item("2", "approved")
    again = TransitionStatus(work_item_id="2", to="blocked", reason="a person asked")
    snapshot = EngineState(work_items={"2": WorkItem(id="2", title="t", status="blocked")})
    with capture_logs() as logs:
        rig.executor.execute(again, snapshot)
    assert _lines(logs, "status written again") == [
        {
            "event": "status written again",
            "work_item_id": "2",
            "status": "blocked",
            "reason": "a person asked",
            "log_level": "info",
        }
    ]


def test_a_new_revision_is_asked_of_the_provider_for_its_work_item(rig: Rig) -> None:
    command = CreateRevision(
        session_id="s1", work_item_id="2", branch_name="cpe/2", title="T", body="B", patch="p"
    )
    [created] = rig.run(command)
    assert rig.tracker.log == [("create_from_patch", ("2", idempotency_key(command)))]
    assert created.revision.work_item_id == "2"


def test_a_merge_says_when_it_happened(rig: Rig) -> None:
    rig.tracker.revisions["r1"] = Revision.model_validate(
        {"id": "r1", "title": "t", "work_item_id": "1", "branch": "cpe/1", "head_sha": "h1"}
    )
    before = datetime.now(UTC)
    [merged] = rig.run(MergeRevision(work_item_id="1", revision_id="r1"))
    assert isinstance(merged, RevisionMerged)
    assert (merged.revision_id, merged.merge_sha) == ("r1", "merge-r1")
    assert merged.at is not None
    assert before <= merged.at <= datetime.now(UTC)


def test_a_resumed_write_is_logged_with_its_command_and_key(rig: Rig) -> None:
    command = CreateRevision(
        session_id="s1", work_item_id="1", branch_name="cpe/1", title="t", body="b", patch="p"
    )
    key = idempotency_key(command)
    rig.journal.begin_intent(key, command)
    with capture_logs() as logs:
        assert rig.executor.writes.resume_pending(EngineState()) == 1
    assert logs == [
        {
            "event": "resuming a write a crash interrupted",
            "command": "CreateRevision",
            "key": key,
            "log_level": "info",
        }
    ]


# ---------------------------------------------------------------------------- asking the actor


class _Ref:
    """An executor actor's ref: records what it was asked, answers or raises."""

    def __init__(self, answer: Any = None, error: Exception | None = None):
        self.answer, self.error = answer, error
        self.asked: list[tuple[Any, float | None]] = []

    def ask(self, message: Any, *, timeout: float | None = None) -> Any:
        self.asked.append((message, timeout))
        if self.error is not None:
            raise self.error
        return self.answer


def test_the_engine_asks_the_executor_with_a_bounded_wait() -> None:
    command, snapshot = MergeRevision(work_item_id="1", revision_id="r1"), EngineState()
    ref = _Ref(answer=["done"])
    assert asking(lambda: ref)(command, snapshot) == ["done"]  # type: ignore[arg-type]
    assert ref.asked == [(Execute(command, snapshot), EXECUTE_TIMEOUT)]


def test_an_executor_that_fails_to_answer_is_logged_with_its_error() -> None:
    command = MergeRevision(work_item_id="1", revision_id="r1")
    ref = _Ref(error=TimeoutError("no answer in 900 s"))
    with capture_logs() as logs:
        [failed] = asking(lambda: ref)(command, EngineState())  # type: ignore[arg-type]
    assert isinstance(failed, CommandFailed)
    assert failed.error == "executor: TimeoutError: no answer in 900 s"
    assert logs == [
        {
            "event": "command execution failed",
            "command": "MergeRevision",
            "error": "TimeoutError('no answer in 900 s')",
            "log_level": "error",
        }
    ]

"""The command executor on its own (no threads): policy, admission, guards, the session start."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from actors.executor import CommandExecutor
from actors.journal import Journal
from actors.queue import Inbox
from actors.session_registry import SessionManager
from actors.settings import RetrySettings
from domain.commands import (
    MergeRevision,
    StartAgent,
)
from domain.events import (
    AgentFailed,
    AgentRequested,
    CommandRejected,
    StatusTransitioned,
    UserTransitionedStatus,
)
from domain.models import (
    EngineState,
    ImplementorStartParams,
    PlannerStartParams,
    SessionId,
)
from domain.policy import AllowAll, DenyCommands
from tests.actors.conftest import Harness
from tests.fakes.provider import FakeTracker, fake_provider


class Rig:
    def __init__(self, tmp_path: Path, **kw: Any):
        self.tracker = FakeTracker()
        _, provider = fake_provider(self.tracker)
        self.journal_path = tmp_path / "j.sqlite3"
        self.journal = Journal(self.journal_path)
        self.inbox = Inbox(self.journal)
        self.sessions = SessionManager()
        self.spawned: list[str] = []
        self.waits: list[float] = []  # the retry waits, recorded instead of waited
        self.wakeups: list[datetime] = []  # the DispatchDue timers asked for
        self.now = datetime(2026, 11, 25, 10, 0, tzinfo=UTC)
        self.executor = CommandExecutor(
            work_item_writer=provider.work_item_writer,
            revision_writer=provider.revision_writer,
            policy=kw.get("policy", AllowAll()),
            journal=self.journal,
            inbox=self.inbox,
            sessions=self.sessions,
            spawn_session=lambda sid, params: self.spawned.append(sid),
            max_concurrent={"planner": 1, "implementor": 2, "reviewer": 1},
            retry=kw.get("retry", RetrySettings(attempts=3, initial_delay=0, max_delay=0)),
            wait=lambda seconds: self.waits.append(seconds) or False,
            breaker=kw.get("breaker"),
            wake_at=self.wakeups.append,
            clock=lambda: self.now,
        )

    def run(self, command: Any) -> list[Any]:
        return self.executor.execute(command, EngineState())

    def queued(self) -> list[Any]:
        return [entry.event for entry in self.journal.entries()]


@pytest.fixture
def rig(tmp_path: Path) -> Rig:
    return Rig(tmp_path)


def implementor(wid: str = "1") -> StartAgent:
    return StartAgent(params=ImplementorStartParams(work_item_id=wid, branch_name=f"cpe/{wid}"))


def test_start_agent_queues_agent_requested_before_the_session_starts(rig: Rig) -> None:
    assert rig.run(implementor()) == []
    [requested] = rig.queued()
    assert isinstance(requested, AgentRequested)
    assert requested.params.session_id == requested.session_id
    assert rig.spawned == [requested.session_id]


def test_one_run_per_work_item(rig: Rig) -> None:
    rig.run(implementor("1"))
    [rejected] = rig.run(implementor("1"))
    assert isinstance(rejected, CommandRejected)
    assert "already active for work item 1" in rejected.reason


def test_one_planner_at_a_time(rig: Rig) -> None:
    plan = StartAgent(params=PlannerStartParams(spec_paths=("a.md",)))
    rig.run(plan)
    [rejected] = rig.run(plan)
    assert "one at a time" in rejected.reason


def test_max_concurrent_per_role(rig: Rig) -> None:
    rig.run(implementor("1"))
    rig.run(implementor("2"))
    [rejected] = rig.run(implementor("3"))
    assert "max_concurrent 2" in rejected.reason
    rig.sessions.ended(rig.spawned[0])
    assert rig.run(implementor("3")) == []


def test_policy_rejection_is_a_command_rejected(tmp_path: Path) -> None:
    rig = Rig(tmp_path, policy=DenyCommands(["MergeRevision"], "a person merges"))
    before = datetime.now(UTC)
    [rejected] = rig.run(MergeRevision(work_item_id="1", revision_id="r1"))
    assert isinstance(rejected, CommandRejected)
    assert rejected.reason == "MergeRevision: a person merges"
    assert rejected.at is not None
    assert rejected.at >= before
    assert rig.tracker.calls["merge"] == 0


def test_a_session_that_cannot_start_is_one_agent_failed_saying_why(tmp_path: Path) -> None:
    """The run was journaled requested; its session could not be started, so it ends failed
    at once (with the error) and its slot is free again."""
    rig = Rig(tmp_path)

    def refuse(session_id: str, params: Any) -> None:
        raise RuntimeError("no threads left")

    rig.executor.spawn_session = refuse
    before = datetime.now(UTC)
    assert rig.run(implementor("1")) == []
    requested, failed = rig.queued()
    assert isinstance(requested, AgentRequested)
    assert isinstance(failed, AgentFailed)
    assert (failed.session_id, failed.role, failed.kind) == (
        requested.session_id,
        "implementor",
        "failed",
    )
    assert failed.reason == "the session could not start: RuntimeError: no threads left"
    assert failed.at is not None
    assert failed.at >= before
    assert rig.sessions.active() == []


def test_a_persons_pause_holds_dispatch_saying_since_when_and_why(rig: Rig) -> None:
    from domain.models import ManualPause  # noqa: PLC0415

    paused = EngineState(manual_pause=ManualPause(reason="deploy freeze", at=rig.now))
    [rejected] = rig.executor.execute(implementor("1"), paused)
    assert rejected.reason == (
        "dispatch paused by a person since 2026-11-25 10:00:00 UTC: deploy freeze"
    )
    assert rig.spawned == []


def test_no_agent_starts_once_shutdown_began(rig: Rig) -> None:
    rig.sessions.close()
    [rejected] = rig.run(implementor())
    assert "shutting down" in rejected.reason
    assert rig.spawned == []


# ---------------------------------------------------------------------------- in a real engine


@pytest.mark.spec("S002-23")
def test_without_a_policy_commands_are_executed(harness: Harness) -> None:
    harness.tracker.add_item("1", "blocked")
    engine = harness.engine()
    assert engine.config.policy is None
    engine.start()
    engine.enqueue(UserTransitionedStatus.model_validate({"work_item_id": "1", "to": "pending"}))
    # TransitionStatus was executed against the provider; the pending item then got a run
    # (StartAgent executed too)
    run = harness.runtime.wait_run()
    assert ("transition_status", ("1", "pending")) in harness.tracker.log
    assert run.params.work_item_id == "1"
    journaled = [e.event for e in engine.journal.entries()]  # its own connection sees it all
    assert any(isinstance(e, StatusTransitioned) for e in journaled)
    assert any(isinstance(e, AgentRequested) for e in journaled)
    assert not [e for e in journaled if isinstance(e, CommandRejected)]


# ---------------------------------------------------------------------------- the breaker


def _streak(count: int, last: datetime) -> EngineState:
    from domain.models import InfrastructureStreak  # noqa: PLC0415

    streak = InfrastructureStreak(count=count, last_at=last, last_reason="API Error: refused")
    return EngineState(infrastructure=streak)


def test_while_dispatch_is_paused_no_run_starts_and_a_wakeup_is_asked_once(rig: Rig) -> None:
    paused = _streak(3, rig.now)  # the default breaker: 3 failures, then 30 s
    for _ in range(2):
        [rejected] = rig.executor.execute(implementor(), paused)
        assert isinstance(rejected, CommandRejected)
        assert rejected.reason == (
            "dispatch paused: API Error: refused; next try at 2026-11-25 10:00:30 UTC"
        )
    assert rig.spawned == []
    assert rig.wakeups == [rig.now + timedelta(seconds=30)]


def test_past_the_pause_one_probe_run_starts_alone(rig: Rig) -> None:
    paused = _streak(3, rig.now)
    rig.now += timedelta(seconds=31)
    assert rig.executor.execute(implementor("1"), paused) == []  # the probe
    [rejected] = rig.executor.execute(implementor("2"), paused)
    assert rejected.reason == "dispatch paused: a probe run is under way"
    assert len(rig.spawned) == 1


def test_below_the_threshold_dispatch_goes_on(rig: Rig) -> None:
    assert rig.executor.execute(implementor(), _streak(2, rig.now)) == []
    assert len(rig.spawned) == 1


# ---------------------------------------------------------------------------- planner backoff


def _failed_planner(sid: str, ended: datetime, *, cls: str = "work") -> Any:
    from tests.domain.builders import planner_run  # noqa: PLC0415

    return planner_run(
        sid,
        {"specs/a.md": "a1"},
        status="failed",
        ended_at=ended,
        failure_reason="the plan did not validate",
        failure_class=cls,
    )


def _planner() -> StartAgent:
    from domain.models import PlannerStartParams  # noqa: PLC0415

    return StartAgent(
        params=PlannerStartParams(spec_paths=("specs/a.md",)), spec_shas={"specs/a.md": "a1"}
    )


def test_a_failed_planner_runs_again_only_after_an_exponential_backoff(rig: Rig) -> None:
    """30 s after one failure (the default), 60 s after two; a wake-up is asked once a wait."""
    from structlog.testing import capture_logs  # noqa: PLC0415

    one = EngineState(agent_runs={"p0": _failed_planner("p0", rig.now)})
    with capture_logs() as logs:
        for _ in range(2):
            [rejected] = rig.executor.execute(_planner(), one)
            assert rejected.reason == (
                "planner waits after 1 failed run(s); next try at 2026-11-25 10:00:30 UTC"
            )
    deferred = [e for e in logs if e["event"] == "planner run deferred"]
    assert [e["last_failure"] for e in deferred] == ["the plan did not validate"]
    assert rig.wakeups == [rig.now + timedelta(seconds=30)]
    two = EngineState(
        agent_runs={
            "p0": _failed_planner("p0", rig.now - timedelta(minutes=5)),
            "p1": _failed_planner("p1", rig.now),
        }
    )
    [rejected] = rig.executor.execute(_planner(), two)
    assert rejected.reason.endswith("next try at 2026-11-25 10:01:00 UTC")
    assert rig.spawned == []
    rig.now += timedelta(seconds=61)
    assert rig.executor.execute(_planner(), two) == []
    assert len(rig.spawned) == 1


def test_an_infrastructure_failure_does_not_back_the_planner_off(rig: Rig) -> None:
    """The breaker answers for those; the planner's own backoff counts work failures only."""
    snapshot = EngineState(agent_runs={"p0": _failed_planner("p0", rig.now, cls="infrastructure")})
    assert rig.executor.execute(_planner(), snapshot) == []
    assert len(rig.spawned) == 1


def test_a_failed_items_retry_waits_for_its_backoff_unless_a_person_asks(rig: Rig) -> None:
    """The retry is rejected with when it may go, one wake-up is asked for that time, and it
    starts once the (injected) clock is past it; a person's request does not wait."""
    from tests.domain.builders import implementor_run  # noqa: PLC0415

    run = implementor_run("s1", "1", status="failed", ended_at=rig.now, failure_reason="red")
    snapshot = EngineState(agent_runs={"s1": run}, attempts={"1": 1})
    [rejected] = rig.executor.execute(implementor("1"), snapshot)
    assert rejected.reason.startswith("#1: retry at 2026-11-25 10:00:3")
    [rejected] = rig.executor.execute(implementor("1"), snapshot)
    [wake] = rig.wakeups
    assert timedelta(seconds=30) <= wake - rig.now < timedelta(seconds=37.5)
    assert rig.spawned == []
    asked = implementor("1").model_copy(update={"requested_by_user": True})
    assert rig.executor.execute(asked, snapshot) == []
    assert len(rig.spawned) == 1
    rig.sessions.ended(SessionId(rig.spawned[0]))  # that run ended: the slot is free
    rig.now = wake
    # decided on a state that has not taken that run in: not yet
    [rejected] = rig.executor.execute(implementor("1"), snapshot)
    assert "has not been processed to its end yet" in rejected.reason
    theirs = implementor_run(rig.spawned[0], "1", status="cancelled", ended_at=rig.now)
    runs = {"s1": run, rig.spawned[0]: theirs}
    seen = EngineState(agent_runs=runs, attempts={"1": 1})
    assert rig.executor.execute(implementor("1"), seen) == []
    assert len(rig.spawned) == 2


# ---------------------------------------------------------------------------- budgets


def test_the_daily_budget_pauses_dispatch_until_the_next_day(tmp_path: Path) -> None:
    """Runs that ended today (in the budget's time zone) cost $12 of $10: no run starts, one
    wake-up at the next local midnight; the next day (an injected clock) they start again."""
    from actors.settings import DailyBudget  # noqa: PLC0415
    from tests.domain.builders import implementor_run  # noqa: PLC0415

    rig = Rig(tmp_path)
    rig.executor.daily_budget = DailyBudget(per_day_usd=10, timezone="Europe/Paris")
    rig.now = datetime(2026, 11, 25, 21, 0, tzinfo=UTC)  # 22:00 in Paris
    earlier = [
        implementor_run(
            f"s{n}",
            str(n),
            status="completed",
            settled=True,
            cost_usd=4.0,
            ended_at=rig.now - timedelta(hours=n),
        )
        for n in (1, 2, 3)
    ]
    yesterday = implementor_run(
        "s9",
        "9",
        status="completed",
        settled=True,
        cost_usd=50.0,
        ended_at=datetime(2026, 11, 24, 22, 30, tzinfo=UTC),  # 23:30 in Paris: yesterday
    )
    snapshot = EngineState(agent_runs={r.session_id: r for r in [*earlier, yesterday]})
    [rejected] = rig.executor.execute(implementor("5"), snapshot)
    assert rejected.reason == (
        "dispatch paused: the daily budget is spent ($12.00 of $10.00); "
        "next try at 2026-11-26T00:00+01:00"
    )
    [wake] = rig.wakeups
    assert wake == datetime(2026, 11, 25, 23, 0, tzinfo=UTC)
    assert rig.spawned == []
    rig.now = wake
    assert rig.executor.execute(implementor("5"), snapshot) == []
    assert len(rig.spawned) == 1


def test_with_no_daily_budget_its_time_zone_is_not_looked_up(rig: Rig) -> None:
    """The budget's zone matters only for a budget: without one, a zone this machine does not
    know holds no run up (admission looks it up only to count a day)."""
    from actors.settings import DailyBudget  # noqa: PLC0415

    rig.executor.daily_budget = DailyBudget(per_day_usd=0, timezone="Nowhere/Atlantis")
    assert rig.run(implementor()) == []
    assert len(rig.spawned) == 1

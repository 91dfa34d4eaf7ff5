"""The engine's observer (``actors.observer``): every watcher told of every event, a failing one
logged and skipped, and the log lines a person must see that no command shows: a spec version
the planner gave up on (attempts or budget spent), the default branch's pipeline red and green
again. Each line is checked as the JSON log has it; the states come from the domain's own
``apply_event``, as on the engine's thread."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from actors.logs import configure_logging
from actors.observer import Observer
from domain.errors import FailureClass
from domain.events import (
    AgentFailed,
    AgentRequested,
    BaselineChanged,
    BaselineRemoved,
    EngineEvent,
)
from domain.handlers.options import HandlerOptions
from domain.models import (
    Baseline,
    EngineState,
    ImplementorStartParams,
    Pipeline,
    PipelineStatus,
    PlannerStartParams,
    SessionId,
)
from domain.state import apply_event
from tests.actors.test_logs import Lines, _quiet

SPEC, OTHER = "specs/auth.md", "specs/billing.md"
SHA = "0123456789abcdef0123456789abcdef01234567"
SHA2 = "fedcba9876543210fedcba9876543210fedcba98"


@pytest.fixture
def log() -> Iterator[Lines]:
    out = Lines()
    configure_logging("debug", "json", out)
    yield out
    _quiet()


def said(out: Lines) -> list[dict[str, Any]]:
    """The observer's lines, without what every line carries."""
    return [
        {k: v for k, v in line.items() if k not in ("timestamp", "logger")} for line in out.lines()
    ]


class Loop:
    """The engine's part around the observer: each event applied, then observed."""

    def __init__(self, **options: Any):
        self.observer = Observer(HandlerOptions(**options))
        self.state = EngineState()
        self.runs = 0

    def observe(self, event: EngineEvent) -> None:
        before = self.state
        self.state = apply_event(before, event)
        self.observer(event, before, self.state)

    def planner_fails(
        self,
        shas: dict[str, str],
        reason: str = "exit 1",
        cost_usd: float | None = None,
        failure_class: FailureClass = "work",
    ) -> None:
        self.runs += 1
        sid = SessionId(f"planner-{self.runs}")
        params = PlannerStartParams(session_id=sid, spec_paths=tuple(shas))
        self.observe(AgentRequested(session_id=sid, params=params, spec_shas=shas))
        self.observe(
            AgentFailed(
                session_id=sid,
                role="planner",
                kind="failed",
                reason=reason,
                cost_usd=cost_usd,
                failure_class=failure_class,
            )
        )

    def baseline(self, status: PipelineStatus, sha: str = SHA, **pipeline: Any) -> None:
        self.observe(
            BaselineChanged(
                baseline=Baseline(sha=sha, pipeline=Pipeline(status=status, **pipeline))
            )
        )


# ---------------------------------------------------------------------------- watchers


def test_every_watcher_is_told_of_every_event_until_it_unwatches() -> None:
    loop = Loop()
    told: list[tuple[str, EngineEvent, EngineState, EngineState]] = []
    unwatch = loop.observer.watch(lambda e, b, s: told.append(("first", e, b, s)))
    loop.observer.watch(lambda e, b, s: told.append(("second", e, b, s)))
    before = loop.state
    loop.planner_fails({SPEC: SHA})
    requested, failed = [e for name, e, _, _ in told if name == "first"]
    assert isinstance(requested, AgentRequested)
    assert isinstance(failed, AgentFailed)
    assert [name for name, *_ in told] == ["first", "second"] * 2
    assert told[0][2:] == (before, apply_event(before, requested))
    assert told[-1][3] is loop.state
    told.clear()
    unwatch()
    unwatch()  # a second time: nothing to do
    loop.observe(BaselineRemoved())
    assert [(name, event) for name, event, *_ in told] == [("second", BaselineRemoved())]


def test_a_failing_watcher_is_logged_and_the_others_are_still_told(log: Lines) -> None:
    loop = Loop()

    def broken(*_: Any) -> None:
        raise RuntimeError("the dashboard went away")

    told: list[EngineEvent] = []
    loop.observer.watch(broken)
    loop.observer.watch(lambda e, b, s: told.append(e))
    loop.observe(BaselineRemoved())
    assert told == [BaselineRemoved()]
    [line] = log.lines()
    assert (line["event"], line["level"], line["watcher"]) == (
        "an event watcher failed",
        "error",
        repr(broken),
    )
    assert "the dashboard went away" in str(line["exception"])


# ---------------------------------------------------------------------------- planner attempts


def test_a_spec_version_out_of_planner_attempts_is_said_once(log: Lines) -> None:
    loop = Loop(max_attempts=2)
    loop.planner_fails({SPEC: SHA})
    assert log.lines() == []  # an attempt is left
    loop.planner_fails({SPEC: SHA}, reason="the plan\n  did not   parse " + "x" * 400)
    assert said(log) == [
        {
            "event": "spec not planned again until it changes",
            "level": "error",
            "spec": SPEC,
            "blob_sha": SHA[:12],
            "failed_planner_runs": 2,
            "last_failure": ("the plan did not parse " + "x" * 400)[:300],
        }
    ]
    loop.planner_fails({SPEC: SHA})  # past the limit (a person's retry): said already
    assert len(log.lines()) == 1


def test_each_spec_a_failed_run_planned_is_counted_on_its_own(log: Lines) -> None:
    loop = Loop(max_attempts=2)
    loop.planner_fails({SPEC: SHA})
    loop.planner_fails({SPEC: SHA, OTHER: SHA2}, reason="")
    assert [(line["spec"], line["blob_sha"], line["last_failure"]) for line in log.lines()] == [
        (SPEC, SHA[:12], "")
    ]


def test_an_infrastructure_failure_spends_no_attempt_and_says_nothing(log: Lines) -> None:
    loop = Loop(max_attempts=1)
    loop.planner_fails({SPEC: SHA}, failure_class="infrastructure")
    assert log.lines() == []
    loop.planner_fails({SPEC: SHA})
    loop.planner_fails({SPEC: SHA}, failure_class="infrastructure")  # after: nothing again
    assert [line["event"] for line in log.lines()] == ["spec not planned again until it changes"]


def test_only_a_planners_failure_is_about_a_spec(log: Lines) -> None:
    loop = Loop(max_attempts=1)
    sid = SessionId("implementor-1")
    params = ImplementorStartParams(session_id=sid, work_item_id="7", branch_name="cpe/7")  # type: ignore[arg-type]
    loop.observe(AgentRequested(session_id=sid, params=params, spec_shas={SPEC: SHA}))
    loop.observe(AgentFailed(session_id=sid, role="implementor", kind="failed", reason="x"))
    # a failure of a run the state does not know (its request not journaled): nothing to say
    loop.observe(
        AgentFailed(session_id=SessionId("planner-9"), role="planner", kind="failed", reason="x")
    )
    assert log.lines() == []


# ---------------------------------------------------------------------------- planning budget


def test_the_run_that_spends_a_spec_versions_budget_is_said(log: Lines) -> None:
    loop = Loop(max_attempts=10, spec_budget_usd=1.0)
    loop.planner_fails({SPEC: SHA, OTHER: SHA2}, cost_usd=0.4)
    assert log.lines() == []
    loop.planner_fails({SPEC: SHA}, cost_usd=0.623456)
    assert said(log) == [
        {
            "event": "spec not planned again until it changes: its planning budget is spent",
            "level": "error",
            "spec": SPEC,
            "blob_sha": SHA[:12],
            "spent_usd": 1.0235,
            "per_spec_usd": 1.0,
        }
    ]
    loop.planner_fails({SPEC: SHA}, cost_usd=0.5)  # spent already before this run
    loop.planner_fails({OTHER: SHA2}, cost_usd=0.6, failure_class="infrastructure")
    loop.planner_fails({OTHER: SHA2}, cost_usd=0.1)  # it was exactly spent before this run
    assert [(line["spec"], line["spent_usd"]) for line in log.lines()] == [
        (SPEC, 1.0235),
        (OTHER, 1.0),  # exactly the budget is spent; an infrastructure failure costs too
    ]


def test_without_a_planning_budget_no_cost_is_too_much(log: Lines) -> None:
    loop = Loop(max_attempts=10)
    loop.planner_fails({SPEC: SHA}, cost_usd=1_000.0)
    assert log.lines() == []


# ---------------------------------------------------------------------------- the baseline


def test_a_red_default_branch_is_said_once_with_what_failed(log: Lines) -> None:
    loop = Loop()
    loop.baseline("pending")
    loop.baseline("success")  # green from the first: nothing to say
    assert log.lines() == []
    reason = "y" * 600 + "\nlint failed:\n   E501 line too long\n"  # its end says why
    loop.baseline(
        "failure",
        reason=reason,
        url="https://ci.example/run/1",
        failed_checks=("lint", "unit"),
    )
    loop.baseline("pending")  # a rerun on the same head
    loop.baseline("failure")  # the same head, still red: said already
    assert said(log) == [
        {
            "event": "the default branch's pipeline is red",
            "level": "error",
            "head_sha": SHA[:12],
            "failed_checks": ["lint", "unit"],
            "reason": ("y" * 600 + " lint failed: E501 line too long")[-500:],  # the end
            "log_url": "https://ci.example/run/1",
            "revisions_failing_the_same_checks": "reviewed, not charged, not merged automatically",
        }
    ]


def test_a_default_branch_green_again_is_said(log: Lines) -> None:
    loop = Loop(charge_baseline_failures=True)
    loop.baseline("failure")
    loop.baseline("failure", sha=SHA2)  # a new head, red too: said again
    loop.baseline("success", sha=SHA2)
    loop.baseline("success", sha=SHA)  # green after green: nothing more
    assert said(log) == [
        {
            "event": "the default branch's pipeline is red",
            "level": "error",
            "head_sha": head[:12],
            "failed_checks": [],
            "reason": "",
            "log_url": None,
            "revisions_failing_the_same_checks": "charged to the implementor",
        }
        for head in (SHA, SHA2)
    ] + [
        {
            "event": "the default branch's pipeline is green again",
            "level": "info",
            "head_sha": SHA2[:12],
        }
    ]

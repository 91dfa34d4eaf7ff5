"""Decisions on when work waits, tested on their own: the planner's backoff."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from domain.decisions import PlannerBackoff, planner_backoff
from domain.models import AgentRun
from tests.domain.builders import planner_run, spec, state

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def failed_on(sid: str, shas: dict[str, str], minutes: int, **fields: Any) -> AgentRun:
    return planner_run(
        sid,
        shas,
        status=str(fields.pop("status", "failed")),
        ended_at=T0 + timedelta(minutes=minutes),
        failure_reason=fields.pop("failure_reason", f"{sid} broke"),
        **fields,
    )


def backoff(
    *runs: AgentRun, shas: dict[str, str] | None = None, initial: float = 30, maximum: float = 900
) -> PlannerBackoff | None:
    wanted = shas if shas is not None else {"specs/a.md": "a1"}
    current = state(specs=[spec(p, sha) for p, sha in wanted.items()], runs=runs)
    return planner_backoff(current, wanted, initial=initial, maximum=maximum)


def test_no_failure_on_the_batch_means_no_backoff() -> None:
    assert backoff() is None
    # failures on another version, or another spec, are not this batch's
    assert backoff(failed_on("p1", {"specs/a.md": "a0"}, 1)) is None
    assert backoff(failed_on("p1", {"specs/b.md": "b1"}, 1)) is None


def test_one_failure_waits_the_initial_delay_after_it_ended_with_its_reason() -> None:
    found = backoff(failed_on("p1", {"specs/a.md": "a1"}, 5, failure_reason="no plan"))
    assert found == PlannerBackoff(
        until=T0 + timedelta(minutes=5, seconds=30), reason="no plan", failures=1
    )


def test_each_further_failure_doubles_the_delay_from_the_last_one_up_to_the_cap() -> None:
    runs = [failed_on(f"p{n}", {"specs/a.md": "a1"}, n) for n in range(1, 4)]
    found = backoff(*runs)
    assert found is not None
    assert (found.failures, found.reason) == (3, "p3 broke")
    assert found.until == T0 + timedelta(minutes=3, seconds=120)  # 30, 60, 120
    capped = backoff(*runs, maximum=50)
    assert capped is not None
    assert capped.until == T0 + timedelta(minutes=3, seconds=50)


def test_the_last_failure_is_the_one_that_ended_last_whatever_its_order() -> None:
    late = failed_on("p-late", {"specs/a.md": "a1"}, 9, status="timed-out", failure_reason=None)
    early = failed_on("p-early", {"specs/a.md": "a1"}, 2)
    found = backoff(late, early)
    assert found is not None
    assert found.until == T0 + timedelta(minutes=9, seconds=60)
    assert found.reason == "timed-out"  # no reason recorded: its status says it


def test_infrastructure_failures_and_cancelled_runs_do_not_count() -> None:
    """Those are the breaker's business (or nobody's): no backoff of the planner for them."""
    infra = failed_on("p1", {"specs/a.md": "a1"}, 1, failure_class="infrastructure")
    cancelled = failed_on("p2", {"specs/a.md": "a1"}, 2, status="cancelled")
    assert backoff(infra, cancelled) is None
    work = failed_on("p3", {"specs/a.md": "a1"}, 3)
    found = backoff(infra, cancelled, work)
    assert found is not None
    assert (found.failures, found.until) == (1, T0 + timedelta(minutes=3, seconds=30))


def test_a_batch_waits_for_its_most_failed_spec() -> None:
    shas = {"specs/a.md": "a1", "specs/b.md": "b1"}
    runs = [
        failed_on("p1", {"specs/a.md": "a1"}, 1),
        failed_on("p2", {"specs/a.md": "a1", "specs/b.md": "b1"}, 2),
    ]
    found = backoff(*runs, shas=shas)
    assert found is not None
    assert (found.failures, found.until) == (2, T0 + timedelta(minutes=2, seconds=60))

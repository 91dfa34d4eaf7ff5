"""Handlers 1 and 2, plan and apply plan: what they emit, and when they must emit nothing."""

from __future__ import annotations

from domain.commands import ApplyPlan
from domain.events import EngineEvent, PlanApplied, PlannerCompleted, SpecChanged
from domain.handlers.options import HandlerOptions
from domain.models import PlannerStartParams, Spec
from domain.results import PlannedWorkItem, PlannerResult
from tests.domain.builders import planner_run, requested, spec, state, step
from tests.domain.handlers.support import failed, starts

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


def test_a_spec_with_a_problem_is_not_planned_and_the_others_of_its_batch_are() -> None:
    bad = Spec(path="specs/bad.md", blob_sha="b1", problem="not UTF-8 text")
    before = state(specs=[bad])
    _, commands = step(before, SpecChanged(spec=spec("specs/good.md", "g1")))
    [start] = starts(commands, "planner")
    assert start.spec_shas == {"specs/good.md": "g1"}
    _, commands = step(state(), SpecChanged(spec=bad))
    assert starts(commands, "planner") == []


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

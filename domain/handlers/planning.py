"""Handlers 1 and 2: plan (a planner run for the specs whose blob changed since it was last
planned) and apply plan (a planner's result becomes ``ApplyPlan``)."""

from __future__ import annotations

from domain.commands import ApplyPlan, EngineCommand, StartAgent
from domain.events import (
    WAKE_EVENTS,
    AgentFailed,
    EngineEvent,
    PlanApplied,
    PlannerCompleted,
    SpecChanged,
)
from domain.handlers.options import HandlerOptions
from domain.models import EngineState, PlannerStartParams
from domain.selectors import planner_failures, planner_in_flight, specs_to_plan, spent_on_spec


def plan(event: EngineEvent, state: EngineState, o: HandlerOptions) -> list[EngineCommand]:
    if not isinstance(event, (SpecChanged, PlanApplied, *WAKE_EVENTS)) and not (
        isinstance(event, AgentFailed) and event.role == "planner"
    ):
        return []
    if planner_in_flight(state):
        return []
    # A failed planner is run again on the same spec versions (an API blip, a timeout) until
    # ``max_attempts`` runs failed on a version, however the runs grouped the specs; then that
    # version waits for the spec's next change instead of failing in a loop. The failures are
    # journaled, so a restart does not start the count again. A version whose planner runs
    # have spent ``spec_budget_usd`` waits for the next change the same way.
    budget = o.spec_budget_usd
    wanted = {
        path: sha
        for path, sha in specs_to_plan(state).items()
        if planner_failures(state, path, sha) < o.max_attempts
        and (budget is None or spent_on_spec(state, path, sha) < budget)
    }
    if not wanted:
        return []
    return [StartAgent(params=PlannerStartParams(spec_paths=tuple(wanted)), spec_shas=wanted)]


def apply_plan(event: EngineEvent, state: EngineState, o: HandlerOptions) -> list[EngineCommand]:
    if not isinstance(event, PlannerCompleted):
        return []
    run = state.agent_runs.get(event.session_id)
    if run is None or run.role != "planner" or run.settled:
        return []  # an unknown run cannot say which spec versions it planned
    return [ApplyPlan(session_id=run.session_id, result=event.result, spec_shas=run.spec_shas)]

"""Which items may be dispatched, as many as there are free slots, and the branch a run of
one works on."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from domain.commands import EngineCommand, StartAgent
from domain.decisions import item_budget_spent, spent_on_item, work_failure
from domain.models import (
    AgentRole,
    AgentRun,
    EngineState,
    ImplementorStartParams,
    WorkItem,
    WorkItemId,
)
from domain.run_end import exhausted
from domain.selectors import (
    active_runs,
    blockers_resolved,
    has_run_in_flight,
    latest_implementor_runs,
    natural_key,
    plan_being_applied,
)
from domain.workflow import transition


def free_slots(state: EngineState, role: AgentRole, max_concurrent: Mapping[AgentRole, int]) -> int:
    return max(0, max_concurrent.get(role, 1) - len(active_runs(state, role)))


def dispatch_items(
    state: EngineState,
    candidates: Iterable[WorkItem],
    *,
    max_attempts: int,
    max_concurrent: Mapping[AgentRole, int],
    branch_prefix: str,
    item_budget: float | None = None,
    block_on_budget: bool = True,
) -> list[EngineCommand]:
    """Start implementors for the eligible candidates, as many as there are free slots.

    Eligible: pending with every blocker done, or needs-refinement; no run in flight. An item
    that would be eligible but has used its attempts is blocked instead; one whose runs have
    spent ``item_budget`` is blocked (``block_on_budget``) or left waiting. While a plan is
    being applied, a pending item never run waits for it (the plan's blockers may not be
    written yet): the plan's end dispatches again.
    """
    commands: list[EngineCommand] = []
    slots = free_slots(state, "implementor", max_concurrent)
    applying = plan_being_applied(state)
    seen: set[WorkItemId] = set()
    # Work already under review first, then items whose last run did not fail (a failed one
    # waits for its retry backoff, which the executor enforces, and must not hold a slot others
    # could use), then the failed ones by when they failed; each in natural id order.
    latest = latest_implementor_runs(state)  # once: per candidate, it read every run
    ranked = sorted(
        candidates,
        key=lambda i: (
            i.status != "needs-refinement",
            *_failed_at(latest.get(i.id)),
            natural_key(i.id),
        ),
    )
    for item in ranked:
        if item.id in seen:
            continue
        seen.add(item.id)
        if not _eligible(state, item):
            continue
        if applying and item.status == "pending" and item.id not in latest:
            continue
        if exhausted(state, item.id, max_attempts):
            why = f"attempts exhausted ({state.attempts.get(item.id, 0)} of {max_attempts})"
            commands += transition(item, "attempts-exhausted", why)
            continue
        if item_budget_spent(state, item.id, item_budget):
            spent = spent_on_item(state, item.id)
            why = f"budget: its runs cost ${spent:.2f} of [budget] per_item_usd ${item_budget:g}"
            commands += transition(item, "budget-spent", why) if block_on_budget else []
            continue
        if slots <= 0:
            continue
        slots -= 1
        commands.append(start_implementor(item, branch_prefix))
    return commands


def _failed_at(run: AgentRun | None) -> tuple[bool, float]:
    if run is None or run.ended_at is None or not work_failure(run):
        return (False, 0.0)
    return (True, run.ended_at.timestamp())


def _eligible(state: EngineState, item: WorkItem) -> bool:
    if item.status == "pending":
        ready = blockers_resolved(state, item)
    else:
        ready = item.status == "needs-refinement"
    return ready and not has_run_in_flight(state, item.id)


def start_implementor(item: WorkItem, branch_prefix: str) -> StartAgent:
    return StartAgent(
        params=ImplementorStartParams(
            work_item_id=item.id, branch_name=branch_name(item, branch_prefix)
        )
    )


_NOT_IN_A_REF = re.compile(r"[^a-z0-9]+")
_NOT_IN_AN_ID = re.compile(r"[^A-Za-z0-9]+")


def branch_name(item: WorkItem, prefix: str = "cpe/") -> str:
    """``cpe/<id>-<slug>`` (``cpe/7-add-x``, ``cpe/ENG-12-add-x``): a valid git ref name
    whatever the id and title hold."""
    # The id keeps its case: a key (ENG-12) is read back from the branch as it is written.
    ident = _NOT_IN_AN_ID.sub("-", item.id).strip("-") or "item"
    slug = _NOT_IN_A_REF.sub("-", item.title.lower()).strip("-")[:40].rstrip("-")
    return f"{prefix}{ident}-{slug}" if slug else f"{prefix}{ident}"

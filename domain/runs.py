"""How runs and attempts read to a person, one definition wherever they are shown: the
decisions (``domain.narration``), the dashboard's cards, runs table and run page.

- :func:`attempt_number`: the implementor attempt an item is at: the attempts its ended runs
  spent (``EngineState.attempts``, which a person's retry sets back to zero), and the one under
  way while an implementor run is active. A dispatch is told as ``attempt N`` with it, and the
  card beside it says ``attempt N of M``: the two never disagree mid-run.
- :func:`run_attempt`: which of its item's attempts a run was (a merge-queue round continues
  the attempt it answers; a run that spent none belongs to the attempt it was part of).
- :func:`run_ending`: how a run ended, in one word. A run cpe ended by itself (its own stop, a
  crash, a run that no longer served its item) was ``interrupted``: not a failure; one a person
  cancelled was ``cancelled``; a run that failed under the agent (``failure_class``
  infrastructure) is a failure, of the agent's side.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal

from domain.decisions import INTERRUPTED
from domain.models import AgentRun, EngineState, SessionId, WorkItemId
from domain.selectors import runs_for_work_item

RunEnding = Literal[
    "requested", "running", "completed", "failed", "timed-out", "cancelled", "interrupted"
]
FAILED_ENDINGS: frozenset[RunEnding] = frozenset({"failed", "timed-out"})


def run_ending(run: AgentRun) -> RunEnding:
    """The run's status, with a cancellation told apart: ``cancelled`` by a person (``cpe work
    cancel``, the dashboard), ``interrupted`` by cpe itself (a graceful stop, a second Ctrl-C,
    a crash found at the next start, an item set elsewhere by a person). A run cancelled
    because the model API was down failed under the agent: ``failed``."""
    if run.status == "cancelled":
        if run.failure_class == "infrastructure":
            return "failed"
        return "cancelled" if run.cancel_requested else "interrupted"
    if run.status == "failed" and run.failure_reason == INTERRUPTED:
        return "interrupted"
    return run.status


def _spent(run: AgentRun) -> bool:
    """The ended implementor run used up one of its item's attempts (as ``domain.state``
    counts them): it completed (a merge-queue round only when it did not deliver), or failed
    for the work's sake."""
    if run.role != "implementor":
        return False
    if run.status == "completed":
        return not (run.landing_round and run.outcome == "completed")
    return run.status in ("failed", "timed-out") and run.failure_class != "infrastructure"


def attempt_number(
    state: EngineState, work_item_id: WorkItemId, runs: Iterable[AgentRun] | None = None
) -> int:
    """The attempts the item's ended implementor runs spent, plus the one under way (an
    implementor run active that is not a merge-queue round). ``runs``: the item's runs, when
    the caller has them already (``runs_for_work_item`` reads every run of the state)."""
    spent = state.attempts.get(work_item_id, 0)
    under_way = any(
        run.is_active and run.role == "implementor" and not run.landing_round
        for run in (runs_for_work_item(state, work_item_id) if runs is None else runs)
    )
    return spent + under_way


def run_attempt(state: EngineState, session_id: SessionId) -> int | None:
    """Which attempt of its item an implementor run was, as :func:`attempt_number` counted it
    while the run was under way; None for another role, or for a run from before a person
    last set the item's attempts back to zero (the current series is the last
    ``state.attempts`` runs that spent one)."""
    run = state.agent_runs.get(session_id)
    if run is None or run.role != "implementor" or run.work_item_id is None:
        return None
    runs = [r for r in runs_for_work_item(state, run.work_item_id) if r.role == "implementor"]
    offset = sum(1 for r in runs if _spent(r)) - state.attempts.get(run.work_item_id, 0)
    before = 0  # the runs before it that spent an attempt
    for earlier in runs:
        if earlier.session_id == session_id:
            break
        before += _spent(earlier)
    # A merge-queue round that spent nothing continues the attempt it answers.
    own = 1 if _spent(run) or not run.landing_round else 0
    number = before - offset + own
    return number if number >= 1 else None

"""The work item status table (docs/workflow.md).

Every status change the engine makes on its own is a row of ``WORKFLOW``: from one status, on
one trigger, to one status, with the reason. The handlers ask ``next_status`` (``transition``
gives the ``TransitionStatus`` command); a trigger with no row from the current status changes
nothing. Users may set any status
(``UserTransitionedStatus``, ``cpe work set-status``); that, and a user-requested run
(``UserRequestedImplementorRun``, ``cpe work retry``), are the only ways out of ``blocked``.
Either gives the item its attempts back: a person setting ``pending`` or ``needs-refinement``,
or asking for a run, starts its count of attempts again from zero. ``render_table()`` prints
the table as markdown (README, ``cpe workflow``).
"""

from __future__ import annotations

from typing import Literal, get_args

from domain.commands import EngineCommand, TransitionStatus
from domain.models import Frozen, Status, WorkItem

Trigger = Literal[
    "implementor-requested",
    "revision-delivered",
    "outcome-blocked",
    "run-failed",
    "infrastructure-failed",
    "attempts-exhausted",
    "budget-spent",
    "run-interrupted",
    "user-cancelled",
    "blocker-added",
    "pipeline-failed",
    "review-approved",
    "review-needs-changes",
    "revision-merged",
    "revision-closed",
    "landing-conflict",
    "landing-failed",
    "landing-rounds-exhausted",
    "patch-conflict",
]
TRIGGERS: tuple[Trigger, ...] = get_args(Trigger)


class Transition(Frozen):
    source: Status
    trigger: Trigger
    target: Status
    why: str

    @property
    def name(self) -> str:
        return f"{self.source}--{self.trigger}--{self.target}"


WORKFLOW: tuple[Transition, ...] = (
    Transition(
        source="pending",
        trigger="implementor-requested",
        target="in-progress",
        why="an implementor run was requested for an unblocked item",
    ),
    Transition(
        source="needs-refinement",
        trigger="implementor-requested",
        target="in-progress",
        why="the implementor resumes with the revision, CI failure and review context",
    ),
    Transition(
        source="blocked",
        trigger="implementor-requested",
        target="in-progress",
        why="a user asked for a run on a blocked item (cpe work retry): its attempts start "
        "again from zero",
    ),
    Transition(
        source="in-progress",
        trigger="implementor-requested",
        target="in-progress",
        why="a new run while the status an earlier run's ending queued (pending, after it "
        "failed at once or was interrupted by a crash) is still on its way: said again, so it "
        "is what the provider holds last",
    ),
    Transition(
        source="in-progress",
        trigger="revision-delivered",
        target="in-review",
        why="the run's patch became a revision (created or updated)",
    ),
    Transition(
        source="in-progress",
        trigger="outcome-blocked",
        target="blocked",
        why="the implementor reported it cannot proceed",
    ),
    Transition(
        source="in-progress",
        trigger="infrastructure-failed",
        target="pending",
        why="the run failed under the agent (credentials, the model API, the CLI): no attempt "
        "is spent, and it runs again once dispatch is not paused",
    ),
    Transition(
        source="in-progress",
        trigger="run-failed",
        target="pending",
        why="the run failed (crash, timeout, invalid output, validation failure, write failed) "
        "and attempts are left: retry",
    ),
    Transition(
        source="in-progress",
        trigger="attempts-exhausted",
        target="blocked",
        why="the run failed and max_attempts runs have ended",
    ),
    Transition(
        source="in-progress",
        trigger="run-interrupted",
        target="pending",
        why="no run is active for the item (cancelled by shutdown, lost in a restart): recovery",
    ),
    Transition(
        source="in-progress",
        trigger="user-cancelled",
        target="blocked",
        why="a user cancelled the run (cpe work cancel); only a user resumes it",
    ),
    Transition(
        source="in-review",
        trigger="user-cancelled",
        target="blocked",
        why="a user cancelled the review run (cpe work cancel); only a user resumes it",
    ),
    Transition(
        source="in-progress",
        trigger="blocker-added",
        target="pending",
        why="the item gained an open blocker while its run went: the run was cancelled, no "
        "attempt is spent, and it waits for the blocker",
    ),
    Transition(
        source="in-review",
        trigger="pipeline-failed",
        target="needs-refinement",
        why="CI failed on the revision's head (in a check the default branch passes)",
    ),
    Transition(
        source="in-review",
        trigger="review-approved",
        target="approved",
        why="the reviewer approved the head on a green pipeline, or one red only where the "
        "default branch is red too",
    ),
    Transition(
        source="in-review",
        trigger="review-needs-changes",
        target="needs-refinement",
        why="the reviewer asked for changes",
    ),
    Transition(
        source="pending",
        trigger="attempts-exhausted",
        target="blocked",
        why="a retry is due but max_attempts runs have ended",
    ),
    Transition(
        source="needs-refinement",
        trigger="attempts-exhausted",
        target="blocked",
        why="another round is needed but max_attempts runs have ended",
    ),
    Transition(
        source="pending",
        trigger="budget-spent",
        target="blocked",
        why="a run is due but the item's runs have spent [budget] per_item_usd "
        '(with on_item_budget = "block")',
    ),
    Transition(
        source="needs-refinement",
        trigger="budget-spent",
        target="blocked",
        why="another round is needed but the item's runs have spent [budget] per_item_usd "
        '(with on_item_budget = "block")',
    ),
    Transition(
        source="approved",
        trigger="landing-conflict",
        target="needs-refinement",
        why="the merge queue found the revision conflicting with the default branch (another "
        "landing moved it): the implementor resolves it on the new default branch, told the "
        "files and hunks; no attempt is spent",
    ),
    Transition(
        source="approved",
        trigger="landing-failed",
        target="needs-refinement",
        why="the pipeline failed on the default branch merged with the revision, though the "
        "revision's own passed: the implementor is told the failing checks and which landing "
        "moved the branch; no attempt is spent",
    ),
    Transition(
        source="approved",
        trigger="landing-rounds-exhausted",
        target="blocked",
        why="the merge queue sent the item back max_landing_rounds times; a person decides",
    ),
    Transition(
        source="in-progress",
        trigger="patch-conflict",
        target="needs-refinement",
        why="the run's patch no longer applies to the default branch (another landing moved "
        "it): the implementor runs again on the new default branch, told the conflict; no "
        "attempt is spent",
    ),
    Transition(
        source="in-progress",
        trigger="landing-rounds-exhausted",
        target="blocked",
        why="the run's patch conflicts with the default branch and the item has been sent "
        "back max_landing_rounds times; a person decides",
    ),
    Transition(
        source="in-review",
        trigger="revision-merged",
        target="done",
        why="the revision was merged",
    ),
    Transition(
        source="approved",
        trigger="revision-merged",
        target="done",
        why="the revision was merged",
    ),
    Transition(
        source="needs-refinement",
        trigger="revision-merged",
        target="done",
        why="a person merged the revision anyway",
    ),
    Transition(
        source="in-review",
        trigger="revision-closed",
        target="blocked",
        why="a person closed the revision unmerged; only a user resumes it",
    ),
    Transition(
        source="approved",
        trigger="revision-closed",
        target="blocked",
        why="a person closed the revision unmerged; only a user resumes it",
    ),
    Transition(
        source="needs-refinement",
        trigger="revision-closed",
        target="blocked",
        why="a person closed the revision unmerged; only a user resumes it",
    ),
)

_BY_SOURCE_AND_TRIGGER: dict[tuple[Status, Trigger], Transition] = {
    (row.source, row.trigger): row for row in WORKFLOW
}
if len(_BY_SOURCE_AND_TRIGGER) != len(WORKFLOW):  # pragma: no cover - a broken table at import
    raise RuntimeError("the workflow table has two rows for one (status, trigger)")

ALLOWED_TRANSITIONS: frozenset[tuple[Status, Status]] = frozenset(
    (row.source, row.target) for row in WORKFLOW
)
"""Every (from, to) pair the engine may produce on its own."""


def next_status(current: Status, trigger: Trigger) -> Status | None:
    """Where ``trigger`` takes an item in ``current``, or None when the table has no such row."""
    row = _BY_SOURCE_AND_TRIGGER.get((current, trigger))
    return row.target if row else None


def transition_for(current: Status, trigger: Trigger) -> Transition | None:
    return _BY_SOURCE_AND_TRIGGER.get((current, trigger))


def transition(item: WorkItem, trigger: Trigger, reason: str | None = None) -> list[EngineCommand]:
    """``TransitionStatus`` per the workflow table, or nothing when the table has no row."""
    target = next_status(item.status, trigger)
    if target is None:
        return []
    return [TransitionStatus(work_item_id=item.id, to=target, reason=reason)]


def render_table() -> str:
    """The workflow as a markdown table."""
    lines = ["| from | on | to | why |", "| --- | --- | --- | --- |"]
    lines += [f"| {r.source} | {r.trigger} | {r.target} | {r.why} |" for r in WORKFLOW]
    return "\n".join(lines)

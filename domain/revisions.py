"""What a revision needs next: a review, a merge of its approved head, or its item's next
status; whether its pipeline is acceptable (green, or red only where the default branch is)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

from domain.commands import EngineCommand, MergeRevision, StartAgent
from domain.dispatch import free_slots
from domain.models import AgentRole, EngineState, ReviewerStartParams, Revision, WorkItem
from domain.selectors import (
    approved_head,
    ordered,
    reviewer_failures,
    reviewer_in_flight,
    revision_for,
)
from domain.workflow import transition

# ``pipeline_required``: "auto", or always (True), or never (False).
Required = bool | Literal["auto"]


def revision_step(
    state: EngineState,
    item: WorkItem,
    revision: Revision,
    *,
    max_attempts: int,
    max_concurrent: Mapping[AgentRole, int],
    auto_merge: bool,
    merge_approved: bool,
    charge_baseline: bool = False,
    required: Required = "auto",
) -> list[EngineCommand]:
    """What a revision of ``item`` needs next: done, blocked, needs-refinement, a review, or a
    merge of an approved head (``merge_approved``, after a restart)."""
    current = revision_for(state, item)
    if revision.state == "merged":
        return transition(item, "revision-merged")
    if current is None or current.id != revision.id:
        return []  # an older revision of the item; the current one decides
    if revision.state == "closed":
        return transition(item, "revision-closed")
    if item.status == "in-review":
        if revision.pipeline.status == "failure" and not pipeline_acceptable(
            state, revision, charge_baseline
        ):
            return transition(item, "pipeline-failed")
        if revision.reviewed_sha == revision.head_sha and approved_head(state, revision):
            # Approved while its pipeline still ran (the reviewer started on a head CI had not
            # reported on yet): the pipeline decides, now that it says acceptable.
            if not pipeline_acceptable(state, revision, charge_baseline):
                return []
            commands = transition(item, "review-approved")
            if commands and auto_merge and revision.pipeline.status in ("success", "none"):
                commands.append(MergeRevision(work_item_id=item.id, revision_id=revision.id))
            return commands
        if needs_review(state, revision, max_attempts, charge_baseline) and free_slots(
            state, "reviewer", max_concurrent
        ):
            return [start_reviewer(item, revision)]
        return []
    if (
        item.status == "approved"
        and merge_approved
        and auto_merge
        and revision.reviewed_sha == revision.head_sha
        and (
            revision.pipeline.status == "success"
            or (revision.pipeline.status == "none" and untested_lands(state, required))
        )
    ):
        return [MergeRevision(work_item_id=item.id, revision_id=revision.id)]
    return []


def untested_lands(state: EngineState, required: Required) -> bool:
    """Whether a head with no checks at all may land (``pipeline_required``): ``auto`` only
    while no pipeline has ever reported on the repository (once one has, no checks on a head
    means CI has not reported on it yet); ``True`` never; ``False`` always (CI that skips some
    changes, path filters)."""
    if required == "auto":
        return not state.pipelines_seen
    return not required


def inherited_failure(state: EngineState, revision: Revision) -> bool:
    """The revision's pipeline failed, but only in checks that fail on the default branch's head
    too (``EngineState.baseline``): not the revision's doing."""
    baseline, failed = state.baseline, revision.pipeline.failed_checks
    return (
        revision.pipeline.status == "failure"
        and baseline is not None
        and baseline.pipeline.status == "failure"
        and bool(failed)
        and set(failed) <= set(baseline.pipeline.failed_checks)
    )


def pipeline_acceptable(state: EngineState, revision: Revision, charge_baseline: bool) -> bool:
    """Green (or no CI); or, unless ``charge_baseline``, red only where the default branch is
    red too. Such a revision is reviewed and may be approved, never merged automatically."""
    if revision.pipeline.status in ("success", "none"):
        return True
    return not charge_baseline and inherited_failure(state, revision)


def needs_review(
    state: EngineState, revision: Revision, max_attempts: int, charge_baseline: bool = False
) -> bool:
    return (
        revision.state == "open"
        and pipeline_acceptable(state, revision, charge_baseline)
        and revision.reviewed_sha != revision.head_sha
        and not reviewer_in_flight(state, revision.id)
        and reviewer_failures(state, revision.id, revision.head_sha) < max_attempts
    )


def start_reviewer(item: WorkItem, revision: Revision) -> StartAgent:
    return StartAgent(
        params=ReviewerStartParams(work_item_id=item.id, revision_id=revision.id),
        subject_sha=revision.head_sha,
    )


def reviews_wanted(
    state: EngineState,
    *,
    max_attempts: int,
    max_concurrent: Mapping[AgentRole, int],
    charge_baseline: bool = False,
) -> list[EngineCommand]:
    """Reviewers for every in-review item whose head needs one, up to the free slots."""
    commands: list[EngineCommand] = []
    slots = free_slots(state, "reviewer", max_concurrent)
    for wid in ordered(state.work_items):
        item = state.work_items[wid]
        if slots <= 0:
            break
        if item.status != "in-review":
            continue
        revision = revision_for(state, item)
        if revision is not None and needs_review(state, revision, max_attempts, charge_baseline):
            commands.append(start_reviewer(item, revision))
            slots -= 1
    return commands

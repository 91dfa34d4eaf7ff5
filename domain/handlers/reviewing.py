"""Handlers 5 and 6: revision (a delivered revision is reviewed, its pipeline judged, merged
or landed through the merge queue) and review done (a review posted for the current head,
then approved or sent back)."""

from __future__ import annotations

from domain.commands import EngineCommand, MergeRevision, PostReview, StartAgent
from domain.events import (
    WAKE_EVENTS,
    AgentFailed,
    BaselineChanged,
    BranchUpdated,
    EngineEvent,
    LandingRefused,
    ReviewerCompleted,
    ReviewPosted,
    RevisionChanged,
    RevisionCreated,
    RevisionMerged,
    RevisionRemoved,
    RevisionUpdated,
    StatusTransitioned,
    WorkItemChanged,
    is_agent_terminal,
)
from domain.handlers.options import HandlerOptions
from domain.landing import landing_step, send_back
from domain.models import EngineState, Frozen, ReviewerStartParams
from domain.revisions import (
    needs_review,
    pipeline_acceptable,
    reviews_wanted,
    revision_step,
    start_reviewer,
)
from domain.run_end import settle
from domain.selectors import revision_for
from domain.workflow import transition


def revision(event: EngineEvent, state: EngineState, o: HandlerOptions) -> list[EngineCommand]:
    commands = _revision(event, state, o)
    if o.auto_merge and o.merge_queue:
        commands += [c for c in _land(event, state, o) if c not in commands]
    return commands


_QUEUE_EVENTS: tuple[type[Frozen], ...] = (
    RevisionChanged,
    RevisionMerged,
    RevisionRemoved,
    BaselineChanged,
    BranchUpdated,
    StatusTransitioned,
    WorkItemChanged,
    *WAKE_EVENTS,
)


def _land(event: EngineEvent, state: EngineState, o: HandlerOptions) -> list[EngineCommand]:
    """The merge queue's next step (``domain.landing``), after any event that can move it; a
    refused step sends its item back."""
    if isinstance(event, LandingRefused):
        item = state.work_items.get(event.work_item_id)
        report = state.sent_back.get(event.work_item_id)
        if event.kind == "conflict" and item is not None and report is not None:
            return send_back(state, item, report, o.max_landing_rounds)
    elif not isinstance(event, _QUEUE_EVENTS) or not _moves_the_queue(event, state):
        return []
    return landing_step(
        state,
        max_rounds=o.max_landing_rounds,
        charge_baseline=o.charge_baseline_failures,
        required=o.pipeline_required,
    )


def _moves_the_queue(event: EngineEvent, state: EngineState) -> bool:
    """A change of an item or revision outside the queue leaves it where it is (a poll that
    reports many items would otherwise ask the queue's step again for each)."""
    if isinstance(event, WorkItemChanged):
        return event.work_item.status == "approved" or event.work_item.id in state.approved_at
    if isinstance(event, RevisionChanged):
        wid = event.revision.work_item_id
        item = state.work_items.get(wid) if wid is not None else None
        return item is not None and (item.status == "approved" or item.id in state.approved_at)
    return True


def _revision(event: EngineEvent, state: EngineState, o: HandlerOptions) -> list[EngineCommand]:
    if isinstance(event, RevisionCreated | RevisionUpdated):
        item = state.work_items.get(event.work_item_id)
        return settle(state, item, o.max_attempts) if item else []
    if is_agent_terminal(event) or isinstance(event, (*WAKE_EVENTS, BaselineChanged)):
        wanted = reviews_wanted(
            state,
            max_attempts=o.max_attempts,
            max_concurrent=o.max_concurrent,
            charge_baseline=o.charge_baseline_failures,
        )
        # A review a person cancelled is not started again: its item goes to blocked (7.).
        stopped = _cancelled_by_a_person(event, state)
        if stopped is None:
            return wanted
        return [c for c in wanted if getattr(_params(c), "work_item_id", None) != stopped]
    merge_approved = False
    if isinstance(event, RevisionChanged):
        rev = state.revisions.get(event.revision.id)
        merge_approved = True  # after a restart an approved head is merged on first sight
    elif isinstance(event, RevisionMerged):
        rev = state.revisions.get(event.revision_id)
    elif isinstance(event, StatusTransitioned) and event.to == "in-review":
        item = state.work_items.get(event.work_item_id)
        rev = revision_for(state, item) if item else None
    else:
        return []
    if rev is None or rev.work_item_id is None:
        return []
    item = state.work_items.get(rev.work_item_id)
    if item is None:
        return []
    return revision_step(
        state,
        item,
        rev,
        max_attempts=o.max_attempts,
        max_concurrent=o.max_concurrent,
        auto_merge=o.auto_merge and not o.merge_queue,  # the queue merges (_land)
        merge_approved=merge_approved,
        charge_baseline=o.charge_baseline_failures,
        required=o.pipeline_required,
    )


def _params(command: EngineCommand) -> object:
    return command.params if isinstance(command, StartAgent) else None


def _cancelled_by_a_person(event: EngineEvent, state: EngineState) -> str | None:
    """The work item of the run ``event`` ends, when a person cancelled that run."""
    if not isinstance(event, AgentFailed) or event.kind != "cancelled":
        return None
    run = state.agent_runs.get(event.session_id)
    return run.work_item_id if run is not None and run.cancel_requested else None


def review_done(event: EngineEvent, state: EngineState, o: HandlerOptions) -> list[EngineCommand]:
    if isinstance(event, ReviewerCompleted):
        return _post_or_rereview(event, state, o)
    if not isinstance(event, ReviewPosted):
        return []
    rev = state.revisions.get(event.revision_id)
    if rev is None or rev.work_item_id is None or rev.head_sha != event.head_sha:
        return []  # the head moved on; the new head gets its own review
    item = state.work_items.get(rev.work_item_id)
    if item is None:
        return []
    if event.verdict == "needs-changes":
        return transition(item, "review-needs-changes")
    if not pipeline_acceptable(state, rev, o.charge_baseline_failures):
        return []  # approved, but CI is not green: the pipeline decides
    commands = transition(item, "review-approved")
    green = rev.pipeline.status in ("success", "none")  # red as the default branch: by hand
    if commands and o.auto_merge and green and not o.merge_queue:  # else the queue lands it
        commands.append(MergeRevision(work_item_id=item.id, revision_id=rev.id))
    return commands


def _post_or_rereview(
    event: ReviewerCompleted, state: EngineState, o: HandlerOptions
) -> list[EngineCommand]:
    run = state.agent_runs.get(event.session_id)
    if run is None or not isinstance(run.params, ReviewerStartParams) or run.subject_sha is None:
        return []
    rev = state.revisions.get(run.params.revision_id)
    item = state.work_items.get(run.params.work_item_id)
    if rev is None or item is None:
        return []
    if rev.state == "open" and rev.head_sha == run.subject_sha:
        if run.settled:
            return []
        return [
            PostReview(
                session_id=run.session_id,
                work_item_id=item.id,
                revision_id=rev.id,
                head_sha=run.subject_sha,
                review=event.result.review,
            )
        ]
    # Stale: the review is of a head the revision no longer has. Review the new head instead.
    if item.status == "in-review" and needs_review(
        state, rev, o.max_attempts, o.charge_baseline_failures
    ):
        return [start_reviewer(item, rev)]
    return []

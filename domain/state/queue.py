"""What the state records of the merge queue: an item entering and leaving it, a revision
brought up to date and tested, a refused step, a landing, a merge that waits; and the report
the queue sends an item back with (``landing_report``)."""

from __future__ import annotations

from typing import Literal

from domain.commands import MergeRevision, UpdateBranch
from domain.events import (
    BranchUpdated,
    CommandFailed,
    LandingRefused,
    MergeWaiting,
    RevisionMerged,
    StatusTransitioned,
)
from domain.models import (
    EngineState,
    Landed,
    LandingFailure,
    LandingProblem,
    LandingTest,
    MergeWait,
    RevisionId,
    SentBack,
    WorkItem,
    item_ref,
)
from domain.selectors import latest_implementor_run
from domain.state.edits import put_run, replace, update_work_item, with_key, without_key
from domain.state.observed import observe_revision


def transitioned(state: EngineState, event: StatusTransitioned) -> EngineState:
    """The item's new status; its place in the merge queue (entered on approval, left on any
    other status, with the revision's test); what the queue said when it sent the item back."""
    wid, to = event.work_item_id, event.to
    known = state.work_items.get(wid)
    state = update_work_item(state, wid, status=to)
    if to == "approved":
        if wid not in state.approved_at and event.at is not None:
            state = replace(state, approved_at=with_key(state.approved_at, wid, event.at))
    elif wid in state.approved_at or state.landing:
        state = replace(state, approved_at=without_key(state.approved_at, wid))
        tests = {rid: t for rid, t in state.landing.items() if t.work_item_id != wid}
        if len(tests) != len(state.landing):
            state = replace(state, landing=tests)
    if event.landing is not None:
        report = event.landing.model_copy(update={"at": event.landing.at or event.at})
        state = replace(state, sent_back=with_key(state.sent_back, wid, report))
    elif to == "done" or (to == "pending" and known is not None and known.status == "blocked"):
        state = replace(state, sent_back=without_key(state.sent_back, wid))
    return state


_LANDED_KEPT = 50  # the latest landings, to say which one moved the default branch


def record_landing(state: EngineState, event: RevisionMerged) -> EngineState:
    revision = state.revisions.get(event.revision_id)
    # Counted once per revision. A poll may have seen the merge before its result was
    # processed (the revision reads merged already): it is still this landing.
    if revision is None or any(entry.revision_id == revision.id for entry in state.landed):
        return state
    wid = revision.work_item_id
    test = state.landing.get(revision.id)
    entry = Landed(
        work_item_id=wid,
        revision_id=revision.id,
        merge_sha=event.merge_sha,
        at=event.at,
        approved_at=state.approved_at.get(wid) if wid is not None else None,
        tests=test.tests if test is not None else 0,
    )
    landed = (*state.landed, entry)[-_LANDED_KEPT:]
    return replace(
        state,
        landed=landed,
        landings_total=state.landings_total + 1,
        landing=without_key(state.landing, revision.id),
    )


def record_landing_failure(state: EngineState, event: CommandFailed) -> EngineState:
    """A merge queue write that failed: kept (``landing_failures``) so the revision is due on
    every poll and the queue asks the step again, saying why it has not moved yet."""
    command = event.command
    if not isinstance(command, UpdateBranch | MergeRevision):
        return state
    step: Literal["update", "merge"] = "update" if isinstance(command, UpdateBranch) else "merge"
    revision = state.revisions.get(command.revision_id)
    head = command.head_sha or (revision.head_sha if revision is not None else "")
    known = state.landing_failures.get(command.revision_id)
    if known is not None and known.head_sha == head and known.step == step:
        failure = known.model_copy(
            update={"reason": event.error, "last_at": event.at, "tries": known.tries + 1}
        )
    else:
        failure = LandingFailure(
            work_item_id=command.work_item_id,
            head_sha=head,
            step=step,
            reason=event.error,
            since=event.at,
            last_at=event.at,
        )
    failures = with_key(state.landing_failures, command.revision_id, failure)
    return replace(state, landing_failures=failures)


def answered(state: EngineState, revision_id: RevisionId | None) -> EngineState:
    """A queue step the provider answered (done, refused, held): its earlier failure is over."""
    if revision_id is None or revision_id not in state.landing_failures:
        return state
    return replace(state, landing_failures=without_key(state.landing_failures, revision_id))


def record_branch_update(state: EngineState, event: BranchUpdated) -> EngineState:
    """A revision brought up to date by the merge queue: its head and pipeline as the provider
    answered, and its test on top of ``base_sha``."""
    known = state.revisions.get(event.revision.id)
    if known is None:
        return state
    state = answered(state, known.id)
    state = observe_revision(state, event.revision)
    head = event.revision.head_sha
    baseline = state.baseline
    base_red = (
        baseline is not None
        and baseline.sha == event.base_sha
        and baseline.pipeline.status == "failure"
    )
    previous = state.landing.get(known.id)
    if previous is not None:
        test = previous.model_copy(
            update={
                "base_sha": event.base_sha,
                "tested_sha": head,
                "heads": tuple(dict.fromkeys((*previous.heads, head))),
                "at": event.at,
                "tests": previous.tests + (head != previous.tested_sha),
                "stale": False,
                "note": None,
                "base_red": base_red,
            }
        )
    else:
        approved = known.reviewed_sha or known.head_sha
        test = LandingTest(
            work_item_id=event.work_item_id,
            approved_sha=approved,
            approved_pipeline=known.pipeline.status,
            base_sha=event.base_sha,
            tested_sha=head,
            heads=tuple(dict.fromkeys((approved, known.head_sha, head))),
            at=event.at,
            tests=1 if head != known.head_sha else 0,
            base_red=base_red,
        )
    return replace(state, landing=with_key(state.landing, known.id, test))


def record_refusal(state: EngineState, event: LandingRefused) -> EngineState:
    """A refused queue step. A moved default branch makes the test stale (tested again). A
    conflict ends the test and is recorded for the item's next prompt (``sent_back``; the
    handlers send it back). A refused revision write settles the run that made the patch and
    gives back the attempt its completion counted: the conflict is another landing's doing."""
    rid = event.revision_id
    state = answered(state, rid)
    test = state.landing.get(rid) if rid is not None else None
    if rid is not None and test is not None:
        if event.kind == "moved":
            # Tested again, whatever held its merge before (that was for the old tree).
            stale = test.model_copy(update={"stale": True, "note": event.reason})
            state = replace(state, merge_waits=without_key(state.merge_waits, rid))
            return replace(state, landing=with_key(state.landing, rid, stale))
        state = replace(state, landing=without_key(state.landing, rid))
    if event.kind != "conflict":
        return state
    item = state.work_items.get(event.work_item_id)
    refused = event.session_id or (f"{rid}@{event.head_sha}" if event.head_sha else None)
    previous = state.sent_back.get(event.work_item_id)
    again = (
        previous is not None
        and refused is not None
        and previous.refused == refused
        and previous.answered_by is None
    )
    if item is not None and not again:
        report = landing_report(
            state, item, rid, "conflict", event.reason, files=event.files, detail=event.detail
        )
        report = report.model_copy(update={"at": event.at, "refused": refused})
        state = replace(state, sent_back=with_key(state.sent_back, item.id, report))
    run = state.agent_runs.get(event.session_id) if event.session_id is not None else None
    if run is not None and not run.settled:
        if not run.landing_round and state.attempts.get(event.work_item_id):
            attempts = state.attempts[event.work_item_id] - 1
            state = replace(state, attempts=with_key(state.attempts, event.work_item_id, attempts))
        state = put_run(state, run, {"settled": True, "landing_round": True, "conflicted": True})
    return state


_DETAIL_CHARS = 6000  # of conflict hunks or a failing log, in the report and the prompt


def landing_report(
    state: EngineState,
    item: WorkItem,
    revision_id: RevisionId | None,
    problem: LandingProblem,
    reason: str,
    *,
    files: tuple[str, ...] = (),
    detail: str = "",
) -> SentBack:
    """What the merge queue tells the item's implementor, its round counted."""
    previous = state.sent_back.get(item.id)
    if len(detail) > _DETAIL_CHARS:
        detail = detail[:_DETAIL_CHARS] + "\n…"
    return SentBack(
        revision_id=revision_id,
        problem=problem,
        reason=reason,
        files=files,
        detail=detail,
        moved_by=moved_by(state, item),
        rounds=previous.rounds + 1 if previous is not None else 1,
    )


def moved_by(state: EngineState, item: WorkItem) -> str:
    """Which landings moved the default branch since the item's revision was made (its latest
    implementor run started from the default branch then), in words."""
    run = latest_implementor_run(state, item.id)
    since = run.requested_at if run is not None else None
    landings = [
        landed
        for landed in state.landed
        if landed.work_item_id != item.id
        and (since is None or landed.at is None or landed.at >= since)
    ]
    if not landings:
        return "commits cpe did not make (pushed to the default branch by someone else)"
    return ", ".join(
        f"the merge of {item_ref(landed.work_item_id or '?')} (revision #{landed.revision_id}"
        + (f", {landed.merge_sha[:12]})" if landed.merge_sha else ")")
        for landed in landings[-5:]
    )


def record_merge_wait(state: EngineState, event: MergeWaiting) -> EngineState:
    state = answered(state, event.revision_id)
    known = state.merge_waits.get(event.revision_id)
    if known is not None and known.head_sha == event.head_sha:
        wait = known.model_copy(
            update={"reason": event.reason, "last_at": event.at, "tries": known.tries + 1}
        )
    else:
        wait = MergeWait(
            work_item_id=event.work_item_id,
            head_sha=event.head_sha,
            reason=event.reason,
            since=event.at,
            last_at=event.at,
        )
    return replace(state, merge_waits=with_key(state.merge_waits, event.revision_id, wait))

"""The engine's decisions in words, one line each, for a person watching (``cpe run`` on a
terminal, the dashboard's feed).

``narrate(event, before, after)`` says what a processed event decided or revealed: a dispatch,
a status change with its reason, a revision, a pipeline result, a review, a merge, a failure, a
pause. Events that decide nothing a person follows (an agent that started, a spec read again,
a status written again that the item had already) say nothing. Pure: the state before and after
the event is all it reads.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from domain.commands import StartAgent
from domain.events import (
    AgentFailed,
    AgentRequested,
    AgentSignalled,
    CommandFailed,
    CommandRejected,
    EngineEvent,
    ImplementorCompleted,
    PlanApplied,
    PlannerCompleted,
    ReviewerCompleted,
    ReviewPosted,
    RevisionChanged,
    RevisionCreated,
    RevisionMerged,
    RevisionUpdated,
    SpecChanged,
    StatusTransitioned,
    UserCancelledRun,
    UserPausedDispatch,
    UserRequestedImplementorRun,
    UserResumedDispatch,
    UserTransitionedStatus,
    WorkItemChanged,
    WorkItemIgnored,
    WorkItemRemoved,
)
from domain.models import (
    AgentRun,
    EngineState,
    Revision,
    RevisionId,
    Status,
    WorkItem,
    WorkItemId,
    item_ref,
)
from domain.run_end import explain_transition
from domain.runs import attempt_number
from domain.selectors import revision_for
from domain.signals import describe_signal
from domain.workflow import WORKFLOW

_REASON = 300  # characters of a failure's reason in one line


class Narrator:
    """``narrate`` with a memory: of a person's status requests, so that the transition that
    carries one out says so (and not what the table says of the same pair of statuses: only
    that transition is called a person's); and of cpe's own status writes a poll saw before
    the engine processed their result.

    ``queued`` gives the events journaled and not yet processed. A poll may read the status cpe
    has just written before the write's ``StatusTransitioned`` is processed (it is queued
    behind the poll's events): that change is not "on the tracker", and is said once, with its
    reason, when the transition is processed."""

    def __init__(self, queued: Callable[[], Iterable[EngineEvent]] = tuple) -> None:
        self._asked: dict[WorkItemId, Status] = {}
        self._queued = queued
        self._ahead: dict[WorkItemId, tuple[Status, EngineState]] = {}  # seen before its write

    def __call__(self, event: EngineEvent, before: EngineState, after: EngineState) -> list[str]:
        if isinstance(event, WorkItemChanged) and self._own_write(event, before):
            return []
        if isinstance(event, UserTransitionedStatus):
            self._asked[event.work_item_id] = event.to
        elif isinstance(event, StatusTransitioned):
            ahead = self._ahead.pop(event.work_item_id, None)
            if ahead is not None and ahead[0] == event.to:
                before = ahead[1]  # the state the write was decided on
            asked = self._asked.pop(event.work_item_id, None)  # carried out, or overtaken
            if asked == event.to and not _unchanged(before, event):
                return [
                    f"{explain_transition(before, event.work_item_id, event.to)}: set by a person"
                ]
        return narrate(event, before, after)

    def _own_write(self, event: WorkItemChanged, before: EngineState) -> bool:
        """The poll saw a status whose ``StatusTransitioned`` is still queued."""
        item = event.work_item
        known = before.work_items.get(item.id)
        if known is None or known.status == item.status:
            return False
        coming = any(
            isinstance(e, StatusTransitioned) and e.work_item_id == item.id and e.to == item.status
            for e in self._queued()
        )
        if coming:
            self._ahead[item.id] = (item.status, before)
        return coming


def narrate(event: EngineEvent, before: EngineState, after: EngineState) -> list[str]:
    """What ``event`` (applied to ``before``, giving ``after``) means to a person."""
    match event:
        case AgentRequested():
            run = after.agent_runs.get(event.session_id)
            return [_dispatched(run, after)] if run is not None else []
        case PlannerCompleted() | ImplementorCompleted() | ReviewerCompleted():
            run = after.agent_runs.get(event.session_id)
            return [_completed(run)] if run is not None else []
        case AgentFailed():
            run = after.agent_runs.get(event.session_id)
            return [_failed(run, event)] if run is not None else []
        case PlanApplied(created_ids=created):
            made = ", ".join(f"{item_ref(wid)}{_title(after, wid)}" for wid in created)
            return [f"plan applied: {'created ' + made if made else 'nothing new to create'}"]
        case RevisionCreated() | RevisionUpdated():
            verb = "created" if isinstance(event, RevisionCreated) else "updated"
            rev = event.revision
            return [
                f"{_item(after, event.work_item_id)}revision {rev.id} {verb} "
                f"(branch {rev.branch}, head {rev.head_sha[:10]})"
            ]
        case RevisionChanged(revision=rev):
            return _revision_seen(before.revisions.get(rev.id), rev, after)
        case ReviewPosted(revision_id=rid, verdict=verdict, head_sha=sha):
            return [
                f"{_of_revision(after, rid)}review posted on revision {rid} ({sha[:10]}): {verdict}"
            ]
        case RevisionMerged(revision_id=rid, merge_sha=sha):
            if any(landed.revision_id == rid for landed in before.landed):
                return []  # the same merge answered again from the journal: told once
            merge = f" as {sha[:10]}" if sha else ""
            return [f"{_of_revision(after, rid)}revision {rid} merged{merge}"]
        case StatusTransitioned(work_item_id=wid, to=to, reason=reason):
            if _unchanged(before, event):
                return []  # written again (or twice): the item had that status, nothing changed
            return [_status_change(before, after, wid, to, reason)]
        case CommandFailed(command=command, error=error):
            what = command.type + (f" for {item_ref(_wid(command) or '')}" if _wid(command) else "")
            return [f"a write failed: {what}: {_flat(error)}"]
        case WorkItemChanged(work_item=item):
            known = before.work_items.get(item.id)
            waits = _waits_without_revision(after, item)
            if known is None:
                return [f"{item_ref(item.id)} {item.title!r} seen ({item.status}){waits}"]
            if known.status != item.status:
                change = f"{known.status} → {item.status} (changed on the tracker)"
                return [f"{item_ref(item.id)} {change}{waits}"]
            return []
        case AgentSignalled(session_id=sid, signal=signal):
            run = after.agent_runs.get(sid)
            quiet = signal.kind == "quota" and all(w.status == "allowed" for w in signal.windows)
            if run is None or quiet:
                return []
            head = f"{item_ref(run.work_item_id)}: " if run.work_item_id else ""
            return [f"{head}{run.role} {sid}: {describe_signal(signal)}"]
        case SpecChanged(spec=spec) if spec.problem:
            told = before.specs.get(spec.path)
            if told is not None and told.blob_sha == spec.blob_sha and told.problem:
                return []  # told when this version was first seen, not again at each start
            return [f"spec {spec.path} skipped: {_flat(spec.problem)}"]
        case WorkItemRemoved(work_item_id=wid):
            return [f"{item_ref(wid)} removed from the tracker"]
        case WorkItemIgnored(item=ignored):
            return [f"{item_ref(ignored.id)} {ignored.title!r} ignored: {ignored.reason}"]
        case UserRequestedImplementorRun(work_item_id=wid):
            return [f"{item_ref(wid)}: a person asked for an implementor run"]
        case UserCancelledRun(session_id=sid):
            return [f"a person cancelled run {sid}"]
        case UserTransitionedStatus(work_item_id=wid, to=to):
            return [f"{item_ref(wid)}: a person set the status to {to}"]
        case UserPausedDispatch(reason=reason):
            return [f"dispatch paused by a person{': ' + reason if reason else ''}"]
        case UserResumedDispatch():
            return ["dispatch resumed by a person"]
        case CommandRejected(command=StartAgent(requested_by_user=True) as start, reason=why):
            if _wid(start) in before.asked:
                return []  # told when it was first refused; it still waits for a slot
            return [_request_refused(start, why, after)]
    return []


def _request_refused(start: StartAgent, reason: str, state: EngineState) -> str:
    """A run a person asked for that a guard refused when it was to start (a slot taken
    between the request's answer and its dispatch, the day's budget, a model account on
    hold): the item is where it was, and the next free slot is its (``asked``)."""
    wid = _wid(start)
    if wid is None:
        return f"the {start.params.role} run a person asked for did not start: {_flat(reason)}"
    item = state.work_items.get(WorkItemId(wid))
    where = f"; {item_ref(wid)} stays {item.status}" if item is not None else ""
    return (
        f"{item_ref(wid)}: the {start.params.role} run a person asked for did not start: "
        f"{_flat(reason)}{where}, and runs first when a slot frees"
    )


def _dispatched(run: AgentRun, state: EngineState) -> str:
    if run.work_item_id is None:
        return f"planner dispatched on {run.subject} ({run.session_id})"
    head = _item(state, run.work_item_id)
    if run.role == "reviewer":
        return (
            f"{head}reviewer dispatched on head {(run.subject_sha or '')[:10]} ({run.session_id})"
        )
    attempt = attempt_number(state, run.work_item_id)  # as the dashboard's card counts it
    return f"{head}implementor dispatched, attempt {attempt} ({run.session_id})"


def _completed(run: AgentRun) -> str:
    head = f"{item_ref(run.work_item_id)}: " if run.work_item_id else ""
    cost = f", ${run.cost_usd:.4f}" if run.cost_usd is not None else ""
    outcome = f": {run.outcome}" if run.outcome else ""
    return f"{head}{run.role} {run.session_id} completed{outcome}{cost}"


def _failed(run: AgentRun, event: AgentFailed) -> str:
    head = f"{item_ref(run.work_item_id)}: " if run.work_item_id else ""
    under = " under the agent" if event.failure_class == "infrastructure" else ""
    return f"{head}{run.role} {run.session_id} {event.kind}{under}: {_flat(event.reason)}"


def _revision_seen(known: Revision | None, rev: Revision, state: EngineState) -> list[str]:
    head = _of_revision(state, rev.id)
    lines = []
    if known is not None and rev.state not in (known.state, "open"):
        lines.append(f"{head}revision {rev.id} {rev.state} (on the forge)")
    pipeline = rev.pipeline
    moved = (
        known is None or known.pipeline.status != pipeline.status or known.head_sha != rev.head_sha
    )
    if moved and pipeline.status in ("success", "failure"):
        checks = f" (failed: {', '.join(pipeline.failed_checks)})" if pipeline.failed_checks else ""
        lines.append(
            f"{head}revision {rev.id} pipeline {pipeline.status} at {rev.head_sha[:10]}{checks}"
        )
    return lines


def _unchanged(before: EngineState, event: StatusTransitioned) -> bool:
    """The item had ``event.to`` already: the transition was made again (the workflow's
    in-progress row) or twice (decided again before the first one's result was processed)."""
    item = before.work_items.get(event.work_item_id)
    return item is not None and item.status == event.to


def _status_change(
    before: EngineState, after: EngineState, wid: WorkItemId, to: Status, reason: str | None
) -> str:
    text = explain_transition(before, wid, to)
    item = before.work_items.get(wid)
    if item is None or ": " in text:
        return text  # the reason is given (a run's end)
    rows = [row for row in WORKFLOW if row.source == item.status and row.target == to]
    # in-review → needs-refinement has two rows: the pipeline's and the review's
    rev = after.revisions.get(item.linked_revision) if item.linked_revision else None
    red = rev is not None and rev.pipeline.status == "failure"
    rows = [row for row in rows if (row.trigger == "pipeline-failed") == red] or rows
    if not rows:
        # No row from the status the state holds: a person's request (``Narrator`` knows it),
        # or cpe's write decided on a status the tracker has since changed. Only what is known.
        return f"{text}: {_flat(reason) if reason else 'set by cpe'}"
    return f"{text}: {rows[0].why}"


def _item(state: EngineState, wid: WorkItemId) -> str:
    return f"{item_ref(wid)}{_title(state, wid)}: "


def _title(state: EngineState, wid: WorkItemId) -> str:
    """`` 'Title'``, or nothing for an item the state does not know."""
    item = state.work_items.get(wid)
    return f" {item.title!r}" if item is not None else ""


def _of_revision(state: EngineState, rid: RevisionId) -> str:
    rev = state.revisions.get(rid)
    return f"{item_ref(rev.work_item_id)}: " if rev is not None and rev.work_item_id else ""


def _wid(command: object) -> str | None:
    if isinstance(command, StartAgent):
        return getattr(command.params, "work_item_id", None)
    value = getattr(command, "work_item_id", None)
    return str(value) if value is not None else None


def _flat(text: str | None) -> str:
    return " ".join((text or "").split())[:_REASON]


def _waits_without_revision(state: EngineState, item: WorkItem) -> str:
    """What a person who moved an item to review by hand should know: cpe reviews and merges
    revisions, and this item has none (a tracker's state dragged along, a revision made by
    hand elsewhere): it waits there until someone moves it on."""
    if item.status not in ("in-review", "approved") or revision_for(state, item) is not None:
        return ""
    return "; cpe has no revision of it, so it waits (set it to pending for cpe to implement it)"

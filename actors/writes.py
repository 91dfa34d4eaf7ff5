"""Provider writes under intents: what the executor does with every command but a run's start
or cancel.

A write is recorded in the journal as an intent under the command's idempotency key before it
is made; it is made (retried on a transient ``ProviderError`` with exponential backoff,
honouring ``Retry-After``) and its result event recorded with the intent (``CommandFailed`` when
it keeps failing). A write whose intent is already done is not made again: its recorded result
answers. A merge the provider refuses for now (``MergeWaitError``: branch protection) is no
failure: its intent is left to be made again, and ``MergeWaiting`` records why it waits. A merge
queue step the provider refuses for the revision's sake (a conflict with the default branch, a
default branch that moved since the test) is no failure either: ``LandingRefused`` says what,
and the merge queue acts on it (``actors/landing_writes.py``). The same for a run's patch that
no longer applies to the default branch: another landing moved it, and the item goes back to its
implementor at no cost.

After a crash, ``resume_pending`` makes again, before anything is dispatched, every write whose
intent was left pending, and ``deliver_resumed`` queues the results no cycle answered.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Sequence
from datetime import UTC, datetime

import structlog

from actors.journal import Journal
from actors.landing_writes import land, refusal, update_branch
from actors.queue import Inbox
from actors.settings import RetrySettings
from adapters.support.crashpoints import crashpoint
from domain.commands import (
    ApplyPlan,
    CreateRevision,
    EngineCommand,
    MergeRevision,
    PostReview,
    TransitionStatus,
    UpdateBranch,
    UpdateRevision,
    idempotency_key,
)
from domain.errors import ConflictError, CpeError, MergeWaitError, PatchError, ProviderError
from domain.events import (
    CommandFailed,
    EngineEvent,
    MergeWaiting,
    PlanApplied,
    ReviewPosted,
    RevisionCreated,
    RevisionMerged,
    RevisionUpdated,
    StatusTransitioned,
)
from domain.item_comments import item_comment
from domain.models import EngineState, WorkItemId
from domain.ports import (
    RevisionLander,
    RevisionProviderWriter,
    WorkItemCommenter,
    WorkProviderWriter,
)
from domain.results import PlannedWorkItem
from domain.run_end import explain_transition

log = structlog.get_logger("cpe.executor")


class ProviderWrites:
    """The executor's provider writes: made under intents, retried, recovered after a crash."""

    def __init__(
        self,
        *,
        work_item_writer: WorkProviderWriter,
        revision_writer: RevisionProviderWriter,
        journal: Journal,
        inbox: Inbox,
        retry: RetrySettings | None = None,
        wait: Callable[[float], bool] | None = None,
        written: Callable[[EngineCommand], None] | None = None,
    ):
        self.work_item_writer = work_item_writer
        self.revision_writer = revision_writer
        self.journal = journal
        self.inbox = inbox
        self.retry = retry or RetrySettings()
        # Told after each provider write is made: what cpe wrote reaches the engine at once
        # (the engine polls what the write changed), not at the next poll interval.
        self.written = written or (lambda command: None)
        self.stopping = threading.Event()  # shutdown step 6: retry waits give up
        # Waits between retries: ``wait(seconds)`` is True when the wait was cut short (we are
        # stopping). Injectable, so a test can record the backoff without waiting for it.
        self.wait: Callable[[float], bool] = wait or self.stopping.wait
        # Writes ``resume_pending`` made at start, by key: their results go out with the cycle
        # that answers them, or with ``deliver_resumed`` when no cycle did.
        self._resumed: dict[str, list[EngineEvent]] = {}
        self._stale_transitions: set[str] = set()  # pending at start: settled by deliver_resumed
        self._resumed_lock = threading.Lock()
        # Comments a tracker outage refused: said again (same key) before the next one.
        self._unsaid: list[tuple[WorkItemId, str, str]] = []
        self._unsaid_lock = threading.Lock()

    def _result_queued(self, command: TransitionStatus) -> bool:
        """The item's last ``StatusTransitioned`` journaled and waiting in the queue is to the
        same status (an earlier one to it, with another after, would not do: the provider must
        hold this one last)."""
        last = None
        for event in self.inbox.queued():
            if isinstance(event, StatusTransitioned) and event.work_item_id == command.work_item_id:
                last = event.to
        return last == command.to

    def write(self, command: EngineCommand, snapshot: EngineState) -> list[EngineEvent]:
        if isinstance(command, TransitionStatus) and self._result_queued(command):
            # Decided again before the first write's result was processed (a poll's sight of
            # a merge, a restart's replay): the write is made, its result on its way. Made
            # once, recorded once.
            log.info(
                "status already written; its result is queued",
                work_item_id=command.work_item_id,
                status=command.to,
            )
            return []
        key = idempotency_key(command)
        # A transition is made again even when an intent with its key is done: the same one
        # recurs (pending → in-progress → pending …), and making it twice is harmless.
        repeatable = isinstance(command, TransitionStatus)
        done = self.journal.begin_intent(key, command, answer=not repeatable)
        with self._resumed_lock:
            self._resumed.pop(key, None)  # answered by this cycle, below
        if done is not None:
            log.info("write already made; answering from the journal", key=key)
            return list(done.result)
        crashpoint(f"write.{command.type}.before")
        try:
            events = self._with_retry(command, lambda: self._perform(command, snapshot, key))
        except MergeWaitError as exc:
            if not isinstance(command, MergeRevision):
                raise
            return self._merge_waits(command, snapshot, key, exc)
        except (ConflictError, PatchError) as exc:
            refused = refusal(command, exc)
            if refused is None:
                error = f"{type(exc).__name__}: {exc}"
                self.journal.fail_intent(key, error)
                log.error("command execution failed", command=command.type, error=error)
                return [CommandFailed(command=command, error=error, at=_now())]
            # Answered, and final for this key (a test done again is another key): the same
            # step asked again before this answer is processed gets it from the journal.
            self.journal.finish_intent(key, [refused])
            log.warning(
                "merge queue: refused",
                command=command.type,
                work_item_id=refused.work_item_id,
                revision_id=refused.revision_id,
                kind=refused.kind,
                reason=refused.reason,
                files=list(refused.files),
            )
            return [refused]
        except Exception as exc:
            error = f"{type(exc).__name__}: {exc}"
            self.journal.fail_intent(key, error)
            log.error("command execution failed", command=command.type, error=error)
            return [CommandFailed(command=command, error=error, at=_now())]
        crashpoint(f"write.{command.type}.after")
        self._comment(command, events, key, snapshot)
        # Harmless to make twice, a transition's result may wait for the next commit.
        self.journal.finish_intent(key, events, defer=repeatable)
        self.written(command)
        return events

    def _merge_waits(
        self, command: MergeRevision, snapshot: EngineState, key: str, exc: MergeWaitError
    ) -> list[EngineEvent]:
        """The merge waits (branch protection): its intent stays open to be made again, on the
        next poll that finds the revision approved (``MergeWaiting`` asks the poller for it)."""
        self.journal.fail_intent(key, f"waiting: {exc.reason}")
        revision = snapshot.revisions.get(command.revision_id)
        known = snapshot.merge_waits.get(command.revision_id)
        if known is None or known.reason != exc.reason:  # said once per reason
            log.warning(
                "merge held by the provider",
                revision_id=command.revision_id,
                work_item_id=command.work_item_id,
                reason=exc.reason,
            )
        return [
            MergeWaiting(
                work_item_id=command.work_item_id,
                revision_id=command.revision_id,
                head_sha=revision.head_sha if revision is not None else "",
                reason=exc.reason,
                at=_now(),
            )
        ]

    # ------------------------------------------------------------------ recovery at start

    def resume_pending(self, snapshot: EngineState) -> int:
        """At start, before anything is dispatched: make again, with its idempotency key, every
        write whose intent a crash left pending (the provider finds one that was applied but not
        acknowledged), and record its result. Returns how many were resumed.

        A pending intent's cycle was never committed (its end is journaled after its writes),
        so that cycle is processed again: meeting the same state, it makes the same command and
        is answered from the intent now done, and its results are journaled with it. Should it
        not (``deliver_resumed``), the results are queued then. A status transition is not made
        here: it is derived from the state, and the cycle makes it again if it is still due.

        A *failed* intent is left as it is: its ``CommandFailed`` was processed and the
        workflow already acted on it (a new run, a retry on the next sight of the revision), so
        making the old write now could only be stale."""
        resumed = 0
        for intent in self.journal.intents("pending"):
            command = intent.command
            if isinstance(command, TransitionStatus):
                self._stale_transitions.add(intent.key)
                continue
            log.info("resuming a write a crash interrupted", command=command.type, key=intent.key)
            try:
                events = self._with_retry(
                    command, functools.partial(self._perform, command, snapshot, intent.key)
                )
            except Exception as exc:  # left to the cycle that made it, processed again
                error = f"{type(exc).__name__}: {exc}"
                self.journal.fail_intent(intent.key, error)
                log.error("resuming a write failed", command=command.type, error=error)
                continue
            self._comment(command, events, intent.key, snapshot)
            self.journal.finish_intent(intent.key, events)
            with self._resumed_lock:
                self._resumed[intent.key] = events
            resumed += 1
        return resumed

    def deliver_resumed(self) -> None:
        """Once the restored events are processed: queue the results of resumed writes that no
        cycle answered, and settle transitions still pending (no cycle found them due)."""
        with self._resumed_lock:
            unanswered, self._resumed = self._resumed, {}
        for key, events in unanswered.items():
            log.warning("queueing the results of a resumed write no cycle answered", key=key)
            for event in events:
                self.inbox.put(event, internal=True)
        stale, self._stale_transitions = self._stale_transitions, set()
        for intent in self.journal.intents("pending"):
            if intent.key in stale:
                log.info("settling a transition no cycle made again", key=intent.key)
                self.journal.finish_intent(intent.key, [])

    def _comment(
        self, command: EngineCommand, events: list[EngineEvent], key: str, snapshot: EngineState
    ) -> None:
        """Say on the item what the write did, when its tracker takes comments: once (keyed by
        the write, and a transition by its moment: the same one recurs; a write made again
        after a crash finds its comment), never at the write's expense (a comment that fails
        is logged; the write stands)."""
        writer = self.work_item_writer
        if not isinstance(writer, WorkItemCommenter):
            return
        why = None
        if isinstance(command, TransitionStatus):
            why = command.reason or explain_transition(snapshot, command.work_item_id, command.to)
            key = f"{key}@{events[0].at.isoformat()}" if events and events[0].at else key
        said = item_comment(command, events, why)
        if said is None:
            return
        # Those an outage refused first, in order (a revision opened before its merge).
        with self._unsaid_lock:
            due, self._unsaid = (
                [*self._unsaid, (said.work_item_id, said.body, f"{key}:comment")],
                [],
            )
        for at, (item, body, comment_key) in enumerate(due):
            try:
                writer.comment(item, body, idempotency_key=comment_key)
            except Exception as exc:
                transient = isinstance(exc, ProviderError) and exc.transient
                log.warning(
                    "the comment on the work item failed; the write stands"
                    + ("; said again with the next one" if transient else ""),
                    work_item_id=item,
                    command=command.type,
                    error=f"{type(exc).__name__}: {exc}",
                )
                if transient:  # the tracker is out: the rest wait too
                    with self._unsaid_lock:
                        self._unsaid[:0] = due[at:]
                    return
                continue
            crashpoint("tracker.comment.after")

    def _with_retry(
        self, command: EngineCommand, perform: Callable[[], list[EngineEvent]]
    ) -> list[EngineEvent]:
        delay = self.retry.initial_delay
        for attempt in range(1, self.retry.attempts + 1):
            try:
                return perform()
            except ProviderError as exc:
                if not exc.transient or attempt == self.retry.attempts:
                    raise
                wait = min(self.retry.max_delay, max(delay, exc.retry_after or 0.0))
                log.warning(
                    "provider write failed; retrying",
                    command=command.type,
                    attempt=attempt,
                    retry_in_s=wait,
                    error=str(exc),
                )
                if self.wait(wait):
                    raise
                delay *= 2
        raise AssertionError("unreachable: the last attempt returns or raises")

    def _perform(
        self, command: EngineCommand, snapshot: EngineState, key: str
    ) -> list[EngineEvent]:
        w, r = self.work_item_writer, self.revision_writer
        at = _now()
        match command:
            case TransitionStatus(work_item_id=wid, to=to, reason=reason, landing=landing):
                w.transition_status(wid, to)
                _log_transition(command, snapshot)
                return [
                    StatusTransitioned(
                        work_item_id=wid, to=to, reason=reason, landing=landing, at=at
                    )
                ]
            case ApplyPlan():
                created, blockers = self._apply_plan(command, key)
                return [
                    PlanApplied(
                        session_id=command.session_id,
                        spec_shas=command.spec_shas,
                        created_ids=created,
                        blockers=blockers,
                        at=at,
                    )
                ]
            case CreateRevision():
                based = {"base_sha": command.base_sha} if command.base_sha else {}
                revision = (self._lander() if based else r).create_from_patch(
                    command.work_item_id,
                    command.branch_name,
                    command.title,
                    command.body,
                    command.patch,
                    idempotency_key=key,
                    **based,
                )
                return [
                    RevisionCreated(
                        session_id=command.session_id,
                        work_item_id=command.work_item_id,
                        revision=revision,
                        at=at,
                    )
                ]
            case UpdateRevision():
                based = {"base_sha": command.base_sha} if command.base_sha else {}
                revision = (self._lander() if based else r).update_from_patch(
                    command.revision_id, command.patch, idempotency_key=key, **based
                )
                return [
                    RevisionUpdated(
                        session_id=command.session_id,
                        work_item_id=command.work_item_id,
                        revision=revision,
                        at=at,
                    )
                ]
            case PostReview():
                r.post_review(
                    command.revision_id, command.head_sha, command.review, idempotency_key=key
                )
                return [
                    ReviewPosted(
                        session_id=command.session_id,
                        revision_id=command.revision_id,
                        head_sha=command.head_sha,
                        verdict=command.review.verdict,
                        at=at,
                    )
                ]
            case MergeRevision(revision_id=rid, expected_base=base, head_sha=head):
                if base is None or head is None:
                    return [RevisionMerged(revision_id=rid, merge_sha=r.merge(rid), at=at)]
                return [land(self._lander(), command, base, head, at)]
            case UpdateBranch():
                return [update_branch(self._lander(), command, key, at)]
        raise CpeError(f"the executor cannot perform {command.type}")

    def _lander(self) -> RevisionLander:
        """The writer as a ``RevisionLander``; a seed writer (which cannot build on a base or
        land) is given what it can do: the handlers do not ask it to land, and a revision's
        base is dropped for it."""
        writer = self.revision_writer
        if not isinstance(writer, RevisionLander):
            raise CpeError(f"{type(writer).__name__} cannot land through the merge queue")
        return writer

    def _apply_plan(
        self, command: ApplyPlan, key: str
    ) -> tuple[tuple[WorkItemId, ...], dict[WorkItemId, tuple[WorkItemId, ...]]]:
        """The items made, and the blockers each was given (``PlanApplied.blockers``)."""
        created: dict[str, WorkItemId] = {}
        blockers: dict[WorkItemId, tuple[WorkItemId, ...]] = {}
        for planned in _dependency_order(command.result.create):
            blocked_by = [created.get(b, WorkItemId(b)) for b in planned.blocked_by]
            made = created[planned.temp_id] = self.work_item_writer.create_work_item(
                planned.title,
                planned.body,
                planned.labels,
                blocked_by,
                idempotency_key=f"{key}:create:{planned.temp_id}",
            )
            blockers[made] = tuple(blocked_by)
        for update in command.result.update:
            self.work_item_writer.update_work_item(
                update.work_item_id, body=update.body, labels=update.labels
            )
        for work_item_id in command.result.close:
            self.work_item_writer.close_work_item(work_item_id)
        return tuple(created.values()), blockers


def _dependency_order(items: Sequence[PlannedWorkItem]) -> list[PlannedWorkItem]:
    """Items after the items of this plan they are blocked by; a cycle is an error."""
    by_id = {item.temp_id: item for item in items}
    ordered: list[PlannedWorkItem] = []
    state: dict[str, str] = {}

    def visit(item: PlannedWorkItem, path: tuple[str, ...]) -> None:
        mark = state.get(item.temp_id)
        if mark == "done":
            return
        if mark == "visiting":
            raise CpeError(f"the plan's blocked_by has a cycle: {' -> '.join(path)}")
        state[item.temp_id] = "visiting"
        for dep in item.blocked_by:
            if dep in by_id:
                visit(by_id[dep], (*path, dep))
        state[item.temp_id] = "done"
        ordered.append(item)

    for item in items:
        visit(item, (item.temp_id,))
    return ordered


def _log_transition(command: TransitionStatus, snapshot: EngineState) -> None:
    """A change with its reason. A status the item has already (the workflow's in-progress row
    says it again, so that it is what the provider holds last) is written, but is no change."""
    wid, to, reason = command.work_item_id, command.to, command.reason
    known = snapshot.work_items.get(wid)
    if known is not None and known.status == to:
        again = {"reason": reason} if reason else {}
        log.info("status written again", work_item_id=wid, status=to, **again)
        return
    change = explain_transition(snapshot, wid, to)
    if reason and ":" not in change:  # the state alone could not say why
        change = f"{change}: {reason}"
    log.info("status changed", change=change)


def _now() -> datetime:
    return datetime.now(UTC)

"""The command executor: the broker boundary. Every external mutation goes through here.

For each command: the policy (``CommandRejected`` when it says no), then for ``StartAgent`` the
concurrency guards (one run per work item, one planner at a time, ``max_concurrent`` per role)
and the session start; for provider writes, an intent recorded in the journal under the
command's idempotency key, the write (retried on a transient ``ProviderError`` with exponential
backoff, honouring ``Retry-After``), and the result event (``CommandFailed`` when it keeps
failing). A write whose intent is already done is not made again: its recorded result answers.
A merge the provider refuses for now (``MergeWaitError``: branch protection) is no failure: its
intent is left to be made again, and ``MergeWaiting`` records why it waits. A merge queue step
the provider refuses for the revision's sake (a conflict with the default branch, a default
branch that moved since the test) is no failure either: ``LandingRefused`` says what, and the
merge queue acts on it. The same for a run's patch that no longer applies to the default
branch: another landing moved it, and the item goes back to its implementor at no cost.
"""

from __future__ import annotations

import functools
import threading
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pykka
import structlog

from actors.base import SupervisedActor
from actors.crashpoints import crashpoint
from actors.journal import Journal
from actors.landing_writes import land, refusal, update_branch
from actors.queue import Inbox
from actors.sessions import SessionManager
from actors.settings import BreakerSettings, DailyBudget, QuotaSettings, RetrySettings
from domain.commands import (
    ApplyPlan,
    CancelAgent,
    CreateRevision,
    EngineCommand,
    MergeRevision,
    PostReview,
    StartAgent,
    TransitionStatus,
    UpdateBranch,
    UpdateRevision,
    idempotency_key,
)
from domain.decisions import implementor_backoff, planner_backoff, quota_hold, spent_since
from domain.errors import (
    ConflictError,
    CpeError,
    MergeWaitError,
    PatchError,
    ProviderError,
)
from domain.events import (
    AgentFailed,
    AgentRequested,
    CommandFailed,
    CommandRejected,
    EngineEvent,
    MergeWaiting,
    PlanApplied,
    ReviewPosted,
    RevisionCreated,
    RevisionMerged,
    RevisionUpdated,
    StatusTransitioned,
)
from domain.models import (
    AgentRole,
    AgentStartParams,
    EngineState,
    ImplementorStartParams,
    SessionId,
    WorkItemId,
)
from domain.policy import Policy, Rejected
from domain.ports import RevisionLander, RevisionProviderWriter, WorkProviderWriter
from domain.requests import describe_pause
from domain.results import PlannedWorkItem
from domain.run_end import explain_transition

log = structlog.get_logger("cpe.executor")

EXECUTE_TIMEOUT = 900.0  # seconds; a write with all its retries fits well inside

SpawnSession = Callable[[SessionId, AgentStartParams], None]


class CommandExecutor:
    def __init__(
        self,
        *,
        work_item_writer: WorkProviderWriter,
        revision_writer: RevisionProviderWriter,
        policy: Policy,
        journal: Journal,
        inbox: Inbox,
        sessions: SessionManager,
        spawn_session: SpawnSession,
        max_concurrent: Mapping[AgentRole, int],
        retry: RetrySettings | None = None,
        wait: Callable[[float], bool] | None = None,
        breaker: BreakerSettings | None = None,
        wake_at: Callable[[datetime], None] | None = None,
        clock: Callable[[], datetime] | None = None,
        retry_backoff: tuple[float, float] = (30, 900),
        daily_budget: DailyBudget | None = None,
        quota: QuotaSettings | None = None,
        accounts: Mapping[AgentRole, str] | None = None,
        written: Callable[[EngineCommand], None] | None = None,
    ):
        self.work_item_writer = work_item_writer
        # Told after each provider write is made: what cpe wrote reaches the engine at once
        # (the engine polls what the write changed), not at the next poll interval.
        self.written = written or (lambda command: None)
        self.revision_writer = revision_writer
        self.policy = policy
        self.journal = journal
        self.inbox = inbox
        self.sessions = sessions
        self.spawn_session = spawn_session
        self.max_concurrent = dict(max_concurrent)
        self.retry = retry or RetrySettings()
        self.no_new_agents = threading.Event()  # shutdown step 1: StartAgent is rejected
        self.stopping = threading.Event()  # shutdown step 6: retry waits give up
        # Waits between retries: ``wait(seconds)`` is True when the wait was cut short (we are
        # stopping). Injectable, so a test can record the backoff without waiting for it.
        self.wait: Callable[[float], bool] = wait or self.stopping.wait
        self.breaker = breaker or BreakerSettings()
        # ``wake_at(t)``: queue a DispatchDue at t (the engine's timer); ``clock``: now (UTC).
        self.wake_at = wake_at or (lambda when: None)
        self.clock = clock or _now
        self._paused_until: datetime | None = None  # the pause last announced and woken for
        # A failed run's retry waits: (initial, max) seconds, doubling per failure.
        self.retry_backoff = retry_backoff
        self.daily_budget = daily_budget or DailyBudget()
        self.quota = quota or QuotaSettings()
        # The model account each role's runtime uses (``anthropic``, ``openai``): quota is
        # per account. A role not named uses "model".
        self.accounts: dict[AgentRole, str] = dict(accounts or {})
        self._waits_announced: dict[str, datetime] = {}  # per item (or the planner): its wait
        # Writes ``resume_pending`` made at start, by key: their results go out with the cycle
        # that answers them, or with ``deliver_resumed`` when no cycle did.
        self._resumed: dict[str, list[EngineEvent]] = {}
        self._stale_transitions: set[str] = set()  # pending at start: settled by deliver_resumed
        self._resumed_lock = threading.Lock()

    def execute(self, command: EngineCommand, snapshot: EngineState) -> list[EngineEvent]:
        decision = self.policy.check(command, snapshot)
        if isinstance(decision, Rejected):
            log.info("command rejected by policy", command=command.type, reason=decision.reason)
            return [CommandRejected(command=command, reason=decision.reason, at=_now())]
        if isinstance(command, StartAgent):
            return self._start_agent(command, snapshot)
        if isinstance(command, CancelAgent):
            cancelled = self.sessions.cancel(
                command.session_id, command.reason, infrastructure=command.infrastructure
            )
            if cancelled:
                log.warning(
                    "agent run cancelled", session_id=command.session_id, reason=command.reason
                )
            else:
                log.info("cancel of an unknown or ended session", session_id=command.session_id)
            return []
        return self._write(command, snapshot)

    # ------------------------------------------------------------------ agents

    def paused(self, snapshot: EngineState) -> str | None:
        """Why no run may start now, when the breaker holds dispatch (None when one may). Past
        the pause one probe run may start, alone: its ending decides. A person's pause
        (``cpe pause``) holds it until they resume it."""
        if snapshot.manual_pause is not None:
            return f"dispatch paused {describe_pause(snapshot)}"
        pause = self.breaker.pause(snapshot)
        if pause is None:
            return None
        if self.clock() < pause.until:
            if self._paused_until != pause.until:  # said once per pause, and woken for once
                self._paused_until = pause.until
                counted = "retries" if pause.outage else "failures_in_a_row"
                log.error(
                    "dispatch paused",
                    reason=pause.reason,
                    **{counted: pause.failures},
                    next_try_at=pause.until.isoformat(timespec="seconds"),
                )
                self.wake_at(pause.until)
            when = pause.until.strftime("%Y-%m-%d %H:%M:%S UTC")
            return f"dispatch paused: {pause.reason}; next try at {when}"
        if self.sessions.active():
            return "dispatch paused: a probe run is under way"
        return None

    def quota_waits(self, role: AgentRole, snapshot: EngineState) -> str | None:
        """Why a run of ``role`` may not start yet: its model account's usage window is spent,
        or past ``[runtime.quota] pause_at`` (``quota_hold``); said once per hold, and the engine
        woken at its end."""
        account = self.accounts.get(role, "model")
        q = self.quota
        hold = quota_hold(snapshot, account, self.clock(), margin=q.margin, pause_at=q.pause_at)
        if hold is None:
            return None
        key = f"quota:{account}"
        if self._waits_announced.get(key) != hold.until:
            self._waits_announced[key] = hold.until
            log.error(
                "dispatch paused for a model account",
                account=account,
                reason=hold.reason,
                resumes_at=hold.until.isoformat(timespec="seconds"),
            )
            self.wake_at(hold.until)
        return f"{account}: {hold.reason}; runs start again at {_when(hold.until)}"

    def retry_waits(self, command: StartAgent, snapshot: EngineState) -> str | None:
        """Why a run may not start again yet (None when it may): a planner that failed on these
        spec versions (``planner_backoff``), or an item whose last run failed
        (``implementor_backoff``), backs off exponentially. A person's request does not wait."""
        params, (initial, maximum) = command.params, self.retry_backoff
        if command.requested_by_user:
            return None
        if isinstance(params, ImplementorStartParams):
            retry = implementor_backoff(
                snapshot, params.work_item_id, initial=initial, maximum=maximum
            )
            if retry is None or self.clock() >= retry.until:
                return None
            self._announce_wait(
                f"item {params.work_item_id}",
                retry.until,
                "retry deferred",
                work_item_id=params.work_item_id,
                failed_attempt=retry.attempt,
                last_failure=" ".join(retry.reason.split())[:300],
            )
            return f"#{params.work_item_id}: retry at {_when(retry.until)}"
        if params.role != "planner":
            return None
        wait = planner_backoff(snapshot, command.spec_shas, initial=initial, maximum=maximum)
        if wait is None or self.clock() >= wait.until:
            return None
        self._announce_wait(
            "planner",
            wait.until,
            "planner run deferred",
            failures=wait.failures,
            last_failure=" ".join(wait.reason.split())[:300],
        )
        return f"planner waits after {wait.failures} failed run(s); next try at {_when(wait.until)}"

    def _announce_wait(self, key: str, until: datetime, event: str, **fields: Any) -> None:
        """Log a wait and ask to be woken at its end, once per wait."""
        if self._waits_announced.get(key) == until:
            return
        self._waits_announced[key] = until
        log.warning(event, next_try_at=until.isoformat(timespec="seconds"), **fields)
        self.wake_at(until)

    def over_daily_budget(self, snapshot: EngineState) -> str | None:
        """Why no run may start today (None when one may): the runs that ended today (in the
        budget's time zone) have cost ``per_day_usd``. Woken at the next midnight."""
        budget = self.daily_budget
        if not budget.per_day_usd:
            return None
        zone = ZoneInfo(budget.timezone)
        now = self.clock().astimezone(zone)
        midnight = now.replace(hour=0, minute=0, second=0, microsecond=0)
        spent = spent_since(snapshot, midnight)
        if spent < budget.per_day_usd:
            return None
        tomorrow = midnight + timedelta(days=1)  # wall-clock arithmetic: the next midnight
        self._announce_wait(
            "daily budget",
            tomorrow,
            "dispatch paused: the daily budget is spent",
            spent_usd=round(spent, 4),
            per_day_usd=budget.per_day_usd,
        )
        return (
            f"dispatch paused: the daily budget is spent (${spent:.2f} of "
            f"${budget.per_day_usd:.2f}); next try at {tomorrow.isoformat(timespec='minutes')}"
        )

    def _start_agent(self, command: StartAgent, snapshot: EngineState) -> list[EngineEvent]:
        params = command.params
        reason = "the engine is shutting down" if self.no_new_agents.is_set() else None
        reason = reason or self.paused(snapshot)
        reason = reason or self.over_daily_budget(snapshot)
        reason = reason or self.quota_waits(params.role, snapshot)
        reason = reason or self.retry_waits(command, snapshot)
        reason = reason or self.sessions.guard(params, self.max_concurrent.get(params.role, 1))
        if reason is not None:
            log.info("agent dispatch rejected", role=params.role, reason=reason)
            return [CommandRejected(command=command, reason=reason, at=_now())]
        session_id = SessionId(f"{params.role}-{uuid.uuid4().hex[:12]}")
        params = params.model_copy(update={"session_id": session_id})
        if not self.sessions.add(session_id, params):
            reason = "the engine is shutting down"
            log.info("agent dispatch rejected", role=params.role, reason=reason)
            return [CommandRejected(command=command, reason=reason, at=_now())]
        # Queued here, before the session exists, so that it always precedes the session's own
        # events (AgentStarted, the terminal event) in the queue.
        self.inbox.put(
            AgentRequested(
                session_id=session_id,
                params=params,
                subject_sha=command.subject_sha,
                spec_shas=command.spec_shas,
                at=_now(),
            ),
            internal=True,
        )
        log.info("agent dispatched", role=params.role, session_id=session_id, **_subject(params))
        try:
            self.spawn_session(session_id, params)
        except Exception as exc:
            log.exception("could not start the session", session_id=session_id)
            self.sessions.ended(session_id)
            try:
                self.inbox.put(
                    AgentFailed(
                        session_id=session_id,
                        role=params.role,
                        kind="failed",
                        reason=f"the session could not start: {type(exc).__name__}: {exc}",
                        at=_now(),
                    ),
                    internal=True,
                )
            finally:
                self.sessions.delivered(session_id)
        return []

    # ------------------------------------------------------------------ provider writes

    def _result_queued(self, command: TransitionStatus) -> bool:
        """The item's last ``StatusTransitioned`` journaled and waiting in the queue is to the
        same status (an earlier one to it, with another after, would not do: the provider must
        hold this one last)."""
        last = None
        for event in self.inbox.queued():
            if isinstance(event, StatusTransitioned) and event.work_item_id == command.work_item_id:
                last = event.to
        return last == command.to

    def _write(self, command: EngineCommand, snapshot: EngineState) -> list[EngineEvent]:
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
                created = self._apply_plan(command, key)
                return [
                    PlanApplied(
                        session_id=command.session_id,
                        spec_shas=command.spec_shas,
                        created_ids=created,
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

    def _apply_plan(self, command: ApplyPlan, key: str) -> tuple[WorkItemId, ...]:
        created: dict[str, WorkItemId] = {}
        for planned in _dependency_order(command.result.create):
            blocked_by = [created.get(b, WorkItemId(b)) for b in planned.blocked_by]
            created[planned.temp_id] = self.work_item_writer.create_work_item(
                planned.title,
                planned.body,
                planned.labels,
                blocked_by,
                idempotency_key=f"{key}:create:{planned.temp_id}",
            )
        for update in command.result.update:
            self.work_item_writer.update_work_item(
                update.work_item_id, body=update.body, labels=update.labels
            )
        for work_item_id in command.result.close:
            self.work_item_writer.close_work_item(work_item_id)
        return tuple(created.values())


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


def _subject(params: AgentStartParams) -> dict[str, Any]:
    if params.role == "planner":
        return {"spec_paths": list(getattr(params, "spec_paths", ()))}
    return {"work_item_id": getattr(params, "work_item_id", None)}


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


def asking(
    executor: Callable[[], pykka.ActorRef[Any] | None],
) -> Callable[[EngineCommand, EngineState], Sequence[EngineEvent]]:
    """How the engine loop has a command executed: it asks the executor actor, found through
    ``executor()`` at every command (waiting while it restarts), and a failure becomes a
    ``CommandFailed`` of the command."""

    def execute(command: EngineCommand, snapshot: EngineState) -> Sequence[EngineEvent]:
        ref = executor()
        if ref is None:
            return [CommandFailed(command=command, error="the executor is not running")]
        try:
            reply: Any = ref.ask(Execute(command, snapshot), timeout=EXECUTE_TIMEOUT)
            result: Sequence[EngineEvent] = reply
        except Exception as exc:
            log.error("command execution failed", command=command.type, error=repr(exc))
            return [CommandFailed(command=command, error=f"executor: {type(exc).__name__}: {exc}")]
        return result

    return execute


class ExecutorActor(SupervisedActor):
    """The executor's actor: the engine ``ask``s it to execute one command at a time."""

    def __init__(self, executor: CommandExecutor, **base: Any) -> None:
        super().__init__(**base)
        self.executor = executor

    def on_receive(self, message: Any) -> Any:
        if isinstance(message, Execute):
            return self.executor.execute(message.command, message.snapshot)
        return None


@dataclass(frozen=True)
class Execute:
    command: EngineCommand
    snapshot: EngineState


def _when(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%d %H:%M:%S UTC")

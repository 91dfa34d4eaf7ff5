"""The command executor: the broker boundary. Every external mutation goes through here.

For each command: the policy (``CommandRejected`` when it says no), then for ``StartAgent`` the
admission (a person's pause, the breaker, the daily budget, the model account's quota, the
retry backoff) and the concurrency guards (one run per work item, one planner at a time,
``max_concurrent`` per role), and the session start; a ``CancelAgent`` goes to the session
registry; every other command is a provider write, made under an intent in the journal with its
retries (``actors/writes.py``).
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from zoneinfo import ZoneInfo

import pykka
import structlog

from actors.base import SupervisedActor
from actors.journal import Journal
from actors.queue import Inbox
from actors.session_registry import SessionManager
from actors.settings import BreakerSettings, DailyBudget, QuotaSettings, RetrySettings
from actors.writes import ProviderWrites
from domain.admission import (
    AdmissionSettings,
    BreakerPaused,
    BudgetSpent,
    ItemBackoff,
    PlannerWaits,
    QuotaHeld,
    Refusal,
    admission,
)
from domain.commands import CancelAgent, EngineCommand, StartAgent
from domain.events import AgentFailed, AgentRequested, CommandFailed, CommandRejected, EngineEvent
from domain.models import (
    AgentRole,
    AgentStartParams,
    EngineState,
    PlannerStartParams,
    SessionId,
    WorkItemId,
)
from domain.policy import Policy, Rejected
from domain.ports import RevisionProviderWriter, WorkProviderWriter

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
        self.writes = ProviderWrites(
            work_item_writer=work_item_writer,
            revision_writer=revision_writer,
            journal=journal,
            inbox=inbox,
            retry=retry,
            wait=wait,
            written=written,
        )
        self.policy = policy
        self.inbox = inbox
        self.sessions = sessions
        self.spawn_session = spawn_session
        self.max_concurrent = dict(max_concurrent)
        self.no_new_agents = threading.Event()  # shutdown step 1: StartAgent is rejected
        self.breaker = breaker or BreakerSettings()
        # ``wake_at(t)``: queue a DispatchDue at t (the engine's timer); ``clock``: now (UTC).
        self.wake_at = wake_at or (lambda when: None)
        self.clock = clock or _now
        self._paused_until: datetime | None = None  # the pause last announced and woken for
        # The last run started for each work item: a start the engine decided before it had
        # processed that run's end is refused (``_unseen_end``).
        self._last_started: dict[WorkItemId, SessionId] = {}
        # A failed run's retry waits: (initial, max) seconds, doubling per failure.
        self.retry_backoff = retry_backoff
        self.daily_budget = daily_budget or DailyBudget()
        self.quota = quota or QuotaSettings()
        # The model account each role's runtime uses (``anthropic``, ``openai``): quota is
        # per account. A role not named uses "model".
        self.accounts: dict[AgentRole, str] = dict(accounts or {})
        self._waits_announced: dict[str, datetime] = {}  # per item (or the planner): its wait

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
        return self.writes.write(command, snapshot)

    # ------------------------------------------------------------------ agents

    def admission_settings(self) -> AdmissionSettings:
        """The settings admission is judged with, as they are now (a reload changes them)."""
        quota, budget = self.quota, self.daily_budget
        # The zone is looked up only when there is a budget to count (as before admission).
        zone = ZoneInfo(budget.timezone) if budget.per_day_usd else UTC
        return AdmissionSettings(
            breaker=self.breaker.rule(),
            retry_backoff=self.retry_backoff,
            per_day_usd=budget.per_day_usd,
            day_zone=zone,
            quota_margin=quota.margin,
            quota_pause_at=quota.pause_at,
            accounts=self.accounts,
            max_concurrent=self.max_concurrent,
        )

    def _announce(self, refusal: Refusal) -> None:
        """Log a wait that has an end and ask to be woken at it, once per wait: the breaker's
        pause, the daily budget's, a model account's, a failed item's or planner's backoff."""
        match refusal:
            case BreakerPaused(pause=pause):
                if self._paused_until == pause.until:
                    return
                self._paused_until = pause.until
                counted = "retries" if pause.outage else "failures_in_a_row"
                log.error(
                    "dispatch paused",
                    reason=pause.reason,
                    **{counted: pause.failures},
                    next_try_at=pause.until.isoformat(timespec="seconds"),
                )
                self.wake_at(pause.until)
            case QuotaHeld(hold=hold):
                key = f"quota:{hold.account}"
                if self._waits_announced.get(key) == hold.until:
                    return
                self._waits_announced[key] = hold.until
                log.error(
                    "dispatch paused for a model account",
                    account=hold.account,
                    reason=hold.reason,
                    resumes_at=hold.until.isoformat(timespec="seconds"),
                )
                self.wake_at(hold.until)
            case BudgetSpent(spent=spent, per_day=per_day, until=until):
                self._announce_wait(
                    "daily budget",
                    until,
                    "dispatch paused: the daily budget is spent",
                    spent_usd=round(spent, 4),
                    per_day_usd=per_day,
                )
            case ItemBackoff(work_item_id=wid, wait=wait):
                self._announce_wait(
                    f"item {wid}",
                    wait.until,
                    "retry deferred",
                    work_item_id=wid,
                    failed_attempt=wait.attempt,
                    last_failure=" ".join(wait.reason.split())[:300],
                )
            case PlannerWaits(wait=wait):
                self._announce_wait(
                    "planner",
                    wait.until,
                    "planner run deferred",
                    failures=wait.failures,
                    last_failure=" ".join(wait.reason.split())[:300],
                )

    def _announce_wait(self, key: str, until: datetime, event: str, **fields: Any) -> None:
        """Log a wait and ask to be woken at its end, once per wait."""
        if self._waits_announced.get(key) == until:
            return
        self._waits_announced[key] = until
        log.warning(event, next_try_at=until.isoformat(timespec="seconds"), **fields)
        self.wake_at(until)

    def _start_agent(self, command: StartAgent, snapshot: EngineState) -> list[EngineEvent]:
        params = command.params
        reason = "the engine is shutting down" if self.no_new_agents.is_set() else None
        if reason is None:
            settings, running = self.admission_settings(), self.sessions.running()
            refusal = admission(snapshot, self.clock(), settings, command, running)
            if refusal is not None:
                self._announce(refusal)
                reason = refusal.words
            else:  # the item's last run ended, but was the start decided knowing it?
                reason = self._unseen_end(params, snapshot)
        if reason is not None:
            log.info("agent dispatch rejected", role=params.role, reason=reason)
            return [CommandRejected(command=command, reason=reason, at=_now())]
        session_id = SessionId(f"{params.role}-{uuid.uuid4().hex[:12]}")
        params = params.model_copy(update={"session_id": session_id})
        if not isinstance(params, PlannerStartParams):
            self._last_started[params.work_item_id] = session_id
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

    def _unseen_end(self, params: AgentStartParams, snapshot: EngineState) -> str | None:
        """Why a run for the item may not start yet: the engine decided this start on a state
        that had not taken in the item's last run (started here, ended, its events still
        queued). A run that ends the instant it starts would otherwise be started again and
        again on the same stale state, past the item's attempts; the end's processing
        dispatches again on the state that counts it."""
        if isinstance(params, PlannerStartParams):
            return None
        last = self._last_started.get(params.work_item_id)
        if last is None:
            return None
        run = snapshot.agent_runs.get(last)
        if run is not None and run.is_terminal:
            del self._last_started[params.work_item_id]
            return None
        return (
            f"work item {params.work_item_id}'s last run ({last}) has not been processed to "
            "its end yet; the engine decides again once it has"
        )


def _subject(params: AgentStartParams) -> dict[str, Any]:
    if params.role == "planner":
        return {"spec_paths": list(getattr(params, "spec_paths", ()))}
    return {"work_item_id": getattr(params, "work_item_id", None)}


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

"""An agent session: one actor per run, owning its event loop, timeout, cancel and cleanup.

The runtime adapter is asynchronous; the session runs it on its own event loop (an anyio blocking
portal entered in ``on_start``: ``asyncio.run`` in a handler would block the mailbox, and an
escaping ``CancelledError`` is a ``BaseException`` that stops every pykka actor) and hears of the
run's end through a done-callback that ``tell``s the actor. The runtime owns the duration limit
(``adapters/runtime/agent_runtime.py``); the session's anyio deadline, a cancel grace later, is the
safety net for a runtime that does not end. A cancel first asks the adapter (``cancel_agent``, so
the adapter's own cleanup runs), then, after a grace period, cancels the run's scope, and after a
second one abandons it.

Whatever the adapter does (returns, raises, hangs, returns garbage) and however the session
ends (run over, cancel, timeout, stop, crash), exactly one terminal event reaches the queue.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager, suppress
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import anyio
import anyio.from_thread
import pykka

from actors.base import SupervisedActor, tell
from actors.crashpoints import crashpoint
from actors.queue import Inbox
from actors.session_registry import SessionManager
from actors.streams import OutputBuffer, StreamRegistry
from actors.supervisor import ChildSpec, Supervisor
from domain.errors import AgentFailure, AgentFailureKind
from domain.events import (
    AgentFailed,
    AgentStarted,
    EngineEvent,
    ImplementorCompleted,
    PlannerCompleted,
    ReviewerCompleted,
)
from domain.models import AgentRole, AgentStartParams, PlannerStartParams, RunUsage, SessionId
from domain.ports import AgentRunHandle, RuntimeAdapter
from domain.results import ImplementorResult, PlannerResult, ReviewerResult

OUTPUT_GRACE = 2.0  # seconds the output stream may lag behind the result


@dataclass(frozen=True)
class Cancel:
    reason: str = "cancelled"
    infrastructure: bool = False  # ends as an infrastructure failure: no attempt spent


@dataclass(frozen=True)
class _RunEnded:
    pass


@dataclass(frozen=True)
class _GraceExpired:
    stage: int


class AgentSession(SupervisedActor):
    def __init__(
        self,
        *,
        session_id: SessionId,
        params: AgentStartParams,
        adapter: RuntimeAdapter,
        max_duration: float,
        inbox: Inbox,
        sessions: SessionManager,
        streams: StreamRegistry,
        cancel_grace: float = 30.0,
        on_finished: Callable[[], None] | None = None,
        **base: Any,
    ) -> None:
        super().__init__(**base)
        self.log = self.log.bind(session_id=session_id, role=params.role)
        if not isinstance(params, PlannerStartParams):
            self.log = self.log.bind(work_item_id=params.work_item_id)
        self.session_id = session_id
        self.params = params
        self.adapter = adapter
        self.max_duration = max_duration
        self.cancel_grace = cancel_grace
        self._inbox = inbox
        self._sessions = sessions
        self._streams = streams
        self._lock = threading.Lock()
        self._emitted = False
        self._cancel_reason: str | None = None
        self._cancel_infrastructure = False
        self._timed_out = False
        self._handle: AgentRunHandle | None = None
        self._scope: anyio.CancelScope | None = None
        self._portal_cm: AbstractContextManager[anyio.from_thread.BlockingPortal] | None = None
        self._portal: anyio.from_thread.BlockingPortal | None = None
        self._future: concurrent.futures.Future[Any] | None = None
        self._timers: list[threading.Timer] = []
        self._on_finished = on_finished

    # ------------------------------------------------------------------ actor side

    def on_start(self) -> None:
        self._portal_cm = anyio.from_thread.start_blocking_portal(name=f"cpe-{self.session_id}")
        self._portal = self._portal_cm.__enter__()
        self._future = self._portal.start_task_soon(self._run)
        ref = self.actor_ref
        self._future.add_done_callback(lambda _: tell(ref, _RunEnded()))

    def on_receive(self, message: Any) -> Any:
        if isinstance(message, Cancel):
            self._cancel(message.reason, infrastructure=message.infrastructure)
        elif isinstance(message, _GraceExpired):
            self._grace_expired(message.stage)
        elif isinstance(message, _RunEnded):
            self._emit(self._terminal_event())
            self.actor_ref.stop(block=False)

    def _cancel(self, reason: str, *, infrastructure: bool = False) -> None:
        if self._cancel_reason is not None or self._emitted:
            return
        self._cancel_reason = reason
        self._cancel_infrastructure = infrastructure
        self.log.info("cancelling agent run", reason=reason)
        if self._handle is None:
            # start_agent has not returned: the runtime does not know the session yet, so its
            # cancel_agent would be a no-op. Cancel the start itself (anyio cancellation, so
            # the runtime's own cleanup runs); _run also re-checks once the handle exists.
            self._cancel_scope()
        else:
            self._ask_adapter_to_cancel()
        self._after(self.cancel_grace, _GraceExpired(1))

    def _grace_expired(self, stage: int) -> None:
        if self._future is None or self._future.done() or self._emitted:
            return
        if stage == 1:
            self.log.warning("run did not stop after cancel; cancelling its scope")
            self._cancel_scope()
            self._after(self.cancel_grace, _GraceExpired(2))
            return
        self.log.error("run did not stop; abandoned")
        self._emit(self._cancelled(f"{self._cancel_reason}; the runtime did not stop"))
        self.actor_ref.stop(block=False)

    def on_crash(self, exc: BaseException) -> None:
        self._ask_adapter_to_cancel()
        self._emit(self._failed("failed", f"session crashed: {type(exc).__name__}: {exc}"))

    def release(self) -> None:
        for timer in self._timers:
            timer.cancel()
        if self._future is not None and not self._future.done():
            # Stopped from outside (shutdown) while the run goes on: end it, then report it.
            self._cancel_reason = self._cancel_reason or "session stopped"
            self._ask_adapter_to_cancel()
            self._cancel_scope()
            concurrent.futures.wait([self._future], timeout=self.cancel_grace)
        if not self._emitted:
            self._emit(self._terminal_event())
        portal_cm, self._portal_cm = self._portal_cm, None
        if portal_cm is not None:
            # Closing the loop waits for the runtime's executor threads; that must not hold
            # the actor (or a shutdown) hostage, so it happens beside it. A run that was
            # abandoned (it ignored every cancel) gets its loop closed when it ends at last.
            def close(_: object = None) -> None:
                threading.Thread(
                    target=portal_cm.__exit__, args=(None, None, None), daemon=True
                ).start()

            if self._future is None:
                close()
            else:
                self._future.add_done_callback(close)
        if self._on_finished is not None:
            self._on_finished()

    # ------------------------------------------------------------------ the run (event loop)

    async def _run(self) -> Any:
        with anyio.CancelScope() as scope:
            self._scope = scope
            if self._cancel_reason is not None:
                # Cancelled before the loop got here: the actor found no scope to cancel.
                # (It sets the reason before it looks for the scope, so one of us sees it.)
                scope.cancel()
            # A cancel grace after the runtime's deadline, which reports the timeout: a safety net
            with anyio.move_on_after(self.max_duration + self.cancel_grace) as deadline:
                handle = await self.adapter.start_agent(self.params)
                self._handle = handle
                if self._cancel_reason is not None:  # cancelled while it was starting
                    self._ask_adapter_to_cancel()
                buffer = self._streams.open(self.session_id)
                self._inbox.put(
                    AgentStarted(
                        session_id=self.session_id,
                        log_file_path=handle.log_file_path,
                        at=_now(),
                    ),
                    internal=True,
                )
                return await self._until_result(handle, buffer)
            if deadline.cancelled_caught:
                self._timed_out = True
                self._ask_adapter_to_cancel()
                with anyio.move_on_after(self.cancel_grace):
                    if self._handle is not None:
                        await _settle(self._handle.result)
        raise AgentFailure("cancelled", self._cancel_reason or "cancelled")

    async def _until_result(self, handle: AgentRunHandle, buffer: OutputBuffer) -> Any:
        outcome: Any = None
        async with anyio.create_task_group() as group:
            group.start_soon(self._pump, handle, buffer)
            try:
                # Shielded: the session's deadline or scope cancel must not cancel the run's
                # own task under it (its teardown, the worktree removal included, would be cut
                # off, and the loop closed under it); the runtime is asked to cancel instead,
                # and the run is waited for.
                result = handle.result
                shielded = asyncio.shield(result) if isinstance(result, asyncio.Future) else result
                outcome = await shielded
            except Exception as exc:
                outcome = exc
            group.cancel_scope.deadline = anyio.current_time() + OUTPUT_GRACE
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome

    async def _pump(self, handle: AgentRunHandle, buffer: OutputBuffer) -> None:
        try:
            async for chunk in handle.output:
                text: object = chunk  # the port says str; a broken runtime may send anything
                if isinstance(text, str) and text:
                    buffer.append(text)
        except Exception as exc:
            self.log.warning("output stream failed", error=repr(exc))

    # ------------------------------------------------------------------ outcome

    def _terminal_event(self) -> EngineEvent:
        future = self._future
        if self._timed_out:
            return self._failed(
                "timed-out", f"exceeded max_agent_duration ({self.max_duration:g}s)"
            )
        if future is None or not future.done():
            return self._cancelled(self._cancel_reason or "session ended before the run")
        if future.cancelled():
            return self._cancelled(self._cancel_reason or "cancelled")
        exc = future.exception()
        if exc is not None:
            if self._cancel_reason is not None:
                return self._cancelled(self._cancel_reason)
            if isinstance(exc, AgentFailure):
                return self._failed(exc.kind, exc.reason, infrastructure=exc.infrastructure)
            return self._failed("failed", f"{type(exc).__name__}: {exc}")
        return self._completed(future.result())

    def _completed(self, result: object) -> EngineEvent:
        usage = self._usage()
        common: dict[str, Any] = {
            "session_id": self.session_id,
            "cost_usd": usage.cost_usd,
            "turns": usage.turns,
            "model": usage.model,
            "at": _now(),
        }
        role = self.params.role
        if role == "planner" and isinstance(result, PlannerResult):
            return PlannerCompleted(result=result, **common)
        if role == "implementor" and isinstance(result, ImplementorResult):
            return ImplementorCompleted(result=result, **common)
        if role == "reviewer" and isinstance(result, ReviewerResult):
            return ReviewerCompleted(result=result, **common)
        return self._failed(
            "failed", f"the runtime returned {type(result).__name__}, expected a {role} result"
        )

    def _cancelled(self, reason: str) -> AgentFailed:
        return self._failed("cancelled", reason, infrastructure=self._cancel_infrastructure)

    def _failed(
        self, kind: AgentFailureKind, reason: str, *, infrastructure: bool = False
    ) -> AgentFailed:
        usage = self._usage()
        return AgentFailed(
            session_id=self.session_id,
            role=self.params.role,
            kind=kind,
            reason=reason,
            cost_usd=usage.cost_usd,
            turns=usage.turns,
            model=usage.model,
            failure_class="infrastructure" if infrastructure else "work",
            at=_now(),
        )

    def _usage(self) -> RunUsage:
        try:
            usage = self._handle.usage() if self._handle is not None else None
        except Exception:
            usage = None
        return usage if isinstance(usage, RunUsage) else RunUsage()

    def _emit(self, event: EngineEvent) -> None:
        with self._lock:
            if self._emitted:
                return
            self._emitted = True
        # The terminal event must reach the queue whatever else fails here: it is put last,
        # in a finally, after the stream and the concurrency slot are released.
        try:
            try:
                self._streams.close(self.session_id)
            finally:
                self._sessions.ended(self.session_id)
        except Exception:
            self.log.exception("releasing the run's stream or slot failed")
        finally:
            crashpoint("session.before_terminal")
            try:
                self._inbox.put(event)  # a terminal event is taken even once shutdown began
            finally:
                self._sessions.delivered(self.session_id)
            crashpoint("session.after_terminal")
        if isinstance(event, AgentFailed):
            self.log.warning(
                "agent run failed",
                outcome=event.type,
                kind=event.kind,
                failure_class=event.failure_class,
                reason=event.reason,
            )
        else:
            self.log.info("agent run ended", outcome=event.type)

    # ------------------------------------------------------------------ plumbing

    def _ask_adapter_to_cancel(self) -> None:
        try:
            self.adapter.cancel_agent(self.session_id)
        except Exception:
            self.log.exception("runtime cancel_agent failed")

    def _cancel_scope(self) -> None:
        scope, portal = self._scope, self._portal
        if scope is None or portal is None:
            return

        async def cancel() -> None:
            scope.cancel()

        with suppress(RuntimeError):  # the loop is already gone
            portal.start_task_soon(cancel)

    def _after(self, seconds: float, message: object) -> None:
        ref = self.actor_ref
        timer = threading.Timer(seconds, lambda: tell(ref, message))
        timer.daemon = True
        self._timers.append(timer)
        timer.start()


@dataclass
class SessionStarter:
    """Starts an agent run (the executor's ``spawn_session``): an ``AgentSession``, a temporary
    child of ``supervisor``, with the runtime adapter of its role, whose canceller goes to
    ``sessions``. ``max_duration`` applies to runs started from then on (a reload sets it)."""

    supervisor: Supervisor
    adapters: Mapping[AgentRole, RuntimeAdapter]
    inbox: Inbox
    sessions: SessionManager
    streams: StreamRegistry
    max_duration: float
    cancel_grace: float

    def __call__(self, session_id: SessionId, params: AgentStartParams) -> None:
        sup = self.supervisor
        child_id = f"session:{session_id}"
        adapter = self.adapters[params.role]

        def start(generation: int, report: Any) -> pykka.ActorRef[Any]:
            return AgentSession.start(
                session_id=session_id,
                params=params,
                adapter=adapter,
                max_duration=self.max_duration,
                cancel_grace=self.cancel_grace,
                inbox=self.inbox,
                sessions=self.sessions,
                streams=self.streams,
                on_finished=lambda: sup.remove_child(child_id),
                child_id=child_id,
                generation=generation,
                report=report,
            )

        ref = sup.start_child(ChildSpec(child_id, start, restart="temporary"))
        self.sessions.attach(session_id, self._canceller(ref))

    def _canceller(self, ref: pykka.ActorRef[Any]) -> Callable[[str | None, bool], None]:
        def cancel(why: str | None = None, infrastructure: bool = False) -> None:
            with suppress(pykka.ActorDeadError):  # it ended meanwhile
                ref.tell(Cancel(why or self._reason(), infrastructure=infrastructure))

        return cancel

    def _reason(self) -> str:
        return "the engine is shutting down" if self.inbox.closed else "cancelled by a person"


async def _settle(awaitable: Any) -> None:
    with suppress(Exception):  # only waiting for it to end; the outcome is already decided
        await awaitable


def _now() -> datetime:
    return datetime.now(UTC)

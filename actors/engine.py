"""The ``Engine`` facade and ``create_engine``: the engine's public interface (docs/contract.md).

``create_engine(config)`` is synchronous: it validates the config, opens the journal, builds the
store, the runtime adapters (through the injected factory), the executor, the handlers and the
pollers, and starts nothing, so a caller can subscribe before any event is processed.
``start()`` and ``stop()`` go through fixed, numbered steps (first poll before ``start`` returns;
runs cancelled before pollers stop, queue drained before the loop stops); the actor tree runs
under a ``Supervisor``.
"""

from __future__ import annotations

import functools
import os
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, Literal

import pykka
import structlog

from actors.assembly import (
    WRITES_SEEN_BY,
    checked_runtime_adapters,
    child_specs,
    dispatch_due_at,
    landable,
    listen_for_changes,
    make_executor,
    make_pollers,
    recheck_failed_writes,
    validate_provider,
)
from actors.base import tell
from actors.config import EngineConfig
from actors.executor import asking
from actors.journal import Journal
from actors.journal_file import InstanceLock
from actors.loop import EngineLoop, Ping
from actors.observer import Observer, Watcher
from actors.pollers import (
    Poll,
    StartTicking,
)
from actors.queue import Inbox
from actors.session_actor import SessionStarter
from actors.session_registry import SessionManager
from actors.settings import BreakerSettings, DailyBudget
from actors.startup import (
    StartWaits,
    fail_interrupted_runs,
    journaled_state,
    reap_runtime_leftovers,
)
from actors.store import Listener, StateStore, Unsubscribe
from actors.streams import AgentStream, StreamRegistry
from actors.supervisor import Supervisor, permanent_error
from domain.errors import ConfigError, JournalError
from domain.events import (
    AgentFailed,
    AgentSignalled,
    DispatchDue,
    EngineEvent,
    EngineStarted,
    EngineStopped,
)
from domain.handlers import create_handlers
from domain.handlers.options import HandlerOptions
from domain.models import (
    AgentRole,
    EngineState,
    RevisionFile,
    RevisionId,
    RunSignal,
    SessionId,
    WorkItemId,
)
from domain.ports import (
    ProviderInterfaces,
    RuntimeAdapter,
    RuntimeAdapterDeps,
)

log = structlog.get_logger("cpe.engine")

DRAIN_GRACE = 5.0  # seconds the drain of shutdown step 5 always gets, whatever step 3 took
CHILDREN_STOP_BUDGET = 10.0  # seconds steps 4 and 6 each wait for actors to stop, at most
EXECUTOR_WAIT = 60.0  # seconds a command waits for the executor actor while it restarts
LOCK_WAIT = 5.0  # seconds a start waits for the instance lock a short-lived command holds


def create_engine(config: EngineConfig, *, instance: InstanceLock | None = None) -> Engine:
    """Validate ``config`` and build an engine (started by ``start()``). ``instance``: the
    state directory's lock, when the caller took it before building anything that touches the
    state (a second ``cpe run`` must not reap the first one's pipelines); else the engine takes
    it at ``start()``."""
    provider = validate_provider(config.provider)
    if config.create_runtime_adapters is None or not callable(config.create_runtime_adapters):
        raise ConfigError(
            "create_runtime_adapters: missing",
            expected="a factory (RuntimeAdapterDeps) -> {role: RuntimeAdapter}",
        )
    return Engine(config, provider, instance=instance)


class Engine:
    def __init__(
        self,
        config: EngineConfig,
        provider: ProviderInterfaces,
        *,
        instance: InstanceLock | None = None,
    ):
        config = config.model_copy(update={"handlers": landable(config.handlers, provider)})
        self.config = config
        self.provider = provider
        self.journal = Journal(config.journal_path)
        self.journal.on_io_error = self._journal_refused
        self.fatal_error: str | None = None  # why the engine stopped on its own, in one line
        self._instance = instance or InstanceLock(config.journal_path)
        self.store = StateStore()
        self.inbox = Inbox(self.journal)
        self.sessions = SessionManager()
        self.streams = StreamRegistry()
        self.handlers = create_handlers(config.handlers)
        self.runtime_adapters = self._build_runtime_adapters()
        # Built ahead of its children (its thread starts with the first, in start()), so that
        # the loop and the executor are given it when they are built; it stays out of sight,
        # self.supervisor, until start().
        self._tree = Supervisor(config.supervisor, on_give_up=self._gave_up)
        self.supervisor: Supervisor | None = None
        self.session_starter = SessionStarter(
            supervisor=self._tree,
            adapters=self.runtime_adapters,
            inbox=self.inbox,
            sessions=self.sessions,
            streams=self.streams,
            max_duration=config.max_agent_duration,
            cancel_grace=config.cancel_grace,
        )
        self.executor = make_executor(
            config,
            provider,
            journal=self.journal,
            inbox=self.inbox,
            sessions=self.sessions,
            spawn_session=self.session_starter,
            wake_at=functools.partial(dispatch_due_at, self.inbox),
            written=self._written,
        )
        self.observer = Observer(config.handlers)
        execute = asking(functools.partial(self._tree.wait_ref, "executor", EXECUTOR_WAIT))
        self.loop = EngineLoop(
            self.store, self.handlers, execute, self.inbox, observe=self.observer
        )
        self.pollers = make_pollers(
            config, provider, get_state=self.store.get_state, enqueue=self.inbox.put
        )
        listen_for_changes(self.pollers, self.refresh)
        self.observer.watch(recheck_failed_writes(self.pollers))
        self._lifecycle = threading.Lock()
        self._waits = StartWaits(config.shutdown_timeout)
        self._started = False
        self._stopped = threading.Event()
        self._paused = False
        self.exit_code: int | None = None

    def _signalled(self, session_id: SessionId, signal: RunSignal) -> None:
        """A live run's word on the model API, queued as ``AgentSignalled`` (from the runtime's
        reader thread). Taken until shutdown begins; then the runs are being cancelled anyway."""
        self.inbox.put(AgentSignalled(session_id=session_id, signal=signal, at=datetime.now(UTC)))

    def _build_runtime_adapters(self) -> dict[AgentRole, RuntimeAdapter]:
        factory = self.config.create_runtime_adapters
        assert factory is not None
        deps = RuntimeAdapterDeps(
            work_item_reader=self.provider.work_item_reader,
            revision_reader=self.provider.revision_reader,
            get_state=self.store.get_state,
            get_review_history=self.provider.revision_reader.get_review_history,
            report_signal=self._signalled,
        )
        return checked_runtime_adapters(factory(deps))

    # ------------------------------------------------------------------ the public interface

    def get_state(self) -> EngineState:
        return self.store.get_state()

    def subscribe(self, listener: Listener) -> Unsubscribe:
        return self.store.subscribe(listener)

    def watch(self, watcher: Watcher) -> Unsubscribe:
        """Call ``watcher(event, before, after)`` for every processed event, on the engine's
        thread before the handlers run: it must be quick (a console line, a queue put)."""
        return self.observer.watch(watcher)

    def queued(self) -> tuple[EngineEvent, ...]:
        """The events journaled and waiting to be processed, in order."""
        return self.inbox.queued()

    def enqueue(self, event: EngineEvent) -> bool:
        """Queue ``event``; False when it was rejected (the engine is shutting down)."""
        return self.inbox.put(event) is not None

    def submit(self, events: Sequence[EngineEvent], timeout: float) -> bool | None:
        """Queue a person's events (journaled first, like every event) and wait until the
        engine has processed them: True; False when it has not within ``timeout`` (they are
        processed later); None when the engine refused them (it is shutting down)."""
        last = None
        for event in events:
            last = self.inbox.put(event)
            if last is None:
                return None
        return True if last is None else self.inbox.wait_processed(last, timeout)

    def get_work_item_body(self, work_item_id: WorkItemId) -> str:
        return self.provider.work_item_reader.get_work_item_body(work_item_id)

    def get_revision_files(self, revision_id: RevisionId) -> Sequence[RevisionFile]:
        return self.provider.revision_reader.get_revision_files(revision_id)

    def get_agent_stream(self, session_id: SessionId) -> AgentStream | None:
        return self.streams.subscribe(session_id)

    def refresh(self, names: Iterable[str] | None = None) -> None:
        """An immediate poll cycle on every poller (or those ``names``d), outside the
        interval; one already waiting in a poller's mailbox is enough (none piles up)."""
        wanted = None if names is None else set(names)
        for poller in self.pollers:
            if wanted is not None and poller.name not in wanted:
                continue
            ref = self._ref(f"poller:{poller.name}")
            if ref is None or poller.queued.is_set():
                continue
            poller.queued.set()
            if not tell(ref, Poll()):
                poller.queued.clear()

    def _written(self, command: Any) -> None:
        """The executor made ``command``'s write: poll what it changed now (a planned item is
        dispatched at once, a revision's new head is read at once)."""
        names = WRITES_SEEN_BY.get(command.type, ())
        if names:
            self.refresh(names)

    def ping(self) -> threading.Event:
        """Tell the engine actor a ``Ping``; the event is set once it answered (see
        ``actors.process.Watchdog``). Unset for good when the engine actor is not running."""
        ping = Ping()
        tell(self._ref("engine"), ping)
        return ping.answered

    def pause(self) -> None:
        """Hold the processing loop: events are still accepted and journaled, not processed."""
        self._paused = True
        self.inbox.processing.clear()

    def resume(self) -> None:
        self._paused = False
        self.inbox.processing.set()
        self.inbox.wake()

    # ------------------------------------------------------------------ start

    def start(self) -> None:
        with self._lifecycle:
            if self._started:
                return
            # JournalError: another engine has this state. A command that journals a person's
            # request while no engine runs holds the lock for a moment: that is waited out.
            self._instance.acquire(wait=LOCK_WAIT, engine=True)
            self._started = True
        try:
            restored = self.journal.restore()
        except JournalError:  # nothing was started: the caller says why and exits
            with self._lifecycle:
                self._started = False
            self._instance.release()
            raise
        self.store.set_state(restored.state)
        # Before anything is dispatched: the writes a crash interrupted are made (again, with
        # their keys) and recorded; the cycles that made them are processed again below.
        resumed = self.executor.writes.resume_pending(restored.state)
        self.inbox.restore(restored.unprocessed)
        # Who runs on this state, and since when (cpe status); a crash journals no stop after it.
        self.inbox.put(EngineStarted(pid=os.getpid(), at=datetime.now(UTC)))
        # Runs are judged on everything the journal holds, processed or not: a run whose
        # AgentRequested was queued but never processed was interrupted too.
        journaled = journaled_state(restored)
        reap_runtime_leftovers(self.provider.revision_reader, self.runtime_adapters)
        self.supervisor = self._tree
        for spec in child_specs(self._tree, self.inbox, self.executor, self.loop, self.pollers):
            self.supervisor.start_child(spec)
        log.info(
            "engine starting",
            log_level=self.config.log_level,
            poll_intervals={p.name: p.interval for p in self.pollers},
            shutdown_timeout=self.config.shutdown_timeout,
            roles={role: type(a).__name__ for role, a in self.runtime_adapters.items()},
            restored_events=restored.processed_seq,
            unprocessed_events=len(restored.unprocessed),
            resumed_writes=resumed,
        )
        # 1. the first poll cycle of every poller, awaited (a stop asked meanwhile ends the wait)
        self._waits.first_polls({p.name: self._ref(f"poller:{p.name}") for p in self.pollers})
        first_poll_seq = self.journal.last_seq()
        # 2. interval polling. The flag lives on the poller's shared state, so an actor that is
        # being restarted right now (its first poll crashed) starts ticking when it comes back.
        for poller in self.pollers:
            poller.ticking.set()
            ref = self._ref(f"poller:{poller.name}")
            if ref is not None:
                ref.tell(StartTicking())
        # 3. the processing loop
        if not self._paused:
            self.resume()
            # start() resolves once the first poll's events are in the store (S002-05/07):
            # they went through the queue like every event, so wait for the loop to get past
            # them. Their handlers ran too, so recovery needs no phase of its own (S002-06).
            events = "the first poll's events"
            if self._waits.until(lambda t: self.inbox.wait_processed(first_poll_seq, t), events):
                self.executor.writes.deliver_resumed()  # the restored events were processed too
        # The runs a crash or a stop interrupted fail last, behind the first poll's readings and
        # the events the restored cycles answer again: both may say what was true before the
        # failures' own writes (an item in progress), and processed after those writes they
        # would undo them in the state, and the same write would be made again.
        fail_interrupted_runs(self.inbox, journaled)

    def interrupt_start(self) -> None:
        """A stop asked while ``start`` runs (a signal) ends its waits (``StartWaits``)."""
        self._waits.interrupted.set()

    def abandon_runs(self, reason: str) -> int:
        """At a forced exit (a second Ctrl-C): journal every run still active as cancelled by
        cpe's own stop, so that the next start finds them interrupted, not failed: no attempt
        is charged for a stop a person asked for, however abrupt. The runs' processes are left
        to the next start's reaper. How many were journaled. Then the exit itself, as an
        interruption (unless the stop had finished already: it journaled its own)."""
        if self._stopped.is_set():  # the journal is closed
            return 0
        runs = self.store.get_state().agent_runs.values()
        active = {run.session_id: run.role for run in runs if run.is_active}
        active |= self.sessions.roles()
        at = datetime.now(UTC)
        for sid, role in active.items():
            self.inbox.put(
                AgentFailed(session_id=sid, role=role, kind="cancelled", reason=reason, at=at),
                internal=True,
            )
        self._journal_stop("interrupted", "a second Ctrl-C: exited without waiting")
        return len(active)

    def _journal_stop(self, how: Literal["stopped", "interrupted", "crashed"], why: str) -> None:
        """The engine's last event: how it ends (cpe status says so once it has gone)."""
        if self.exit_code == 74:  # the disk refused the journal: nothing more is recorded
            return
        try:
            self.journal.append(EngineStopped(how=how, reason=why, at=datetime.now(UTC)))
        except JournalError as error:  # a refused disk: the stop goes on; status says crashed
            log.error("cannot journal the stop", error=str(error))

    # ------------------------------------------------------------------ commands and sessions

    def reconfigure(
        self,
        *,
        handlers: HandlerOptions,
        poll_intervals: Mapping[str, float],
        breaker: BreakerSettings,
        max_agent_duration: float,
        shutdown_timeout: float,
        daily_budget: DailyBudget | None = None,
    ) -> None:
        """Take new settings while running (a configuration reload): the workflow options and
        concurrency caps from the next event on, poll intervals from the next wait, the breaker
        and retry backoff from the next dispatch, the duration limit for new runs. Running
        agents go on as they are."""
        self.config = self.config.model_copy(
            update={
                "handlers": handlers,
                "breaker": breaker,
                "max_agent_duration": max_agent_duration,
                "shutdown_timeout": shutdown_timeout,
            }
        )
        handlers = landable(handlers, self.provider)
        self.handlers = create_handlers(handlers)
        self.loop.handlers = self.handlers
        self.observer.options = handlers
        self.session_starter.max_duration = max_agent_duration
        executor = self.executor
        executor.max_concurrent = dict(handlers.max_concurrent)
        executor.breaker = breaker
        if daily_budget is not None:
            executor.daily_budget = daily_budget
        executor.retry_backoff = (handlers.retry_backoff_initial, handlers.retry_backoff_max)
        for poller in self.pollers:
            poller.interval = poll_intervals.get(poller.name, poller.interval)
        self.inbox.put(DispatchDue(at=datetime.now(UTC)), internal=True)  # raised caps: use them

    def _ref(self, child_id: str) -> pykka.ActorRef[Any] | None:
        return self.supervisor.ref(child_id) if self.supervisor is not None else None

    # ------------------------------------------------------------------ stop

    def stop(self, reason: str = "requested") -> None:
        """Graceful shutdown in six steps: refuse new work, cancel the runs, wait for them, stop the
        pollers, drain the queue, stop the rest."""
        with self._lifecycle:
            if self._stopped.is_set() or not self._started:
                if not self._stopped.is_set():
                    self.journal.close()  # never started: nothing else to stop
                    self._instance.release()  # held since it was built, when it was given
                self._stopped.set()
                return
        log.info("shutdown initiated", reason=reason)
        timeout = self.config.shutdown_timeout
        # One budget for steps 3 and 5 together, so a stop takes at most shutdown_timeout +
        # DRAIN_GRACE + twice CHILDREN_STOP_BUDGET (steps 4 and 6): systemd's TimeoutStopSec is
        # set above that (deploy/cpe.service, checked by a test).
        deadline = time.monotonic() + timeout
        # 1. reject new events (agent terminal events still come in) and new runs
        self.inbox.close()
        self.executor.no_new_agents.set()
        self.sessions.close()
        # 2. cancel every active run
        cancelled = self.sessions.cancel_all()
        # 3. wait for their terminal events, up to the timeout
        if not self.sessions.wait_all_ended(timeout):
            log.error("agent runs did not end in time; abandoned", runs=self.sessions.active())
        # 4. stop the pollers
        if self.supervisor is not None:
            pollers_by = time.monotonic() + CHILDREN_STOP_BUDGET
            for poller in self.pollers:
                self.supervisor.stop_child(f"poller:{poller.name}", deadline=pollers_by)
        # 5. drain the queue (the terminal events of step 3 among them)
        if not self.inbox.wait_idle(max(DRAIN_GRACE, deadline - time.monotonic())):
            log.error("queue not drained in time", left=len(self.inbox))
        # 6. stop the processing loop and everything else
        self.executor.writes.stopping.set()
        if self.supervisor is not None:
            self.supervisor.stop(deadline=time.monotonic() + CHILDREN_STOP_BUDGET)
        self._journal_stop("stopped", reason)
        self.journal.close()
        self._instance.release()
        self.exit_code = 0 if self.exit_code is None else self.exit_code
        self._stopped.set()
        log.info("shutdown complete", runs_cancelled=cancelled)

    def _journal_refused(self, error: JournalError) -> None:
        """The disk refused the journal (full, read-only): nothing the engine does from now
        on could be recorded, so it stops, exit 74 (EX_IOERR), naming the path."""
        if self.fatal_error is not None or self._stopped.is_set():
            return
        self.fatal_error = (
            f"journal error: {error} (a full or read-only disk?); nothing more could be "
            "recorded, so cpe stopped: free space or fix the state directory, then start it again"
        )
        self.exit_code = 74
        log.error("the journal cannot be written; stopping", error=str(error))
        threading.Thread(
            target=self.stop,
            args=("the journal cannot be written",),
            name="cpe-stop-io",
            daemon=True,
        ).start()

    def _gave_up(self, exc: BaseException) -> None:
        log.error("supervision gave up; stopping", error=repr(exc))
        self.exit_code = self._tree.exit_code  # 78: a child cannot start with its configuration
        permanent = permanent_error(exc)
        if permanent is not None and self.fatal_error is None:
            self.fatal_error = f"configuration error: {permanent}"
        self.inbox.close()
        self.executor.no_new_agents.set()
        self.executor.writes.stopping.set()
        self.sessions.cancel_all()
        try:  # what the journal deferred is committed before the process exits
            self.journal.flush()
        except JournalError as error:
            log.error("cannot commit the journal's deferred records", error=str(error))
        else:
            self._journal_stop("crashed", f"supervision gave up: {exc!r}")
        self._stopped.set()

    def wait(self, timeout: float | None = None) -> int | None:
        """Block until the engine has stopped; its exit code (0, or 75 when supervision gave
        up, 78 when it gave up on a child that cannot start with its configuration), or None on
        timeout."""
        if not self._stopped.wait(timeout):
            return None
        return self.exit_code

    @property
    def stopped(self) -> bool:
        return self._stopped.is_set()

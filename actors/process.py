"""Running an engine as a supervised process: signals and exit codes.

Exit codes follow sysexits and systemd's expectations (docs/operations.md): 0 after a clean stop, 75
(EX_TEMPFAIL) when supervision gave up (restart me), 78 (EX_CONFIG) for a configuration error
(do not restart me: ``RestartPreventExitStatus=78``), 65 (EX_DATAERR) for a journal that
cannot be read (a restart would not fix it either). SIGTERM and SIGINT run the graceful stop;
a second SIGINT while stopping exits at once.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from types import FrameType

import structlog

from actors.engine import Engine
from domain.errors import ConfigError, JournalError, JournalIOError

EXIT_OK = 0
EXIT_DATAERR = 65  # the journal cannot be read: a restart will not fix it either
EXIT_IOERR = 74  # the disk refused the journal (full, read-only): fix the disk, then restart
EXIT_TEMPFAIL = 75
EXIT_CONFIG = 78
EXIT_FORCED = 130
# A second Ctrl-C: the runs still active are journaled as this, cancelled, within this long.
ABANDONED = "interrupted: cpe was stopped at once (a second Ctrl-C); the run goes again"
ABANDON_WAIT = 2.0

log = structlog.get_logger("cpe.process")


class Watchdog:
    """Whether to tell systemd ``WATCHDOG=1`` now: only while the engine answers.

    Each ``healthy`` call pings the engine actor (a tell, never an ask) unless a ping is still
    out. The engine answers between events, so an answered ping proves the actor is alive and
    not stuck; an unanswered one is tolerated for ``stall_timeout`` seconds (one event may
    legitimately take that long, e.g. a provider write waiting out a ``Retry-After``), after
    which the watchdog is withheld and systemd restarts the process (``WatchdogSec``). The queue
    actor must be alive too: without it nothing reaches the engine.
    """

    def __init__(self, stall_timeout: float, clock: Callable[[], float] = time.monotonic):
        self.stall_timeout = stall_timeout
        self._clock = clock
        self.ping: threading.Event | None = None
        self._sent = 0.0
        self._withheld = False

    def healthy(self, engine: Engine) -> bool:
        sup = engine.supervisor
        if sup is None or sup.ref("event_queue") is None or sup.ref("engine") is None:
            return False
        now = self._clock()
        if self.ping is None or self.ping.is_set():
            self.ping, self._sent = engine.ping(), now
            self._withheld = False
            return True
        if now - self._sent <= self.stall_timeout:
            return True
        if not self._withheld:
            self._withheld = True
            log.error(
                "the engine has not answered; withholding the watchdog",
                waited_s=round(now - self._sent, 1),
                stall_timeout=self.stall_timeout,
            )
        return False


def journal_exit(exc: JournalError) -> int:
    """The exit code of a journal error: 74 when the disk refused it, 65 when it is damaged."""
    return EXIT_IOERR if isinstance(exc, JournalIOError) else EXIT_DATAERR


class _Stopper:
    """The stop a signal asks for. Handlers are in place before anything is built and stay
    until the process exits: a SIGTERM or SIGINT while cpe builds or starts the engine stops it
    cleanly (exit 0) once the start returns, and a second SIGINT at any time, even after the
    stop finished, exits 130 at once (never by the signal itself)."""

    def __init__(self, on_stopping: Callable[[], None] | None) -> None:
        self.requested = threading.Event()
        self.started = threading.Event()
        self.engine: Engine | None = None
        self._on_stopping = on_stopping
        self._sent = threading.Lock()

    def on_signal(self, signum: int, _: FrameType | None) -> None:
        name = signal.Signals(signum).name
        if self.requested.is_set():
            if signum == signal.SIGINT:
                log.error("second interrupt: exiting without waiting", signal=name)
                self._abandon()
                os._exit(EXIT_FORCED)
            return
        self.requested.set()
        log.info("signal received; stopping", signal=name)
        if self.started.is_set():
            self.stop(f"signal {name}")
        elif self.engine is not None:  # starting: its waits end, then the stop runs
            self.engine.interrupt_start()

    def _abandon(self) -> None:
        """The runs still active are journaled as interrupted by this stop, not failed (no
        attempt charged). In a thread, bounded: a journal busy elsewhere (the signal may have
        come while this thread wrote to it) must not hold up the exit; the next start then
        counts those runs as interrupted by a crash."""
        engine = self.engine
        if engine is None or not self.started.is_set():
            return
        done = threading.Thread(
            target=engine.abandon_runs,
            args=(ABANDONED,),
            name="cpe-abandon",
            daemon=True,
        )
        done.start()
        done.join(ABANDON_WAIT)

    def stop(self, reason: str) -> None:
        """Stop the started engine in the background, once (the handler and the main thread
        may both get here)."""
        if self.engine is None or not self._sent.acquire(blocking=False):
            return
        if self._on_stopping is not None:
            self._on_stopping()
        threading.Thread(
            target=self.engine.stop, args=(reason,), name="cpe-stop", daemon=True
        ).start()


class _Reloader:
    """The SIGHUP handler: a reload, never a death (the default action would leave the agents
    orphaned). One reload at a time; none while stopping. One that comes while cpe starts (a
    person saw "cpe started" and reloaded) is kept and made once the start is done."""

    def __init__(self, stopper: _Stopper, on_reload: Callable[[], None] | None) -> None:
        self._stopper = stopper
        self._on_reload = on_reload
        self._busy = threading.Lock()
        self._pending = threading.Event()

    def _reload(self) -> None:
        try:
            if self._on_reload is not None:
                self._on_reload()
        except Exception:
            log.exception("configuration reload failed; running on the last good one")
        finally:
            self._busy.release()

    def on_signal(self, signum: int, _: FrameType | None) -> None:
        if self._stopper.requested.is_set():
            log.info("SIGHUP ignored: cpe is stopping")
            return
        if not self._stopper.started.is_set():
            log.info("SIGHUP while cpe starts: the reload follows the start")
            self._pending.set()
            return
        self._start()

    def started(self) -> None:
        """The engine has started: a reload asked meanwhile is made now."""
        if self._pending.is_set() and not self._stopper.requested.is_set():
            self._pending.clear()
            self._start()

    def _start(self) -> None:
        if self._on_reload is None or not self._busy.acquire(blocking=False):
            return
        log.info("signal received; reloading the configuration", signal="SIGHUP")
        threading.Thread(target=self._reload, name="cpe-reload", daemon=True).start()


def run_engine(
    build: Callable[[], Engine],
    *,
    install_signals: bool = True,
    on_ready: Callable[[Engine], None] | None = None,
    on_tick: Callable[[Engine], None] | None = None,
    on_stopping: Callable[[], None] | None = None,
    tick_seconds: float = 5.0,
    stop_requested: threading.Event | None = None,
    on_reload: Callable[[], None] | None = None,
) -> int:
    """Build, start and run an engine until it stops; the process exit code.
    ``stop_requested`` is set when a stop signal came before this was called. SIGHUP calls
    ``on_reload`` (in a thread of its own, once the engine has started; ignored before)."""
    stopper = _Stopper(on_stopping)
    reloader = _Reloader(stopper, on_reload)
    if install_signals:
        signal.signal(signal.SIGTERM, stopper.on_signal)
        signal.signal(signal.SIGINT, stopper.on_signal)
        signal.signal(signal.SIGHUP, reloader.on_signal)
        if stop_requested is not None and stop_requested.is_set():
            stopper.requested.set()
            log.info("signal received while starting; stopping")
    try:
        engine = stopper.engine = build()
    except ConfigError as exc:
        print(f"cpe: configuration error: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    except JournalError as exc:
        print(f"cpe: journal error: {exc}", file=sys.stderr)
        return journal_exit(exc)
    if stopper.requested.is_set():  # stopped while it was being built: nothing was started
        engine.stop(reason="stopped before it started")
        return EXIT_OK
    try:
        engine.start()
    except JournalError as exc:
        print(f"cpe: journal error: {exc}", file=sys.stderr)
        engine.stop(reason="the journal cannot be read")
        return journal_exit(exc)
    stopper.started.set()
    if stopper.requested.is_set():  # a signal came while it started: stop now
        stopper.stop("a signal during the start")
    else:
        reloader.started()
        if on_ready is not None:
            on_ready(engine)
    while True:
        code = engine.wait(tick_seconds)
        if code is not None:
            if engine.fatal_error is not None:
                print(f"cpe: {engine.fatal_error}", file=sys.stderr)
            return code
        if on_tick is not None and not stopper.requested.is_set():
            on_tick(engine)

"""Supervision with Erlang/OTP semantics: pykka has none of its own.

Children start in order. When one must be restarted the strategy says who restarts:
``one_for_one`` the child alone, ``one_for_all`` every child, ``rest_for_one`` the child and
every child started after it (the others are stopped in reverse order first). Restart types: a
``permanent`` child is restarted whenever it ends, crash or not; a ``transient`` one only when
it crashed (a normal stop is final); a ``temporary`` one (an agent session) never. A child that
ends for good leaves the tree. Stops the supervisor makes itself (a group restart,
``stop_child``, ``stop``) are not exits to act on. Each restart waits an exponential backoff
with jitter, on a schedule (a child in a crash loop never delays another's restart). More
than ``max_restarts`` restarts within ``within_seconds`` means something is deeply wrong: the
supervisor stops everything and gives up with exit code 75, so the process supervisor above
(systemd) restarts the whole process.

A crash that no restart can fix is not restarted at all: a ``ConfigError`` (raised by the
child, or the error it was raised from: a service's ``ServiceEnded`` is raised from the
service's own error) means the child would fail the same way at every start. Instead of a loop
of identical crashes up to the restart intensity, the supervisor logs it once, stops everything
and gives up with exit code 78 (EX_CONFIG: systemd does not restart that either,
``RestartPreventExitStatus=78``). Whether a failure is permanent is known where it happens: an
adapter turns such an ``OSError`` (a port in use) into a ``ConfigError`` naming what to change.

The supervisor is a plain thread-safe object with one worker thread, not an actor: actors
report crashes to it without blocking, and it never waits on an actor that could be waiting on
it.
"""

from __future__ import annotations

import heapq
import itertools
import queue
import random
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

import pykka
import structlog

from actors.base import CrashReport
from actors.settings import SupervisorSettings
from domain.errors import ConfigError

RestartType = Literal["permanent", "transient", "temporary"]
EXIT_GAVE_UP = 75
EXIT_CONFIG = 78  # a child cannot start with this configuration: a restart would not fix it

log = structlog.get_logger("cpe.supervisor")


def permanent_error(exc: BaseException | None) -> ConfigError | None:
    """The configuration error behind a crash, if there is one: ``exc`` itself or an error it
    was raised from (``raise ... from``). A restart cannot fix it."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, ConfigError):
            return exc
        seen.add(id(exc))
        exc = exc.__cause__
    return None


Starter = Callable[[int, CrashReport], pykka.ActorRef[Any]]
"""Starts a child: ``(generation, report) -> ref``. A new generation on every restart."""


@dataclass
class ChildSpec:
    child_id: str
    start: Starter
    restart: RestartType = "permanent"
    shutdown_timeout: float | None = None


@dataclass(order=True)
class _Due:
    """A restart waiting out its backoff: the group's members, each with the generation it
    had when the restart was decided (one restarted meanwhile by another group is skipped)."""

    at: float
    order: int
    members: list[tuple[_Child, int]] = field(compare=False)


_TICK = object()  # the worker woke for a due restart, not for a report


@dataclass
class _Child:
    spec: ChildSpec
    ref: pykka.ActorRef[Any] | None = None
    generation: int = 0
    restarts: deque[float] = field(default_factory=deque)
    stopping: int | None = None  # the generation the supervisor itself is stopping


class Supervisor:
    def __init__(
        self,
        settings: SupervisorSettings | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
        rng: random.Random | None = None,
        on_give_up: Callable[[BaseException], None] | None = None,
    ):
        self.settings = settings or SupervisorSettings()
        self._clock = clock
        self._rng = rng or random.Random()
        self._on_give_up = on_give_up
        self._lock = threading.RLock()
        self._changed = threading.Condition(self._lock)
        self._children: dict[str, _Child] = {}  # insertion order is start order
        self._restarts: deque[float] = deque()
        self._reports: queue.SimpleQueue[tuple[str, int, BaseException | None] | None] = (
            queue.SimpleQueue()
        )
        self._stopping = threading.Event()
        self.gave_up = threading.Event()
        self.failure: BaseException | None = None  # the crash it gave up on
        self.restart_count = 0
        self._due: list[_Due] = []  # a heap; only the worker thread touches it
        self._order = itertools.count()
        # Started with the first child: a supervisor built ahead of its tree (the engine's, so
        # that its children's collaborators can be given it when they are built) holds no
        # thread until then.
        self._worker = threading.Thread(target=self._work, name="cpe-supervisor", daemon=True)

    # ------------------------------------------------------------------ children

    def start_child(self, spec: ChildSpec) -> pykka.ActorRef[Any]:
        with self._lock:
            if spec.child_id in self._children:
                raise ValueError(f"child {spec.child_id!r} is already supervised")
            if self._worker.ident is None:
                self._worker.start()
            child = _Child(spec)
            self._children[spec.child_id] = child
            self._start(child)
            assert child.ref is not None
            return child.ref

    def ref(self, child_id: str) -> pykka.ActorRef[Any] | None:
        with self._lock:
            child = self._children.get(child_id)
            return child.ref if child and child.ref and child.ref.is_alive() else None

    def wait_ref(self, child_id: str, timeout: float) -> pykka.ActorRef[Any] | None:
        """The child's live ref, waiting up to ``timeout`` while it is being restarted."""
        # Real time, not self._clock: the injected clock measures restart intensity only, and a
        # test's frozen clock must not turn this wait into an endless one.
        deadline = time.monotonic() + timeout
        with self._changed:
            while True:
                ref = self.ref(child_id)
                if ref is not None or self._stopping.is_set() or child_id not in self._children:
                    return ref
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return None
                self._changed.wait(min(remaining, 0.5))

    def child_ids(self) -> list[str]:
        with self._lock:
            return list(self._children)

    def generation(self, child_id: str) -> int:
        with self._lock:
            return self._children[child_id].generation

    def wait_until(self, predicate: Callable[[], bool], timeout: float) -> bool:
        """Wait until ``predicate`` holds; re-checked whenever the tree changes."""
        with self._changed:
            return self._changed.wait_for(predicate, timeout)

    def report(self, child_id: str, generation: int, exc: BaseException | None) -> None:
        """A child ended: crashed (``exc``) or stopped (None). Non-blocking: the worker thread
        decides what to do."""
        self._reports.put((child_id, generation, exc))

    def stop_child(self, child_id: str, deadline: float | None = None) -> None:
        """Stop a child for good (shutdown step 4 stops the pollers before the drain); waiting
        for it at most until ``deadline`` (``time.monotonic()``) when one is given."""
        with self._lock:
            child = self._children.pop(child_id, None)
        if child is not None:
            self._stop_children([child], deadline=deadline)

    def remove_child(self, child_id: str) -> None:
        """Forget a child that stopped on its own (a finished session)."""
        with self._lock:
            self._children.pop(child_id, None)
            self._changed.notify_all()

    # ------------------------------------------------------------------ stopping

    def stop(self, timeout: float | None = None, deadline: float | None = None) -> None:
        """Stop every child in reverse start order; no restart happens from here on. Each child
        gets its own stop timeout, and none is waited for past ``deadline`` (monotonic): a stop
        as a whole stays inside the budget the process supervisor above allows."""
        self._stopping.set()
        with self._lock:
            children = list(self._children.values())
        self._stop_children(reversed(children), timeout, deadline)
        self._reports.put(None)
        with self._changed:
            self._changed.notify_all()

    @property
    def stopping(self) -> bool:
        return self._stopping.is_set()

    def _stop_children(
        self, children: Any, timeout: float | None = None, deadline: float | None = None
    ) -> None:
        # Stop them one at a time (reverse order matters: the engine before the queue it
        # drains), each against its own timeout and the overall deadline; one that does not
        # stop in time is abandoned.
        for child in children:
            ref = child.ref
            if ref is None or not ref.is_alive():
                continue
            limit = timeout or child.spec.shutdown_timeout or self.settings.child_shutdown_timeout
            if deadline is not None:
                limit = max(0.0, min(limit, deadline - time.monotonic()))
            with self._lock:
                child.stopping = child.generation
            try:
                ref.stop(block=False).get(timeout=limit)
            except pykka.Timeout:
                log.error(
                    "child did not stop in time; abandoned",
                    child=child.spec.child_id,
                    timeout_s=limit,
                )
            except pykka.ActorDeadError:
                pass

    # ------------------------------------------------------------------ the worker

    def _work(self) -> None:
        # Restarts wait out their backoff here, scheduled, not slept through: a child in a
        # crash loop with a long backoff never delays another child's restart.
        while True:
            wait = max(0.0, self._due[0].at - time.monotonic()) if self._due else None
            report: object
            try:
                report = self._reports.get(timeout=wait)
            except queue.Empty:
                report = _TICK
            if report is None or self._stopping.is_set():
                return
            try:
                if isinstance(report, tuple):
                    child_id, generation, exc = report
                    self._handle(child_id, generation, exc)
                self._start_due()
            except Exception as exc:  # the supervisor itself must not die silently
                log.exception("supervisor failed to handle a crash")
                self._give_up(exc)
                return

    def _start_due(self) -> None:
        while self._due and self._due[0].at <= time.monotonic():
            due = heapq.heappop(self._due)
            with self._lock:
                for member, generation in due.members:
                    current = self._children.get(member.spec.child_id)
                    if current is member and member.generation == generation:
                        self._start(member)
                self.restart_count += 1
                self._changed.notify_all()

    def _handle(self, child_id: str, generation: int, exc: BaseException | None) -> None:
        with self._lock:
            child = self._children.get(child_id)
            if child is None or child.generation != generation:
                return  # an instance already replaced or removed
            if child.stopping == generation:
                return  # the supervisor stopped it itself
            restart = child.spec.restart
            if restart == "temporary" or (restart == "transient" and exc is None):
                self._children.pop(child_id, None)
                self._changed.notify_all()
                log.info(
                    f"{restart} child {'stopped' if exc is None else 'crashed'}; not restarted",
                    child=child_id,
                )
                return
            if exc is None:
                exc = RuntimeError(f"the {restart} child {child_id} stopped")
            permanent = permanent_error(exc)
            if permanent is None:
                exceeded, delay, group = self._count_restart(child)
        if permanent is not None:
            # Outside the lock, as below. Once, not at every start until the intensity trips.
            log.error(
                "a child cannot start with this configuration; not restarted",
                child=child_id,
                error=str(permanent),
            )
            self._give_up(exc)
            return
        if exceeded:
            # Outside the lock: stopping the children must not wait on an actor that is
            # itself waiting for the lock (to look up a sibling's ref).
            log.error(
                "restart intensity exceeded; stopping everything",
                child=child_id,
                max_restarts=self.settings.max_restarts,
                within_seconds=self.settings.within_seconds,
            )
            self._give_up(exc)
            return
        log.warning(
            "restarting",
            child=child_id,
            reason=f"{type(exc).__name__}: {exc}",
            strategy=self.settings.strategy,
            group=[c.spec.child_id for c in group],
            backoff_s=round(delay, 3),
        )
        self._stop_children(reversed([c for c in group if c.spec.child_id != child_id]))
        with self._lock:
            members = [(member, member.generation) for member in group]
        heapq.heappush(self._due, _Due(time.monotonic() + delay, next(self._order), members))
        with self._changed:  # a waiter may be watching for the crash to be taken in hand
            self._changed.notify_all()

    def _count_restart(self, child: _Child) -> tuple[bool, float, list[_Child]]:
        """Whether a restart now exceeds the intensity; if not, it is counted, and its backoff
        and group are returned. Under the lock."""
        now = self._clock()
        window = self.settings.within_seconds
        while self._restarts and now - self._restarts[0] > window:
            self._restarts.popleft()
        if len(self._restarts) >= self.settings.max_restarts:
            return True, 0.0, []
        self._restarts.append(now)
        while child.restarts and now - child.restarts[0] > window:
            child.restarts.popleft()
        child.restarts.append(now)
        return False, self._backoff(len(child.restarts)), self._restart_group(child.spec.child_id)

    def _restart_group(self, child_id: str) -> list[_Child]:
        # Temporary children (agent sessions) are not part of any group: a poller's crash must
        # not kill the agents that are running (and a temporary child is never restarted).
        children = [c for c in self._children.values() if c.spec.restart != "temporary"]
        index = next(i for i, c in enumerate(children) if c.spec.child_id == child_id)
        if self.settings.strategy == "one_for_all":
            return children
        if self.settings.strategy == "rest_for_one":
            return children[index:]
        return [children[index]]

    def _backoff(self, restarts_of_child: int) -> float:
        s = self.settings
        base: float = min(s.backoff_max, s.backoff_initial * 2.0 ** (restarts_of_child - 1))
        return max(0.0, base * self._rng.uniform(1 - s.jitter, 1 + s.jitter))

    def _start(self, child: _Child) -> None:
        child.generation += 1
        child.ref = child.spec.start(child.generation, self.report)

    def _give_up(self, exc: BaseException) -> None:
        self.failure = exc
        self._stopping.set()
        with self._lock:
            children = list(self._children.values())
        self._stop_children(reversed(children))
        self.gave_up.set()
        with self._changed:
            self._changed.notify_all()
        if self._on_give_up is not None:
            self._on_give_up(exc)

    @property
    def exit_code(self) -> int:
        """0 while it has not given up; 78 when it gave up on a child that cannot start with
        its configuration, 75 when on the restart intensity."""
        if not self.gave_up.is_set():
            return 0
        return EXIT_CONFIG if permanent_error(self.failure) is not None else EXIT_GAVE_UP

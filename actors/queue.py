"""The event queue: a durable FIFO (``Inbox``) and the actor that feeds the engine from it.

``Inbox`` holds the queue's contents outside any actor, backed by the journal: ``put`` appends
the event to the journal before it is queued, so neither a restart of the queue or engine actor
nor a crash of the process loses a queued event. After ``close()`` (shutdown step 1) it rejects
events from outside, except the terminal events of agent runs; events the engine itself
produces while draining (command results) are still accepted.

``QueueActor`` hands the engine one event at a time and waits for it to be finished before
handing the next: the engine processes events strictly in order, one at a time.

The event in flight is recorded with the engine it was handed to, so that neither actor's
restart sticks the queue or processes an event twice. It is handed out again when that engine
is dead (it crashed mid-event, or was stopped), or when it never reached an engine (a queue that
crashed between taking it and handing it over). When a restarted queue finds it handed to a
live engine, it cannot tell whether the tell happened: it sends that engine a ``Ping``, which
the engine answers between two events, so after every message sent before it. An event still
in flight with that engine by then never reached it.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import pykka
import structlog

from actors.base import SupervisedActor, tell
from actors.journal import Journal, JournalEntry
from domain.errors import JournalError
from domain.events import EngineEvent, identify, is_agent_terminal

log = structlog.get_logger("cpe.queue")


class Inbox:
    def __init__(self, journal: Journal, restored: Iterable[JournalEntry] = ()):
        self.journal = journal
        # _append keeps journal order and queue order the same; _lock guards the deque only,
        # so the engine's take/finish never wait for a producer's insert.
        self._append = threading.Lock()
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        self._items: deque[tuple[int, EngineEvent]] = deque(
            (entry.seq, entry.event) for entry in restored
        )
        self._in_flight: tuple[int, EngineEvent] | None = None
        self._holder: pykka.ActorRef[Any] | None = None  # the engine it was handed to
        self._closed = False
        self.processing = threading.Event()  # set by start(): the loop may run
        self.wake: Callable[[], None] = lambda: None
        self.rejected = 0

    def put(self, event: EngineEvent, *, internal: bool = False) -> int | None:
        """Append ``event``; its journal sequence number, or None when it was rejected."""
        with self._append:
            if self._closed and not internal and not is_agent_terminal(event):
                self.rejected += 1
                log.info("event rejected: shutting down", **identify(event))
                return None
            seq = self.journal.append(event)
            with self._lock:
                self._items.append((seq, event))
                idle = self._in_flight is None
        if idle:  # a busy engine asks for the next event itself when it is done
            self.wake()
        return seq

    def restore(self, entries: Iterable[JournalEntry]) -> None:
        """Queue events the journal holds but never finished processing (before new ones)."""
        with self._append, self._lock:
            self._items.extendleft(reversed([(e.seq, e.event) for e in entries]))

    def take(self) -> tuple[int, EngineEvent] | None:
        with self._lock:
            if self._in_flight is not None or not self._items:
                return None
            self._in_flight = self._items.popleft()
            self._holder = None
            return self._in_flight

    def hand(self, seq: int, engine: pykka.ActorRef[Any]) -> bool:
        """Record that the event in flight goes to ``engine``; call it before the tell."""
        with self._lock:
            if self._in_flight is None or self._in_flight[0] != seq:
                return False
            self._holder = engine
            return True

    def in_flight(self) -> tuple[int, pykka.ActorRef[Any] | None] | None:
        """The event in flight and the engine it was handed to (None: not handed yet)."""
        with self._lock:
            return None if self._in_flight is None else (self._in_flight[0], self._holder)

    def finish(self, seq: int, results: Sequence[EngineEvent] = ()) -> None:
        """The engine finished processing ``seq``; ``results`` are the events its commands
        produced. Both are journaled in one transaction, then the results are queued. The
        transaction is deferred (journal docstring: committed with the next one anyone makes)
        unless this leaves the queue idle: whoever waits for an idle queue finds it all
        committed. Holding ``_append`` keeps producers out meanwhile."""
        with self._append:
            seqs = self.journal.append_and_mark(results, seq, defer=True)
            with self._lock:
                idle = not results and not self._items
            if idle:
                try:
                    self.journal.flush()
                except JournalError as exc:
                    # The cycle is done and its records stay deferred: the next transaction
                    # commits them. Failing here would process the event again and record
                    # its results twice.
                    log.error("cannot commit the journal's deferred records", error=str(exc))
            with self._lock:
                self._items.extend(zip(seqs, results, strict=True))
                if self._in_flight is not None and self._in_flight[0] == seq:
                    self._in_flight = None
                    self._holder = None
                self._idle.notify_all()

    def requeue_in_flight(self) -> None:
        """The event in flight goes back to the head of the queue, whoever holds it."""
        with self._lock:
            self._requeue()

    def requeue_if(self, seq: int, holder: pykka.ActorRef[Any] | None) -> bool:
        """Requeue the event in flight if it is still ``seq``, handed to ``holder``."""
        with self._lock:
            if self._in_flight is None or self._in_flight[0] != seq or self._holder is not holder:
                return False
            self._requeue()
            return True

    def requeue_if_lost(self) -> int | None:
        """Requeue the event in flight if no live engine holds it: it was never handed over,
        or the engine it went to is dead (and so will never finish it). Only the queue actor
        calls this, between two of its own hand-overs. The requeued event's seq, or None."""
        with self._lock:
            if self._in_flight is None:
                return None
            if self._holder is not None and self._holder.is_alive():
                return None
            seq = self._in_flight[0]
            self._requeue()
            return seq

    def _requeue(self) -> None:
        if self._in_flight is not None:
            self._items.appendleft(self._in_flight)
            self._in_flight = None
            self._holder = None

    @property
    def busy(self) -> bool:
        with self._lock:
            return self._in_flight is not None

    def close(self) -> None:
        with self._append:
            self._closed = True

    @property
    def closed(self) -> bool:
        return self._closed

    def __len__(self) -> int:
        with self._lock:
            return len(self._items) + (self._in_flight is not None)

    def wait_processed(self, seq: int, timeout: float) -> bool:
        """Wait until every event up to ``seq`` was processed. The queue is in journal order
        (a requeued event goes back to the head), so it is enough that neither the event in
        flight nor the head of the queue is at or before ``seq``."""

        def done() -> bool:
            head = self._items[0][0] if self._items else None
            flight = self._in_flight[0] if self._in_flight is not None else None
            return all(s is None or s > seq for s in (head, flight))

        with self._idle:
            return self._idle.wait_for(done, timeout=timeout)

    def wait_idle(self, timeout: float) -> bool:
        """Wait until nothing is queued or in flight (the drain of shutdown step 5)."""
        with self._idle:
            return self._idle.wait_for(
                lambda: not self._items and self._in_flight is None, timeout=timeout
            )


@dataclass(frozen=True)
class Wake:
    """Something was queued or finished: hand the engine the next event if it is idle."""


@dataclass(frozen=True)
class EngineReady:
    """The engine (re)started: an event the dead one held is handed out again."""


@dataclass(frozen=True)
class Process:
    seq: int
    event: EngineEvent


@dataclass(frozen=True)
class _Recheck:
    """The engine answered the ``Ping`` a restarted queue sent it: if ``seq`` is still in
    flight with it, it never got it."""

    seq: int
    holder: pykka.ActorRef[Any]


class _Answered(threading.Event):
    """A ``Ping``'s ``answered`` that also tells the queue (the queue must not block on it)."""

    def __init__(self, then: Callable[[], object]) -> None:
        super().__init__()
        self._then = then

    def set(self) -> None:
        super().set()
        self._then()


class QueueActor(SupervisedActor):
    def __init__(
        self,
        inbox: Inbox,
        engine: Callable[[], pykka.ActorRef[Any] | None],
        **base: Any,
    ) -> None:
        super().__init__(**base)
        self.inbox = inbox
        self._engine = engine

    def on_start(self) -> None:
        ref = self.actor_ref

        def wake() -> None:
            tell(ref, Wake())

        self.inbox.wake = wake
        self._recover()
        self._pump()

    def on_receive(self, message: Any) -> Any:
        if isinstance(message, _Recheck) and self.inbox.requeue_if(message.seq, message.holder):
            log.warning("the event in flight never reached the engine; handing it out again")
        # Wake, EngineReady (the event a dead engine held is requeued by _pump), _Recheck
        self._pump()

    def _recover(self) -> None:
        """A new queue: find out whether the event in flight reached a live engine."""
        flight = self.inbox.in_flight()
        if flight is None:
            return
        seq, holder = flight
        if holder is None or not holder.is_alive():
            return  # _pump requeues it
        # Here, not at the top: actors.loop imports this module.
        from actors.loop import Ping  # noqa: PLC0415

        ref = self.actor_ref
        ping = Ping(answered=_Answered(lambda: tell(ref, _Recheck(seq, holder))))
        if not tell(holder, ping):
            self.inbox.requeue_if(seq, holder)

    def _pump(self) -> None:
        lost = self.inbox.requeue_if_lost()
        if lost is not None:
            log.warning("the engine holding an event is gone; handing it out again", seq=lost)
        if not self.inbox.processing.is_set():
            return
        item = self.inbox.take()
        if item is None:
            return
        seq = item[0]
        engine = self._engine()
        if engine is None or not self.inbox.hand(seq, engine) or not tell(engine, Process(*item)):
            # The engine is being restarted; it announces itself with EngineReady.
            self.inbox.requeue_if(seq, engine)

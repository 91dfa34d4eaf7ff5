"""The event queue: a durable FIFO (``Inbox``) and the actor that feeds the engine from it.

``Inbox`` holds the queue's contents outside any actor, backed by the journal: ``put`` appends
the event to the journal before it is queued, so neither a restart of the queue or engine actor
nor a crash of the process loses a queued event. After ``close()`` (shutdown step 1) it rejects
events from outside, except the terminal events of agent runs; events the engine itself
produces while draining (command results) are still accepted.

``QueueActor`` hands the engine one event at a time and waits for it to be finished before
handing the next: the engine processes events strictly in order, one at a time.
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
            return self._in_flight

    def finish(self, seq: int, results: Sequence[EngineEvent] = ()) -> None:
        """The engine finished processing ``seq``; ``results`` are the events its commands
        produced. Both are journaled in one transaction, then the results are queued."""
        with self._append:
            seqs = self.journal.append_and_mark(results, seq)
            with self._lock:
                self._items.extend(zip(seqs, results, strict=True))
                if self._in_flight is not None and self._in_flight[0] == seq:
                    self._in_flight = None
                self._idle.notify_all()

    def requeue_in_flight(self) -> None:
        """The engine died mid-event: that event goes back to the head of the queue."""
        with self._lock:
            if self._in_flight is not None:
                self._items.appendleft(self._in_flight)
                self._in_flight = None

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
    """The engine (re)started: an event it held when it died is handed out again."""


@dataclass(frozen=True)
class Process:
    seq: int
    event: EngineEvent


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
        self._pump()

    def on_receive(self, message: Any) -> Any:
        if isinstance(message, EngineReady):
            self.inbox.requeue_in_flight()
        self._pump()

    def _pump(self) -> None:
        if not self.inbox.processing.is_set():
            return
        item = self.inbox.take()
        if item is None:
            return
        if not tell(self._engine(), Process(*item)):
            # The engine is being restarted; it announces itself with EngineReady.
            self.inbox.requeue_in_flight()

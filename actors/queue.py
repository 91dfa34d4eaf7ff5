"""The event queue: a durable FIFO (``Inbox``) and the actor that wakes the engine for it.

``Inbox`` holds the queue's contents outside any actor, backed by the journal: ``put`` appends
the event to the journal before it is queued, so neither a restart of the queue or engine actor
nor a crash of the process loses a queued event. After ``close()`` (shutdown step 1) it rejects
events from outside, except the terminal events of agent runs; events the engine itself
produces while draining (command results) are still accepted.

The Inbox is the only record of what is queued and what is in flight; the actors pass one
message, ``Wake`` ("look at the Inbox"), which carries no event. The Inbox rings the
``QueueActor``, which rings the engine; the engine takes the next event itself (``take``,
naming itself its holder) and ``finish``es it, one message at a time. Hence:

- one at a time: ``take`` gives nothing while a live engine holds an event;
- none twice: a wake carries no event, so a duplicated one takes the next event or nothing,
  and an event is handed out again only when its holder is dead, so can no longer finish it;
- none lost: the Inbox rings when a put finds nothing in flight and when a finish leaves
  events queued; a wake lost with a dead actor's mailbox is made good by its successor, which
  looks once when it starts (the queue rings the engine, the engine rings itself); an engine
  rings as it ends, so the event it held goes to whichever engine runs by then.
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
from actors.journal import Journal
from actors.journal_records import JournalEntry
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
        self._holder: pykka.ActorRef[Any] | None = None  # the engine that took it
        self._closed = False
        self.processing = threading.Event()  # set by start(): the loop may run
        self.wake: Callable[[], object] = lambda: None  # set by the queue actor: rings it
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
        if idle:  # else the finish of the event in flight rings
            self.wake()
        return seq

    def restore(self, entries: Iterable[JournalEntry]) -> None:
        """Queue events the journal holds but never finished processing (before new ones)."""
        with self._append, self._lock:
            self._items.extendleft(reversed([(e.seq, e.event) for e in entries]))

    def take(self, holder: pykka.ActorRef[Any] | None = None) -> tuple[int, EngineEvent] | None:
        """The next event for ``holder`` (the engine actor taking it), which ``finish``es it:
        the event in flight again when its holder is dead (it crashed mid-event, and a dead
        actor can no longer finish it), else the head of the queue. None while a live engine
        holds an event, or when nothing is queued. (No holder, in a test: taken by hand.)"""
        with self._lock:
            if self._in_flight is None:
                if not self._items:
                    return None
                self._in_flight = self._items.popleft()
            elif self._holder is not None and self._holder.is_alive():
                return None
            else:
                seq = self._in_flight[0]
                log.warning("the engine holding an event is gone; handing it out again", seq=seq)
            self._holder = holder
            return self._in_flight

    def in_flight(self) -> tuple[int, pykka.ActorRef[Any] | None] | None:
        """The event in flight and the engine that took it."""
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
                more = bool(self._items)
                self._idle.notify_all()
        if more:  # a put meanwhile found this event in flight and left the ringing to us
            self.wake()

    def queued(self) -> tuple[EngineEvent, ...]:
        """The events waiting to be processed, in order (a snapshot)."""
        with self._lock:
            return tuple(event for _, event in self._items)

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
        """Wait until every event up to ``seq`` was processed. The event in flight and then
        the queue are in journal order, so it is enough that neither the event in flight nor
        the head of the queue is at or before ``seq``."""

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
    """Look at the Inbox: something was queued or finished, or an actor (re)started."""


class QueueActor(SupervisedActor):
    """The engine's doorbell: producers only put into the Inbox, which rings this actor, and
    this actor rings the engine (``engine()``: the live engine actor, None while it restarts;
    it rings itself when it starts)."""

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
        self.inbox.wake = lambda: tell(ref, Wake())
        # Rung by the Inbox from here on; a wake a dead predecessor got is lost with it.
        tell(self._engine(), Wake())

    def on_receive(self, message: Any) -> Any:
        if isinstance(message, Wake):
            tell(self._engine(), Wake())

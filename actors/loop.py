"""The engine's processing loop: one event at a time, fully processed (S002-01, S002-02).

For each event: apply it to the store, take one snapshot, run every handler against that
snapshot, execute the commands in order, and queue their result events (processed in later
cycles, never within this one). Only then is the event marked processed in the journal and the
next one taken.

``EngineActor`` takes its events from the ``Inbox`` itself when rung (``Wake``, the hand-off in
actors/queue.py), one per message, so a ``Ping`` is answered between two events.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import structlog

from actors.base import SupervisedActor
from actors.queue import Inbox, Wake
from actors.store import StateStore
from domain.commands import EngineCommand
from domain.events import EngineEvent, identify
from domain.handlers import run_handlers
from domain.models import EngineState

Execute = Callable[[EngineCommand, EngineState], Sequence[EngineEvent]]
HandlerList = Sequence[Callable[[EngineEvent, EngineState], list[EngineCommand]]]

log = structlog.get_logger("cpe.engine")
_debug = logging.getLogger("cpe.engine")


@dataclass
class EngineLoop:
    store: StateStore
    handlers: HandlerList
    execute: Execute
    inbox: Inbox
    # Called with each event and the states before and after it, before the handlers: for
    # logging and watchers only (they must be quick and must not raise).
    observe: Callable[[EngineEvent, EngineState, EngineState], None] | None = None

    def process(self, seq: int, event: EngineEvent) -> None:
        if _debug.isEnabledFor(logging.DEBUG):
            log.debug("processing event", seq=seq, **identify(event))
        before = self.store.get_state()
        snapshot = self.store.apply(event)
        if self.observe is not None:
            self.observe(event, before, snapshot)
        commands = run_handlers(self.handlers, event, snapshot)
        results: list[EngineEvent] = []
        for command in commands:
            results.extend(self.execute(command, snapshot))
        # The results and the end of this cycle are journaled together: a crash before it
        # replays the event (its writes answer from their intents), never half of it.
        self.inbox.finish(seq, results)


@dataclass(frozen=True)
class Ping:
    """Are you there? The engine sets ``answered`` when it gets to it: between two events,
    never in the middle of one, so an engine stuck on one event leaves it unset."""

    answered: threading.Event = field(default_factory=threading.Event)


class EngineActor(SupervisedActor):
    def __init__(self, loop: EngineLoop, **base: Any) -> None:
        super().__init__(**base)
        self.loop = loop

    def on_start(self) -> None:
        self.actor_ref.tell(Wake())  # the wakes a dead predecessor got are lost with it

    def on_receive(self, message: Any) -> Any:
        inbox = self.loop.inbox
        if isinstance(message, Wake):
            item = inbox.take(self.actor_ref) if inbox.processing.is_set() else None
            if item is not None:
                self.loop.process(*item)
        elif isinstance(message, Ping):
            message.answered.set()

    def release(self) -> None:
        # After a crash or a stop: an event this engine took and will not finish is handed to
        # the engine that runs now. Its own start rang already, but found it held while this
        # one, abandoned by a slow stop (actors/supervisor.py), still lived.
        self.loop.inbox.wake()

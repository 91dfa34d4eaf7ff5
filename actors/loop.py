"""The engine's processing loop: one event at a time, fully processed (S002-01, S002-02).

For each event: apply it to the store, take one snapshot, run every handler against that
snapshot, execute the commands in order, and queue their result events (processed in later
cycles, never within this one). Only then is the event marked processed in the journal and the
next one taken.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import pykka
import structlog

from actors.base import SupervisedActor, tell
from actors.queue import EngineReady, Inbox, Process, Wake
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
    processed: int = 0

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
        self.processed += 1


@dataclass(frozen=True)
class Ping:
    """Are you there? The engine sets ``answered`` when it gets to it: between two events,
    never in the middle of one, so an engine stuck on one event leaves it unset."""

    answered: threading.Event = field(default_factory=threading.Event)


class EngineActor(SupervisedActor):
    def __init__(
        self, loop: EngineLoop, queue: Callable[[], pykka.ActorRef[Any] | None], **base: Any
    ) -> None:
        super().__init__(**base)
        self.loop = loop
        self._queue = queue

    def on_start(self) -> None:
        tell(self._queue(), EngineReady())

    def on_receive(self, message: Any) -> Any:
        if isinstance(message, Process):
            self.loop.process(message.seq, message.event)
            tell(self._queue(), Wake())
        elif isinstance(message, Ping):
            message.answered.set()

"""The state store: a thread-safe holder of the immutable ``EngineState``.

Only the engine writes it (``apply``); anyone reads a snapshot (``get_state``) or subscribes.
Snapshots are immutable models, so a reader never sees a half-applied event. Listeners run on
the engine's thread after each change, outside the lock; a listener that raises is logged and
does not stop the engine.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import structlog

from domain.events import EngineEvent
from domain.models import EngineState
from domain.state import apply_event

Listener = Callable[[EngineState], None]
Unsubscribe = Callable[[], None]

log = structlog.get_logger("cpe.store")


class StateStore:
    def __init__(self) -> None:
        self._state = EngineState()  # the restored state comes with ``set_state``
        self._lock = threading.Lock()
        self._listeners: dict[int, Listener] = {}
        self._next = 0

    def get_state(self) -> EngineState:
        return self._state  # one reference read: atomic, and the model is immutable

    def set_state(self, state: EngineState) -> None:
        with self._lock:
            self._state = state
            listeners = list(self._listeners.values())
        for listener in listeners:
            self._notify(listener, state)

    def apply(self, event: EngineEvent) -> EngineState:
        """Apply ``event`` and return the new snapshot (the engine's one write path)."""
        state = apply_event(self._state, event)
        if state is not self._state:
            self.set_state(state)
        return state

    def subscribe(self, listener: Listener) -> Unsubscribe:
        with self._lock:
            key = self._next
            self._next += 1
            self._listeners[key] = listener

        def unsubscribe() -> None:
            with self._lock:
                self._listeners.pop(key, None)

        return unsubscribe

    @staticmethod
    def _notify(listener: Listener, state: EngineState) -> None:
        try:
            listener(state)
        except Exception:
            log.exception("state listener failed", listener=repr(listener))

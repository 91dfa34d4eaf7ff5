"""The console of ``cpe run`` on a terminal: one line per engine decision, as it happens.

A watcher of the engine (``Engine.watch``): each processed event is put in words by
``domain.narration.narrate`` and printed with the time, like ``cpe demo``'s timeline. The log
lines a person must see besides (warnings, errors) come through the ``human`` log format on
the same stream.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from typing import TextIO

from adapters.support.redaction import redact_value
from domain.events import EngineEvent
from domain.models import EngineState
from domain.narration import Narrator


class Console:
    """``queued``: the engine's events not yet processed (``Engine.queued``), so that a status
    cpe wrote is told with its reason even when a poll saw it first."""

    def __init__(self, out: TextIO, queued: Callable[[], Iterable[EngineEvent]] = tuple):
        self.out = out
        self._lock = threading.Lock()
        self._narrate = Narrator(queued)

    def __call__(self, event: EngineEvent, before: EngineState, after: EngineState) -> None:
        lines = self._narrate(event, before, after)
        if not lines:
            return
        stamp = datetime.now(UTC).strftime("%H:%M:%S")
        text = "".join(f"{stamp}  {redact_value(line)}\n" for line in lines)
        with self._lock:
            try:
                self.out.write(text)
                self.out.flush()
            except (OSError, ValueError):  # a closed terminal must not break the engine
                pass

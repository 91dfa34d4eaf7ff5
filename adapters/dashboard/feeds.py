"""The dashboard's views for the control socket (``adapters.host.control_views.Views``): what the
terminal console reads of a running engine, the same dicts the web dashboard serves (redacted as
they are: ``views.clean``).

The board is built once for a moment of the engine (``Source.moment``: its state and the
decisions told up to it) however many consoles watch it: watches rung by the same change share
the one built first (for up to ``SHARED_FOR`` seconds, so that its ages and times stay fresh)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from adapters.dashboard.pages import item_detail, run_detail
from adapters.dashboard.source import Source
from adapters.dashboard.views import state_view
from domain.models import EngineState, SessionId, WorkItemId

SHARED_FOR = 1.0  # seconds a board built for a moment serves others asking at that moment


class SourceViews:
    """``Views`` over a ``Source``."""

    def __init__(self, source: Source):
        self.source = source
        self._building = threading.Lock()  # one build at a time: the others then share it
        self._last: tuple[EngineState, object, float, dict[str, Any]] | None = None

    def board(self) -> dict[str, Any]:
        with self._building:
            state, decisions = self.source.moment()
            told = decisions[-1] if decisions else None
            last = self._last
            now = time.monotonic()
            if last is not None and last[0] is state and last[1] is told and now < last[2]:
                return last[3]
            view = state_view(self.source)
            self._last = (state, told, time.monotonic() + SHARED_FOR, view)
            return view

    def item(self, item_id: str) -> dict[str, Any] | None:
        item = self.source.state().work_items.get(WorkItemId(item_id))
        return None if item is None else item_detail(self.source, item)

    def run(self, session_id: str) -> dict[str, Any] | None:
        run = self.source.state().agent_runs.get(SessionId(session_id))
        return None if run is None else run_detail(self.source, run)

    def subscribe(self, ring: Callable[[], None]) -> Callable[[], None]:
        return self.source.subscribe(lambda _state: ring())

"""The dashboard's views for the control socket (``adapters.host.control_views.Views``): what the
terminal console reads of a running engine, the same dicts the web dashboard serves (redacted as
they are: ``views.clean``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from adapters.dashboard.pages import item_detail, run_detail
from adapters.dashboard.source import Source
from adapters.dashboard.views import state_view
from domain.models import SessionId, WorkItemId


class SourceViews:
    """``Views`` over a ``Source``."""

    def __init__(self, source: Source):
        self.source = source

    def board(self) -> dict[str, Any]:
        return state_view(self.source)

    def item(self, item_id: str) -> dict[str, Any] | None:
        item = self.source.state().work_items.get(WorkItemId(item_id))
        return None if item is None else item_detail(self.source, item)

    def run(self, session_id: str) -> dict[str, Any] | None:
        run = self.source.state().agent_runs.get(SessionId(session_id))
        return None if run is None else run_detail(self.source, run)

    def subscribe(self, ring: Callable[[], None]) -> Callable[[], None]:
        return self.source.subscribe(lambda _state: ring())

"""A ``Feed`` over an engine in this process (its dashboard ``Source`` and ``Control``): the
views and requests the control socket serves, without the socket. The console's tests use it
until the socket's and the journal's feeds are in; then they run over those."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

from pydantic import ValidationError

from adapters.dashboard.pages import item_detail, run_detail
from adapters.dashboard.source import Source
from adapters.dashboard.views import state_view
from adapters.tui.feed import Refused
from domain.models import SessionId, WorkItemId
from domain.requests import REQUEST_ADAPTER, RequestRefused


class SourceFeed:
    def __init__(self, source: Source):
        self.source = source
        self.closed = threading.Event()

    @property
    def live(self) -> bool:
        return self.source.running

    def board(self) -> dict[str, Any]:
        return state_view(self.source)

    def watch(self) -> Iterator[dict[str, Any]]:
        changed = threading.Event()
        unsubscribe = self.source.subscribe(lambda _: changed.set())
        try:
            while not self.closed.is_set():
                changed.clear()
                yield self.board()
                if not self.source.running:
                    return
                while not changed.wait(0.2):
                    if self.closed.is_set() or not self.source.running:
                        return
        finally:
            unsubscribe()

    def item(self, item_id: str) -> dict[str, Any] | None:
        item = self.source.state().work_items.get(WorkItemId(item_id))
        return item_detail(self.source, item) if item is not None else None

    def run(self, session_id: str) -> dict[str, Any] | None:
        run = self.source.state().agent_runs.get(SessionId(session_id))
        return run_detail(self.source, run) if run is not None else None

    def follow(self, session_id: str) -> Iterator[str]:
        stream = self.source.engine.streams.subscribe(SessionId(session_id))
        if stream is None:
            return
        yield from stream

    def act(self, request: dict[str, Any]) -> str:
        control = self.source.control
        if control is None or not self.source.running:
            raise Refused("read-only", "the engine is not running")
        try:
            return control.handle(REQUEST_ADAPTER.validate_python(request)).message
        except ValidationError as exc:
            raise Refused("invalid", str(exc)) from None
        except RequestRefused as exc:
            raise Refused(exc.kind, str(exc)) from None

    def refresh(self) -> str:
        self.source.engine.refresh(None)
        return "polling now"

    def close(self) -> None:
        self.closed.set()

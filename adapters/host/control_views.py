"""The control socket's views: what the terminal console (``cpe tui``) reads of a running engine.

``{"view": "board"}``, ``{"view": "item", "item": ID}``, ``{"view": "run", "session": S}`` are
answered with one line: ``{"ok": true, "board"|"item"|"run": {...}}`` (the dashboard's dicts:
``state_view``, ``item_detail``, ``run_detail``, redacted as the dashboard's are), or ``{"ok":
false, "kind": "not-found"|"invalid", "error": ...}``. ``{"watch": "board"}`` is answered with
``{"ok": true}``, then a ``{"board": {...}}`` line at once and again after each change of the
engine's state (a burst coalesced: at most one every ``WATCH_GAP`` seconds, or every
``BUILD_SHARE`` times as long as the last view took to build when that is longer; the latest
state each time), ``{"beat": true}`` after ``WATCH_BEAT`` seconds without one (a gone client
is found then), and ``{"end": true}`` when the engine stops.

The views come through ``Views`` (the composition root gives one over the dashboard's ``Source``,
``adapters.dashboard.feeds``): adapters/host does not know the dashboard. The engine's listener
only rings the connection's event; the connection's own thread builds the view and writes it, so
a slow or gone client holds up no one but itself (a write that waits longer than the socket's
timeout ends the connection). The views are reads: no journal entry, no new commit point.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any, Protocol

WATCH_GAP = 0.25  # seconds between two views a watch sends: at most four a second
WATCH_BEAT = 15.0  # seconds without a change before a watch says it is still there
BUILD_SHARE = 2.0  # a watch waits at least this many times as long as its view took to build

Send = Callable[[dict[str, Any]], None]


class Views(Protocol):
    """The engine as the dashboard sees it, as JSON-ready dicts."""

    def board(self) -> dict[str, Any]:
        """The board now (``adapters.dashboard.views.state_view``)."""
        ...

    def item(self, item_id: str) -> dict[str, Any] | None:
        """One work item as ``cpe work show`` gives it; None: no such item."""
        ...

    def run(self, session_id: str) -> dict[str, Any] | None:
        """One agent run, with its output so far; None: no such run."""
        ...

    def subscribe(self, ring: Callable[[], None]) -> Callable[[], None]:
        """``ring()`` at every change (on the engine's thread: it must only ring); the
        function returned stops it."""
        ...


class Watches:
    """The open watches of one control socket: its stop ends them all (``{"end": true}``)."""

    def __init__(self, *, gap: float = WATCH_GAP, beat: float = WATCH_BEAT) -> None:
        self.gap = gap
        self.beat = beat
        self.closing = threading.Event()
        self._lock = threading.Lock()
        self._rings: set[threading.Event] = set()

    def add(self, rung: threading.Event) -> None:
        with self._lock:
            self._rings.add(rung)
        if self.closing.is_set():
            rung.set()

    def remove(self, rung: threading.Event) -> None:
        with self._lock:
            self._rings.discard(rung)

    def close(self) -> None:
        self.closing.set()
        with self._lock:
            rings = list(self._rings)
        for rung in rings:
            rung.set()


def answer_view(views: Views | None, message: dict[str, Any]) -> dict[str, Any]:
    """The one line that answers a ``{"view": ...}`` message."""
    if views is None:
        return _unserved()
    what = message.get("view")
    if what == "board":
        return {"ok": True, "board": views.board()}
    if what == "item":
        item_id = message.get("item")
        if not isinstance(item_id, str) or not item_id:
            return _invalid('a view of an item names it: {"view": "item", "item": ID}')
        item = views.item(item_id)
        if item is None:
            return {"ok": False, "kind": "not-found", "error": f"no work item {item_id}"}
        return {"ok": True, "item": item}
    if what == "run":
        session = message.get("session")
        if not isinstance(session, str) or not session:
            return _invalid('a view of a run names its session: {"view": "run", "session": S}')
        run = views.run(session)
        if run is None:
            return {"ok": False, "kind": "not-found", "error": f"no agent run {session}"}
        return {"ok": True, "run": run}
    return _invalid(f"unknown view {what!r}: expected board, item or run")


def serve_watch(
    views: Views | None,
    message: dict[str, Any],
    send: Send,
    watches: Watches,
) -> None:
    """Answer a ``{"watch": ...}`` message until the engine stops (or the client goes: a
    write raises ``OSError``, left to the caller)."""
    if views is None:
        send(_unserved())
        return
    if message.get("watch") != "board":
        send(_invalid(f"unknown watch {message.get('watch')!r}: expected board"))
        return
    rung = threading.Event()
    unsubscribe = views.subscribe(rung.set)
    watches.add(rung)
    try:
        send({"ok": True})
        while not watches.closing.is_set():
            rung.clear()
            began = time.monotonic()
            board = views.board()
            # a board slow to build (a big one, a busy machine): fewer of them, the engine first
            gap = max(watches.gap, BUILD_SHARE * (time.monotonic() - began))
            send({"board": board})
            sent = time.monotonic()
            while not rung.wait(watches.beat):
                send({"beat": True})
            left = sent + gap - time.monotonic()
            if left > 0 and not watches.closing.is_set():  # the burst's later changes: in one
                watches.closing.wait(left)
        send({"end": True})
    finally:
        watches.remove(rung)
        unsubscribe()


def _unserved() -> dict[str, Any]:
    return _invalid("this engine's control socket serves no views (an older cpe, or a test)")


def _invalid(error: str) -> dict[str, Any]:
    return {"ok": False, "kind": "invalid", "error": error}

"""A stopped engine's ``Feed``: its journal's last state, read-only.

The state is the journal's as ``cpe status`` reads it (``adapters.cli.common.read_journal``):
the events the engine processed, with a person's requests journaled since and the engine's own
starts and stops applied. It is shown through the dashboard's own views over a ``Source`` of a
stopped stand-in for the engine (``Stopped``): no live output, nothing queued but what the
journal holds unprocessed. The recent decisions are the journal's last ``NARRATED`` processed
events told as the engine told them (``domain.narration.Narrator``, through ``Source.tell``), at
the times they were journaled. Every action is refused (``Refused("read-only", ...)``).

A watch gives the board, then again when the journal changes (a ``cpe work`` request journaled
while no engine runs), and ends once an engine answers on the control socket: the console then
opens the running engine's feed (``adapters.tui.connect.open_feed``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from actors.journal import JOURNAL_NAME, Journal
from actors.observer import Watcher
from actors.store import Listener, Unsubscribe
from actors.streams import AgentStream, OutputBuffer
from adapters.dashboard.pages import item_detail, run_detail
from adapters.dashboard.source import DashboardSettings, Source
from adapters.dashboard.views import state_view
from adapters.tui.feed import Refused
from adapters.tui.socket_feed import SocketFeed
from domain.events import ENGINE_LIFE_EVENTS, USER_EVENTS, EngineEvent
from domain.models import EngineState, SessionId, WorkItemId
from domain.state import apply_event

NARRATED = 200  # of the journal's last processed events, told as decisions
LOOK_EVERY = 1.0  # seconds between a watch's looks at the journal (and for an engine)
READ_ONLY = "the engine is not running: this is its journal's last state (start it with cpe run)"

Body = Callable[[WorkItemId], str]


class Stopped:
    """A stopped engine as a ``Source`` sees it (``adapters.dashboard.source.Seen``): its last
    state, the events it left unprocessed, and its tracker's bodies read offline (``body``)."""

    stopped = True
    supervisor = None

    def __init__(self, state: EngineState, queued: tuple[EngineEvent, ...], body: Body | None):
        self._state = state
        self._queued = queued
        self._body = body
        self.inbox = queued
        self.streams = _NoBuffers()

    def get_state(self) -> EngineState:
        return self._state

    def subscribe(self, listener: Listener) -> Unsubscribe:
        return _nothing

    def watch(self, watcher: Watcher) -> Unsubscribe:
        return _nothing

    def queued(self) -> tuple[EngineEvent, ...]:
        return self._queued

    def get_agent_stream(self, session_id: SessionId) -> AgentStream | None:
        return None

    def get_work_item_body(self, work_item_id: WorkItemId) -> str:
        if self._body is None:
            return "(the body is not read while the engine is stopped)"
        return self._body(work_item_id)


class _NoBuffers:
    def buffer(self, session_id: SessionId) -> OutputBuffer | None:
        return None


def _nothing() -> None:
    return None


class JournalFeed:
    """The journal of ``state_dir``, seen as the dashboard would see its engine stopped."""

    live = False

    def __init__(
        self,
        state_dir: Path,
        settings: DashboardSettings,
        *,
        body: Body | None = None,
        title: str = "",
        look_every: float = LOOK_EVERY,
    ):
        self.state_dir = state_dir
        self.settings = settings
        self.body = body
        self.title = title
        self.look_every = look_every
        self._closed = threading.Event()
        self._lock = threading.Lock()
        self._read_at: tuple[int, ...] | None = None
        self._source: Source | None = None

    # ------------------------------------------------------------------ the Feed

    def board(self) -> dict[str, Any]:
        return state_view(self._current())

    def watch(self) -> Iterator[dict[str, Any]]:
        seen = self._stamp()
        yield self.board()
        while not self._closed.wait(self.look_every):
            if self._engine_answers():
                return
            now = self._stamp()
            if now != seen:
                seen = now
                yield self.board()

    def item(self, item_id: str) -> dict[str, Any] | None:
        source = self._current()
        item = source.state().work_items.get(WorkItemId(item_id))
        return None if item is None else item_detail(source, item)

    def run(self, session_id: str) -> dict[str, Any] | None:
        source = self._current()
        run = source.state().agent_runs.get(SessionId(session_id))
        return None if run is None else run_detail(source, run)

    def follow(self, session_id: str) -> Iterator[str]:
        return iter(())  # nothing runs

    def act(self, request: dict[str, Any]) -> str:
        raise Refused("read-only", READ_ONLY)

    def refresh(self) -> str:
        raise Refused("read-only", READ_ONLY)

    def close(self) -> None:
        self._closed.set()

    # ------------------------------------------------------------------ the journal

    def _current(self) -> Source:
        """The source over the journal as it is now (read again once it changed)."""
        stamp = self._stamp()
        with self._lock:
            if self._source is not None and stamp == self._read_at:
                return self._source
        source = self._read()
        with self._lock:
            self._source, self._read_at = source, stamp
        return source

    def _stamp(self) -> tuple[int, ...]:
        """What changes when the journal does: its file's and its write-ahead log's size and
        time."""
        stamp: list[int] = []
        for name in (JOURNAL_NAME, JOURNAL_NAME + "-wal"):
            try:
                seen = (self.state_dir / name).stat()
            except FileNotFoundError:
                stamp += [-1, -1]
            else:
                stamp += [seen.st_size, seen.st_mtime_ns]
        return tuple(stamp)

    def _read(self) -> Source:
        path = self.state_dir / JOURNAL_NAME
        if not path.exists():
            return self._over(EngineState(), (), [])
        journal = Journal(path)
        try:
            processed = journal.processed_seq()
            start = max(0, processed - NARRATED)
            state = journal.replay(until=start)
            told: list[tuple[EngineEvent, EngineState, EngineState, float]] = []
            for entry in journal.entries(after=start, until=processed):
                after = apply_event(state, entry.event)
                told.append((entry.event, state, after, entry.at))
                state = after
            left = list(journal.entries(after=processed))
        finally:
            journal.close()
        for entry in left:  # as cpe status: a person's requests and the engine's own life
            if isinstance(entry.event, (*USER_EVENTS, *ENGINE_LIFE_EVENTS)):
                after = apply_event(state, entry.event)
                told.append((entry.event, state, after, entry.at))
                state = after
        return self._over(state, tuple(entry.event for entry in left), told)

    def _over(
        self,
        state: EngineState,
        queued: tuple[EngineEvent, ...],
        told: list[tuple[EngineEvent, EngineState, EngineState, float]],
    ) -> Source:
        source = Source(
            Stopped(state, queued, self.body), self.settings, self.state_dir, control=None
        )
        source.title = self.title
        for event, before, after, at in told:
            source.tell(event, before, after, at=datetime.fromtimestamp(at, UTC))
        return source

    def _engine_answers(self) -> bool:
        """An engine answers on the control socket (one started since)."""
        if not (self.state_dir / "control.sock").exists():
            return False
        probe = SocketFeed(self.state_dir, connect_timeout=1.0, answer_timeout=5.0)
        try:
            probe.board()
        except Refused:
            return False
        finally:
            probe.close()
        return True

"""What the console's tests share: a real engine (fake provider and runtime, a real journal)
with its real control socket, and the console's feed of it; waiting on the app for a
condition; reading what a screen shows."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from textual.app import App
from textual.pilot import Pilot
from textual.widgets import DataTable, Static

from actors.engine import Engine
from adapters.tui.app import Console
from adapters.tui.connect import open_feed
from adapters.tui.feed import Feed
from tests.actors.conftest import Harness
from tests.adapters.host.serving import SETTINGS, serving

SIZE = (80, 24)  # an SSH terminal's least


@contextlib.contextmanager
def engine_feed(harness: Harness, engine: Engine | None = None) -> Iterator[Feed]:
    """``engine`` (by default a new one of the harness) started with its control socket, and
    the console's feed of it: over the socket (``open_feed``, as ``cpe tui`` opens it)."""
    with serving(harness, engine) as served:
        feed = reopen(served.state_dir)()
        assert feed.live, "the engine's socket did not answer"
        try:
            yield feed
        finally:
            feed.close()


def reopen(state_dir: Path) -> Callable[[], Feed]:
    """How ``cpe tui`` opens the feed again: the running engine's, else the journal's."""
    return lambda: open_feed(state_dir, SETTINGS, title="/srv/repo")


async def until(pilot: Pilot[int], condition: Callable[[], bool], timeout: float = 30) -> None:
    """Let the app run until ``condition`` holds."""
    end = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > end:
            shows = screen_text(pilot.app)
            raise AssertionError(f"the console did not get there in time; it shows:\n{shows}")
        await pilot.pause(0.05)


def rows(app: Console) -> list[list[str]]:
    """The board's table as shown: each row's cells."""
    table = app.board.query_one("#items", DataTable)
    return [[str(cell) for cell in table.get_row_at(n)] for n in range(table.row_count)]


def run_rows(app: Console) -> list[list[str]]:
    """The board's table of runs as shown: each row's cells."""
    table = app.board.query_one("#runlist", DataTable)
    return [[str(cell) for cell in table.get_row_at(n)] for n in range(table.row_count)]


def shown(app: Console, selector: str) -> str:
    """The text of a line (a ``Static``) of the screen on top; empty while it is hidden."""
    widget = app.screen.query_one(selector, Static)
    return "" if widget.has_class("empty") else str(widget.render())


def screen_text(app: App[Any]) -> str:
    """Everything the terminal shows now, as lines of text."""
    return "\n".join(strip.text for strip in app.screen._compositor.render_strips())

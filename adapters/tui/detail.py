"""An item's screen (what ``cpe work show`` says, as ``item_detail``'s sections, and its runs
to open) and a run's (its header, its output with scrollback; a live run's output followed as
it comes).

The feed is read in worker threads (a socket may be slow; the UI thread never waits on it),
and what they read is drawn on the UI thread (``call_from_thread``). An agent's output is
plain text in a ``TextLog``: never markup, its control characters taken out, wrapped.
"""

from __future__ import annotations

import threading
from datetime import UTC, datetime
from typing import Any, ClassVar

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.widgets import DataTable, Footer, Static

from adapters.tui.board import AGE_EVERY, BOARD_CSS, ConsoleScreen, line
from adapters.tui.feed import Feed
from adapters.tui.text import clip, plain, plain_view, run_header
from adapters.tui.textlog import TextLog

BACK = Binding("escape,backspace", "app.pop_screen", "back")


class ItemScreen(ConsoleScreen):
    DEFAULT_CSS = (
        BOARD_CSS
        + """
#sections { height: 1fr; }
#sessions { height: auto; max-height: 7; }
.heading { text-style: bold; }
"""
    )
    BINDINGS: ClassVar[list[BindingType]] = [
        BACK,
        Binding("enter", "open", "open run"),
        Binding("r", "app.retry", "retry"),
        Binding("c", "app.cancel", "cancel"),
        Binding("s", "app.set_status", "status"),
        Binding("j", "move(1)", show=False),
        Binding("k", "move(-1)", show=False),
        Binding("pagedown", "page(1)", show=False, priority=True),
        Binding("pageup", "page(-1)", show=False, priority=True),
    ]

    def __init__(self, item_id: str):
        super().__init__()
        self.item_id = item_id
        self.detail: dict[str, Any] | None = None
        self._reading = threading.Lock()
        self._card: dict[str, Any] | None = None  # the board's card of the item, last seen

    def compose(self) -> ComposeResult:
        yield Static(Text(f"item {self.item_id}: reading…"), id="head")
        yield Static(classes="empty", id="connection")
        yield VerticalScroll(Static(id="body"), id="sections")
        table: DataTable[Text] = DataTable(id="sessions", cursor_type="row", cell_padding=1)
        yield table
        yield Static(classes="empty", id="said")
        yield Footer(compact=True, show_command_palette=False)

    def on_mount(self) -> None:
        table = self.query_one("#sessions", DataTable)
        table.add_column(Text("run"), key="run")
        table.add_column(Text("role"), key="role")
        table.add_column(Text("ended"), key="ended")
        table.focus()
        self.lines_of_app()
        self.load()

    def selected(self) -> str:
        """The item this screen shows (its actions act on it)."""
        return self.item_id

    def show(self, view: dict[str, Any]) -> None:
        """The board changed: the item is read again (once at a time) when its card did."""
        card = next((i for i in view.get("work_items", []) if i["id"] == self.item_id), None)
        if card != self._card:
            self._card = card
            self.load()

    @work(thread=True, group="item", exit_on_error=False)
    def load(self) -> None:
        with self._reading:  # one read after the other: the last drawn is the newest
            feed: Feed = self.app.feed  # type: ignore[attr-defined]
            try:
                detail = plain_view(feed.item(self.item_id))
            except Exception as exc:  # the engine went away meanwhile: the app says so
                detail = {"error": str(exc)}
            self._ui(self._draw, detail)

    def _draw(self, detail: dict[str, Any] | None) -> None:
        head = self.query_one("#head", Static)
        body = self.query_one("#body", Static)
        if detail is None:
            line(head, f"no work item {self.item_id}: the engine does not know it")
            return
        if "error" in detail:
            line(head, f"item {self.item_id}: could not be read: {detail['error']}")
            return
        self.detail = detail
        sections = detail["sections"]
        first = sections[0] if sections else {"heading": detail["title"], "lines": []}
        line(head, clip(first["heading"], max(20, self.size.width)))
        text = Text()
        for n, section in enumerate(sections):
            if n:
                text.append(section["heading"] + "\n", style="bold")
            for row in section["lines"]:
                text.append(plain(row) + "\n")
            text.append("\n")
        body.update(text)
        self._sessions(detail["sessions"])

    def _sessions(self, sessions: list[str]) -> None:
        table = self.query_one("#sessions", DataTable)
        known = _runs_by_session(self.app.view)  # type: ignore[attr-defined]
        cursor = table.cursor_row
        table.clear()
        for session in sessions:
            run = known.get(session, {})
            table.add_row(
                Text(session),
                Text(run.get("role", "")),
                Text(run.get("ending", "")),
                key=session,
            )
        if sessions:
            table.move_cursor(row=min(cursor, len(sessions) - 1))

    def action_move(self, step: int) -> None:
        table = self.query_one("#sessions", DataTable)
        table.action_cursor_down() if step > 0 else table.action_cursor_up()

    def action_page(self, step: int) -> None:
        """PgUp/PgDn scroll the item's detail, whichever part has the focus."""
        sections = self.query_one("#sections", VerticalScroll)
        sections.scroll_page_down() if step > 0 else sections.scroll_page_up()

    def action_open(self) -> None:
        table = self.query_one("#sessions", DataTable)
        if table.row_count:
            row_key, _ = table.coordinate_to_cell_key(table.cursor_coordinate)
            if row_key.value is not None:
                self.app.push_screen(RunScreen(row_key.value))

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        if event.row_key.value is not None:
            self.app.push_screen(RunScreen(event.row_key.value))


def _runs_by_session(view: dict[str, Any] | None) -> dict[str, dict[str, Any]]:
    if view is None:
        return {}
    runs = view.get("runs", {})
    return {run["session_id"]: run for run in [*runs.get("active", []), *runs.get("recent", [])]}


class RunScreen(ConsoleScreen):
    DEFAULT_CSS = BOARD_CSS + "#facts { height: auto; } #output { height: 1fr; }"
    BINDINGS: ClassVar[list[BindingType]] = [
        BACK,
        Binding("j", "scroll(1)", show=False),
        Binding("k", "scroll(-1)", show=False),
    ]

    def __init__(self, session_id: str):
        super().__init__()
        self.session_id = session_id
        self.detail: dict[str, Any] | None = None
        self.following = False
        self.wrote = False  # the live output came: the run's recorded output is not drawn
        self._reading = threading.Lock()
        self.gone = threading.Event()  # the screen was left: the follower stops

    def compose(self) -> ComposeResult:
        yield Static(Text(f"run {self.session_id}: reading…"), id="head")
        yield Static(classes="empty", id="connection")
        yield Static(classes="empty", id="facts")
        yield TextLog(id="output")
        yield Static(classes="empty", id="said")
        yield Footer(compact=True, show_command_palette=False)

    def on_mount(self) -> None:
        self.query_one(TextLog).focus()
        self.lines_of_app()
        self.set_interval(AGE_EVERY, self._facts)
        self.load()

    def on_unmount(self) -> None:
        self.gone.set()

    def show(self, view: dict[str, Any]) -> None:
        """The board changed: a live run not followed now (starting, or its output ended
        before the engine recorded its end) is read again."""
        if self.following or self._reading.locked():
            return
        if self.detail is None or self.detail.get("live"):
            self.load()

    @work(thread=True, group="run", exit_on_error=False)
    def load(self) -> None:
        if not self._reading.acquire(blocking=False):
            return
        try:
            self._load()
        finally:
            self._reading.release()

    def _load(self) -> None:
        feed: Feed = self.app.feed  # type: ignore[attr-defined]
        try:
            detail = plain_view(feed.run(self.session_id))
        except Exception as exc:
            self._ui(self._failed, str(exc))
            return
        self._ui(self._draw, detail, not self.wrote)
        if detail is None or not detail.get("live") or self.gone.is_set():
            return
        self.following = True
        try:
            for chunk in feed.follow(self.session_id):
                if self.gone.is_set():
                    return
                self._ui(self._output, chunk, not self.wrote)
                self.wrote = True
        except Exception as exc:  # the engine went away while the run went on
            self._ui(self._output, f"\n(following stopped: {exc})\n", False)
        finally:
            self.following = False
            self._ui(self._flush)
        if self.gone.is_set():
            return
        try:  # its output ended: its end, once the engine has recorded it
            ended = plain_view(feed.run(self.session_id))
        except Exception:
            return
        self._ui(self._draw, ended, not self.wrote)

    def _failed(self, message: str) -> None:
        line(
            self.query_one("#head", Static), f"run {self.session_id}: could not be read: {message}"
        )

    def _draw(self, detail: dict[str, Any] | None, output: bool) -> None:
        head = self.query_one("#head", Static)
        if detail is None:
            line(head, f"no run {self.session_id}: the engine does not know it")
            return
        self.detail = detail
        self._facts()
        if output:
            text = detail.get("output")
            empty = "nothing yet: the run is starting" if detail.get("live") else "no activity"
            self._output(text if text else f"({empty} was recorded)", True)
            self.query_one(TextLog).flush()

    def _facts(self) -> None:
        """The run's header (a live run's duration as of now: it ticks)."""
        if self.detail is None:
            return
        first, *facts = run_header(self.detail, datetime.now(UTC))
        line(
            self.query_one("#head", Static), first + (" (live)" if self.detail.get("live") else "")
        )
        width = max(20, self.size.width)
        line(self.query_one("#facts", Static), [clip(fact, width) for fact in facts])

    def _flush(self) -> None:
        self.query_one(TextLog).flush()

    def _output(self, text: str, fresh: bool) -> None:
        log = self.query_one(TextLog)
        if fresh:
            log.reset()
        log.feed(text)

    def action_scroll(self, step: int) -> None:
        log = self.query_one(TextLog)
        log.scroll_down() if step > 0 else log.scroll_up()

"""The board, the console's first screen: the work items by status (attempts, cost, revision and
pipeline, place in the merge queue), what holds the work up (pauses, the red default branch,
accounts on hold), the active runs and the last decision; and two screens beside it, the recent
decisions and the model accounts' headroom.

Each screen draws the board's view (``state_view``'s dict) it is given by ``show``; every text
in it is a ``rich.text.Text`` (a title is data, never markup).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.css.query import NoMatches
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Static
from textual.widgets.data_table import RowDoesNotExist

from adapters.tui.text import (
    COLUMNS,
    RUN_COLUMNS,
    RunRow,
    account_lines,
    banner_lines,
    board_rows,
    clip,
    decision_lines,
    headline,
    queue_line,
    run_rows,
    signal_lines,
)
from adapters.tui.textlog import TextLog

# The columns' widths but the title's, which takes the rest of the line (at least TITLE_MIN);
# the revision's is wider from WIDE columns on (its state shown too).
WIDTHS = {"item": 5, "status": 16, "tries": 5, "cost": 7, "revision": 10, "q": 2}
WIDE, REVISION_WIDE = 110, 22
TITLE_MIN = 12
SCROLLBAR = 2  # columns a table's vertical scrollbar takes (Textual's scrollbar-size-vertical)
RUN_WIDTHS = {"run": 24, "role": 11, "item": 8, "state": 11, "time": 6, "cost": 7}
AGE_EVERY = 1.0  # seconds between two redraws of the active runs' ages
RECENT_SHOWN = 40  # decisions under the table, as many as the screen has room for

BOARD_CSS = """
#head { background: $primary; color: $text; text-style: bold; text-wrap: nowrap; }
#banner { color: $warning; text-style: bold; }
#connection { color: $error; text-style: bold; }
#items { height: auto; max-height: 65%; }
#runlist { height: auto; max-height: 8; }
#runs { max-height: 4; }
#accounts { color: $text-muted; max-height: 4; }
#recent { height: 1fr; min-height: 2; color: $text-muted; overflow: hidden hidden; }
#said { text-style: bold; }
.empty { display: none; }
"""
# Each status's colour on the board (none with NO_COLOR: the word says it).
STATUS_STYLES = {
    "in-progress": "cyan",
    "in-review": "blue",
    "needs-refinement": "yellow",
    "approved": "magenta",
    "blocked": "red",
    "done": "green",
}


def line(widget: Static, lines: list[str] | str) -> None:
    """Put ``lines`` (plain text) in ``widget``, hidden while there is nothing to say."""
    text = lines if isinstance(lines, str) else "\n".join(lines)
    widget.update(Text(text))
    widget.set_class(not text, "empty")


class ConsoleScreen(Screen[None]):
    """A screen of the console: its ``#connection`` line (whether the engine runs) and its
    ``#said`` line (the last answer), which the app sets on every screen."""

    def connection(self, text: str) -> None:
        line(self.query_one("#connection", Static), text)

    def said(self, text: str) -> None:
        line(self.query_one("#said", Static), text)

    def _ui(self, function: Callable[..., Any], *args: Any) -> None:
        """From a worker thread: ``function(*args)`` on the UI thread, if this screen is
        still shown then (left meanwhile: nothing to draw; the console gone: nothing)."""

        def guarded() -> None:
            if self.is_attached:
                with contextlib.suppress(NoMatches):  # being taken down meanwhile
                    function(*args)

        with contextlib.suppress(RuntimeError):  # the app is no longer running
            self.app.call_from_thread(guarded)

    def lines_of_app(self) -> None:
        """The connection line as the app has it now (a screen opened after it changed)."""
        self.connection(self.app.connection)  # type: ignore[attr-defined]


class BoardScreen(ConsoleScreen):
    DEFAULT_CSS = BOARD_CSS
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter", "open", "open"),
        Binding("r", "app.retry", "retry"),
        Binding("c", "app.cancel", "cancel"),
        Binding("s", "app.set_status", "status"),
        Binding("p", "app.pause", "pause"),
        Binding("u,P", "app.resume", "resume"),
        Binding("f,R", "app.refresh_engine", "refresh"),
        Binding("d", "decisions", "decisions"),
        Binding("a", "accounts", "accounts", show=False),
        Binding("j", "move(1)", show=False),
        Binding("k", "move(-1)", show=False),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.view: dict[str, Any] | None = None
        self._width = 0
        self._title = TITLE_MIN  # the title column's width
        self._widths = dict(WIDTHS)
        self.ready = False  # mounted: its widgets are there to draw in
        self._run_rows: list[RunRow] = []
        self._drawn: tuple[Any, ...] = ()  # the items' rows last drawn, and the widths

    def compose(self) -> ComposeResult:
        yield Static(Text("cpe: connecting…"), id="head")
        yield Static(classes="empty", id="connection")
        yield Static(classes="empty", id="banner")
        table: DataTable[Text] = DataTable(
            id="items", cursor_type="row", zebra_stripes=False, cell_padding=0
        )
        yield table
        runs: DataTable[Text] = DataTable(id="runlist", cursor_type="row", cell_padding=0)
        yield runs
        yield Static(classes="empty", id="runs")
        yield Static(classes="empty", id="accounts")
        yield Static(id="recent")
        yield Static(classes="empty", id="said")
        yield Footer(compact=True, show_command_palette=False)

    def on_mount(self) -> None:
        self.query_one("#items", DataTable).focus()
        runs = self.query_one("#runlist", DataTable)
        for name in RUN_COLUMNS:
            runs.add_column(Text(name), key=name, width=RUN_WIDTHS[name] + 1)
        self._columns()
        self.ready = True
        self.set_interval(AGE_EVERY, self._tick)
        if self.view is not None:
            self.show(self.view)

    def on_resize(self) -> None:
        if self.size.width != self._width and self.ready:
            self._columns()
            if self.view is not None:
                self.show(self.view)

    def _columns(self) -> None:
        table = self.query_one("#items", DataTable)
        self._width = self.size.width
        self._widths = dict(WIDTHS)
        if self._width >= WIDE:
            self._widths["revision"] = REVISION_WIDE
        fixed = sum(self._widths.values()) + len(self._widths)  # a space after each column
        # the title's column: what is left, less its own space and the scrollbar's room
        title = self._title = max(TITLE_MIN, self._width - fixed - 1 - SCROLLBAR)
        key = self.selected()
        self._drawn = ()
        table.clear(columns=True)
        for name in COLUMNS:
            width = self._widths.get(name, title)
            table.add_column(Text(name), key=name, width=width + 1)
        if key is not None:
            self._select(key)

    def selected(self) -> str | None:
        """The id of the work item under the cursor (of the runs' table: the run's item);
        None when there is none."""
        runs = self.query_one("#runlist", DataTable)
        if runs.has_focus:
            key = _cursor_key(runs)
            row = next((r for r in self._run_rows if r.key == key), None)
            return row.item if row is not None else None
        return _cursor_key(self.query_one("#items", DataTable))

    def _select(self, key: str) -> None:
        table = self.query_one("#items", DataTable)
        with contextlib.suppress(RowDoesNotExist):  # the item is gone: the cursor stays
            table.move_cursor(row=table.get_row_index(key))

    def show(self, view: dict[str, Any]) -> None:
        """Draw the board's view: the cursor stays on the item it was on."""
        self.view = view
        if not self.ready:  # drawn once mounted
            return
        line(self.query_one("#head", Static), clip(headline(view), self.size.width))
        line(self.query_one("#banner", Static), banner_lines(view))
        self._runs()
        line(self.query_one("#accounts", Static), account_lines(view))
        width = max(TITLE_MIN, self.size.width)
        recent = [clip(text, width) for text in decision_lines(view)[:RECENT_SHOWN]]
        heading = Text("recent decisions (d: all)", style="bold")
        self.query_one("#recent", Static).update(Text("\n").join([heading, *map(Text, recent)]))
        compact = self._widths["revision"] < REVISION_WIDE
        rows = board_rows(view, compact=compact)
        drawn = (rows, self._title, tuple(self._widths.values()))
        if drawn == self._drawn:  # the items did not change (a run, a decision did)
            return
        self._drawn = drawn
        table = self.query_one("#items", DataTable)
        key = self.selected()
        title = self._title
        table.clear()
        for row in rows:
            cells = [
                Text(row.item),
                Text(clip(row.title, title)),
                Text(row.status, style=STATUS_STYLES.get(row.status, "")),
                Text(row.attempts),
                Text(row.cost),
                Text(clip(row.revision, self._widths["revision"])),
                Text(row.queue),
            ]
            table.add_row(*cells, key=row.key)
        if key is not None:
            self._select(key)

    def _runs(self, tick: bool = False) -> None:
        """The runs' table (the active runs' ages as of now: they tick), the runs' signals and
        the merge queue; on a ``tick``, only the ages, and only while a run is active."""
        if self.view is None or not self.ready:
            return
        table = self.query_one("#runlist", DataTable)
        rows = run_rows(self.view, datetime.now(UTC))
        if [r.key for r in rows] == [r.key for r in self._run_rows]:
            for row, was in zip(rows, self._run_rows, strict=True):
                for name, cell, old in zip(RUN_COLUMNS, row.cells, was.cells, strict=True):
                    if cell != old:
                        table.update_cell(row.key, name, Text(clip(cell, RUN_WIDTHS[name])))
            self._run_rows = rows
        elif not tick:
            key = _cursor_key(table)
            self._run_rows = rows
            table.clear()
            for row in rows:
                pairs = zip(RUN_COLUMNS, row.cells, strict=True)
                table.add_row(*(Text(clip(c, RUN_WIDTHS[n])) for n, c in pairs), key=row.key)
            table.display = bool(rows)
            if key is not None:
                with contextlib.suppress(RowDoesNotExist):
                    table.move_cursor(row=table.get_row_index(key))
        if tick:
            return
        width = self.size.width
        queue = queue_line(self.view)
        lines = signal_lines(self.view) + ([queue] if queue else [])
        line(self.query_one("#runs", Static), [clip(text, width) for text in lines])

    def _tick(self) -> None:
        if self.view is not None and self.view.get("runs", {}).get("active"):
            self._runs(tick=True)

    def on_descendant_focus(self, event: Any) -> None:
        """The runs' table taking the focus puts its cursor on the newest run (the first)."""
        if getattr(event.widget, "id", None) == "runlist":
            event.widget.move_cursor(row=0)

    def action_move(self, step: int) -> None:
        runs = self.query_one("#runlist", DataTable)
        table = runs if runs.has_focus else self.query_one("#items", DataTable)
        table.action_cursor_down() if step > 0 else table.action_cursor_up()

    def action_open(self) -> None:
        runs = self.query_one("#runlist", DataTable)
        key = _cursor_key(runs) if runs.has_focus else self.selected()
        if key is not None:
            opened = self.app.open_run if runs.has_focus else self.app.open_item  # type: ignore[attr-defined]
            opened(key)

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        key = event.row_key.value
        if key is None:
            return
        if event.data_table.id == "runlist":
            self.app.open_run(key)  # type: ignore[attr-defined]
        else:
            self.app.open_item(key)  # type: ignore[attr-defined]

    def action_decisions(self) -> None:
        self.app.push_screen(
            ListScreen("recent decisions, newest first", decision_lines, "no decision yet")
        )

    def action_accounts(self) -> None:
        self.app.push_screen(
            ListScreen(
                "model accounts' headroom",
                account_lines,
                "no model account has reported its usage yet",
            )
        )


def _cursor_key(table: DataTable[Text]) -> str | None:
    """The key of the row under ``table``'s cursor; None when it has no row."""
    if table.row_count == 0:
        return None
    row_key, _ = table.coordinate_to_cell_key(table.cursor_coordinate)
    return row_key.value


class ListScreen(ConsoleScreen):
    """Lines drawn from the board's view (the recent decisions, the accounts' headroom),
    redrawn as it changes; Esc or Backspace goes back."""

    DEFAULT_CSS = BOARD_CSS + "#lines { height: 1fr; }"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,backspace", "app.pop_screen", "back"),
        Binding("j", "scroll(1)", show=False),
        Binding("k", "scroll(-1)", show=False),
    ]

    def __init__(self, title: str, lines: Any, empty: str):
        super().__init__()
        self.title_text = title
        self.lines = lines
        self.empty = empty

    def compose(self) -> ComposeResult:
        yield Static(Text(self.title_text), id="head")
        yield Static(classes="empty", id="connection")
        yield TextLog(id="lines", auto_scroll=False)
        yield Static(classes="empty", id="said")
        yield Footer(compact=True, show_command_palette=False)

    def on_mount(self) -> None:
        self.query_one(TextLog).focus()
        self.lines_of_app()
        view = self.app.view  # type: ignore[attr-defined]
        if view is not None:
            self.show(view)

    def show(self, view: dict[str, Any]) -> None:
        lines = self.lines(view) or [self.empty]
        log = self.query_one(TextLog)
        if lines == log.text_lines:
            return
        y = log.scroll_y  # where the reader is stays put
        log.reset()
        log.put(lines)
        log.scroll_to(y=y, animate=False)

    def action_scroll(self, step: int) -> None:
        log = self.query_one(TextLog)
        log.scroll_down() if step > 0 else log.scroll_up()

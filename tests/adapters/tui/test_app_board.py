"""The console's board over a real engine (fake provider and runtime, a real journal): the
items by status with attempts, an active run, a pause's banner, a title that is data (never
markup) cut to the width, and quitting with q or Ctrl-C, at 80x24."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest
from textual.widgets import DataTable

from adapters.tui.app import Console
from adapters.tui.board import ListScreen
from adapters.tui.detail import RunScreen
from adapters.tui.textlog import TextLog
from tests.actors.conftest import Harness
from tests.adapters.tui.console import (
    SIZE,
    engine_feed,
    rows,
    run_rows,
    screen_text,
    shown,
    until,
)


@pytest.fixture
def harness(tmp_path: Path) -> Iterator[Harness]:
    made = Harness(tmp_path)
    yield made
    made.close()


def test_the_board_lists_the_items_by_status_and_q_quits(harness: Harness) -> None:
    harness.tracker.add_item("1", "done", title="Farewell")
    harness.tracker.add_item("2", "pending", title="Greeting [b]bold[/b] " + "x" * 80)
    with engine_feed(harness) as feed:
        app = Console(feed)
        asyncio.run(board(harness, app))
        assert app.return_code == 0


async def board(harness: Harness, app: Console) -> None:
    if True:
        async with app.run_test(size=SIZE) as pilot:
            [run] = await asyncio.to_thread(harness.runtime.wait_runs, 1)
            await until(pilot, lambda: len(rows(app)) == 2 and rows(app)[0][2] == "in-progress")
            greeting, farewell = rows(app)
            assert [greeting[0], *greeting[2:4]] == ["#2", "in-progress", "1/3"]
            assert greeting[1].startswith("Greeting [b]bold[/b] xxx")  # as written: data
            assert greeting[1].endswith("…")
            assert farewell[:4] == ["#1", "Farewell", "done", "0/3"]
            await until(pilot, lambda: len(run_rows(app)) == 1)
            assert run_rows(app)[0][:4] == [run.session_id, "implementor", "#2", "running"]
            # its age ticks while no view comes (nothing changes in the engine)
            age = run_rows(app)[0][4]
            await until(pilot, lambda: run_rows(app)[0][4] != age)
            await pilot.press("d")  # every recent decision, wrapped to the width
            assert isinstance(app.screen, ListScreen)
            decisions = app.screen.query_one(TextLog).text_lines
            assert any("implementor dispatched" in text for text in decisions)
            assert all(len(line) <= SIZE[0] for line in screen_text(app).splitlines())
            await pilot.press("escape")
            await pilot.press("tab", "enter")  # the runs' table, its run
            assert isinstance(app.screen, RunScreen)
            assert app.screen.session_id == run.session_id
            await pilot.press("escape")
            assert "engine running" in shown(app, "#head")
            text = screen_text(app)
            assert "Greeting [b]bold[/b]" in text
            assert all(len(line) <= 80 for line in text.splitlines())
            await pilot.press("q")


def test_ctrl_c_quits(harness: Harness) -> None:
    async def quit_(app: Console) -> None:
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: "engine running" in shown(app, "#head"))
            await pilot.press("ctrl+c")

    with engine_feed(harness) as feed:
        app = Console(feed)
        asyncio.run(quit_(app))
        assert app.return_code == 0


def test_many_items_scroll_down_but_never_sideways(harness: Harness) -> None:
    for n in range(1, 61):
        harness.tracker.add_item(str(n), "done", title=f"Item {n} " + "words " * 20)

    async def scenario(app: Console) -> None:
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: len(rows(app)) == 60)
            await pilot.pause()
            table = app.board.query_one("#items", DataTable)
            assert table.virtual_size.height > table.scrollable_content_region.height
            assert table.virtual_size.width <= table.scrollable_content_region.width
            assert rows(app)[0][-1] == ""  # the merge queue's column is on screen, empty
            assert "q" in screen_text(app).splitlines()[1].split()  # its heading too
            await pilot.press("q")

    with engine_feed(harness) as feed:
        asyncio.run(scenario(Console(feed)))


EVIL = "Evil \x1b]0;PWNED\x07 \x1b[2J\x1b[31mred\x1b[0m tab\there\rCR \x9b31m [b]x[/b]"
CONTROLS = {chr(c) for c in [*range(32), *range(0x7F, 0xA0)]} - {"\n"}


def drawn(app: Console) -> str:
    """Every character the screen on top sends to the terminal, its segments' text."""
    strips = app.screen._compositor.render_strips()
    return "".join(segment.text for strip in strips for segment in strip)


def test_a_title_never_drives_the_terminal(harness: Harness) -> None:
    harness.tracker.add_item("3", "done", title=EVIL)  # as a stranger's issue would arrive

    async def scenario(app: Console) -> None:
        async with app.run_test(size=(120, 30)) as pilot:
            await until(pilot, lambda: len(rows(app)) == 1)
            assert rows(app)[0][1].startswith("Evil ]0;PWNED [2J[31mred[0m tab here")
            assert "[b]x[/b]" in rows(app)[0][1]  # markup shown as written
            assert not CONTROLS & set(drawn(app))
            await pilot.press("r")  # the question quotes the title
            assert not CONTROLS & set(drawn(app))
            await pilot.press("y")  # refused: done; the refusal may quote it too
            await until(pilot, lambda: app.said.startswith("refused"))
            assert not CONTROLS & set(app.said)
            await pilot.press("enter")  # the item's screen: its title, its history
            await until(pilot, lambda: "Evil" in shown(app, "#head"))
            assert not CONTROLS & set(drawn(app))
            await pilot.press("escape", "d")  # the decisions name it
            assert not CONTROLS & set(drawn(app))
            await pilot.press("escape", "q")

    with engine_feed(harness) as feed:
        asyncio.run(scenario(Console(feed)))

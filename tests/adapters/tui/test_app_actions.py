"""The console's item and run screens and its actions over a real engine: an item's detail
and runs, a run's output followed as it comes, a retry refused (the refusal shown), a cancel
taken once confirmed, nothing done when not confirmed, a status set from a choice, dispatch
paused with a reason and resumed."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest
from textual.containers import Vertical

from adapters.tui.app import Console
from adapters.tui.detail import ItemScreen, RunScreen
from adapters.tui.modals import Choose, Confirm, Reason
from adapters.tui.textlog import TextLog
from tests.actors.conftest import Harness
from tests.adapters.dashboard.test_dashboard_activity import record
from tests.adapters.tui.console import (
    SIZE,
    engine_feed,
    rows,
    run_rows,
    screen_text,
    shown,
    until,
)
from tests.support.transcripts import assistant, text


@pytest.fixture
def harness(tmp_path: Path) -> Iterator[Harness]:
    made = Harness(tmp_path)
    made.tracker.add_item("1", "pending", title="Greeting")
    made.tracker.add_item("2", "done", title="Farewell")
    yield made
    made.close()


def status_of(app: Console, item_id: str) -> str:
    return next((row[2] for row in rows(app) if row[0] == f"#{item_id}"), "")


def test_an_item_opens_with_its_runs_and_a_run_follows_its_output(harness: Harness) -> None:
    async def scenario(app: Console) -> None:
        async with app.run_test(size=SIZE) as pilot:
            [run] = await asyncio.to_thread(harness.runtime.wait_runs, 1)
            await until(pilot, lambda: status_of(app, "1") == "in-progress")
            files = record(harness, run.session_id)  # its transcript, as its runtime writes it
            files.record_native(assistant(text("Reading the work item [red]now[/red].")))
            await pilot.press("enter")  # the cursor is on #1, the first row
            assert isinstance(app.screen, ItemScreen)
            await until(pilot, lambda: "Greeting" in shown(app, "#head"))
            await until(pilot, lambda: run.session_id in screen_text(app))
            await pilot.press("enter")  # its one run
            assert isinstance(app.screen, RunScreen)
            output = app.screen.query_one(TextLog)
            said = "assistant: Reading the work item [red]now[/red]."  # as written: data
            await until(pilot, lambda: said in output.text_lines)
            files.record_native(assistant(text("Writing greet() " + "and its test " * 8)))
            await until(pilot, lambda: any("Writing greet()" in t for t in output.text_lines))
            await until(pilot, lambda: screen_text(app).count("and its test") == 8)  # wrapped
            assert said in screen_text(app)
            assert all(len(line) <= SIZE[0] for line in screen_text(app).splitlines())
            assert "(live)" in shown(app, "#head")
            facts = shown(app, "#facts")  # its duration ticks while nothing else changes
            await until(pilot, lambda: shown(app, "#facts") != facts)
            files.finish("completed", 0)
            run.complete()
            await until(pilot, lambda: "(live)" not in shown(app, "#head"))
            assert said in output.text_lines
            await pilot.press("escape")
            assert isinstance(app.screen, ItemScreen)
            await pilot.press("backspace")
            assert app.screen is app.board
            await pilot.press("q")

    with engine_feed(harness) as feed:
        asyncio.run(scenario(Console(feed)))


def test_a_refused_retry_says_why_and_a_confirmed_cancel_is_taken(harness: Harness) -> None:
    async def scenario(app: Console) -> None:
        async with app.run_test(size=SIZE) as pilot:
            await asyncio.to_thread(harness.runtime.wait_runs, 1)
            await until(pilot, lambda: status_of(app, "1") == "in-progress")
            await pilot.press("down")  # #2, done
            await pilot.press("r")
            assert isinstance(app.screen, Confirm)
            assert "Retry #2 Farewell?" in shown(app, "#question")
            dialog = app.screen.query_one(Vertical).region  # centred, framed, the board around
            assert dialog.x > 0
            assert dialog.right < SIZE[0]
            assert 0 < dialog.y < SIZE[1] // 2
            await pilot.press("y")
            await until(pilot, lambda: app.said.startswith("refused"))
            assert "done" in app.said
            assert app.said in shown(app, "#said")
            await pilot.press("up", "c")  # #1's run
            await pilot.press("n")
            assert app.said == "nothing done"
            assert status_of(app, "1") == "in-progress"
            await pilot.press("c", "enter")
            await until(pilot, lambda: status_of(app, "1") == "blocked")
            assert not app.said.startswith("refused")

            await pilot.press("r", "y")  # #1 again, out of blocked: a new run, listed first
            [_, again] = await asyncio.to_thread(harness.runtime.wait_runs, 2)
            await until(pilot, lambda: [r[0] for r in run_rows(app)][:1] == [again.session_id])
            await pilot.press("tab", "enter")  # the runs' table: its newest run opens
            assert isinstance(app.screen, RunScreen)
            assert app.screen.session_id == again.session_id
            await pilot.press("escape", "q")

    with engine_feed(harness) as feed:
        asyncio.run(scenario(Console(feed)))


def test_a_status_set_from_a_choice_and_a_pause_with_its_reason(harness: Harness) -> None:
    async def scenario(app: Console) -> None:
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: len(rows(app)) == 2)
            await pilot.press("down", "s")  # #2, done
            assert isinstance(app.screen, Choose)
            await pilot.press("k", "enter")  # blocked, just above done
            assert isinstance(app.screen, Confirm)
            assert "to blocked?" in shown(app, "#question")
            await pilot.press("y")
            await until(pilot, lambda: status_of(app, "2") == "blocked")
            await pilot.press("p")
            assert isinstance(app.screen, Reason)
            await pilot.press(*"deploy [b]freeze[/b]", "enter", "enter")
            await until(pilot, lambda: "deploy [b]freeze[/b]" in shown(app, "#banner"))
            await pilot.press("u", "y")
            await until(pilot, lambda: shown(app, "#banner") == "")
            await pilot.press("q")

    with engine_feed(harness) as feed:
        asyncio.run(scenario(Console(feed)))

"""The console when its engine stops and another starts (a real engine, its real control
socket, its journal): it says the engine stopped and when, keeps showing the last state
read-only (an action says the engine is not running), and once an engine answers again says
"reconnected" and is live (an action is taken); an engine holding the state without answering
on its socket yet is said to be starting."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from adapters.cli.tui import starting
from adapters.tui.app import CONNECTED, NOT_RUNNING, READ_ONLY, Console
from adapters.tui.detail import ItemScreen
from tests.actors.conftest import Harness
from tests.adapters.host.serving import serving
from tests.adapters.tui.console import SIZE, reopen, rows, shown, until


@pytest.fixture
def harness(tmp_path: Path) -> Iterator[Harness]:
    made = Harness(tmp_path)
    made.tracker.add_item("1", "done", title="Greeting")
    yield made
    made.close()


def test_the_console_says_the_engine_stopped_and_reconnects_to_the_next(harness: Harness) -> None:
    first = harness.engine()

    async def scenario(app: Console, stack: contextlib.ExitStack) -> None:
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: "engine running" in shown(app, "#head"))
            assert rows(app)[0][:3] == ["#1", "Greeting", "done"]
            assert shown(app, "#connection") == ""

            def stop() -> None:  # as cpe run stops: its socket, then the engine
                stack.close()
                first.stop(reason="stopped by the test")

            await asyncio.to_thread(stop)
            await until(pilot, lambda: "engine stopped at" in shown(app, "#connection"))
            assert "showing its last state; reconnecting…" in shown(app, "#connection")
            assert rows(app)[0][:3] == ["#1", "Greeting", "done"]  # the last state
            assert not app.feed.live
            await pilot.press("p")  # a pause, asked of no engine: refused at once
            assert app.said == READ_ONLY
            assert app.screen is app.board  # no dialog asked first
            await pilot.press("enter")  # the item's screen says the engine stopped too
            assert isinstance(app.screen, ItemScreen)
            assert "engine stopped at" in shown(app, "#connection")
            await pilot.press("escape")

            second = harness.engine()
            await asyncio.to_thread(stack.enter_context, serving(harness, second))
            await until(pilot, lambda: app.said == "reconnected")
            assert shown(app, "#connection") == ""
            assert app.feed.live
            await pilot.press("p", *"back soon", "enter", "y")
            await until(pilot, lambda: "back soon" in shown(app, "#banner"))
            await pilot.press("q")

    with contextlib.ExitStack() as stack:
        stack.enter_context(serving(harness, first))
        app = Console(reopen(harness.tmp_path)(), reopen(harness.tmp_path))
        asyncio.run(scenario(app, stack))
    assert app.return_code == 0


def test_a_stopped_engine_shows_its_last_state_read_only_until_one_runs(
    harness: Harness,
) -> None:
    with serving(harness):
        pass  # an engine ran, and stopped (its journal holds the items)
    harness.engines[0].stop(reason="stopped by the test")

    async def scenario(app: Console, stack: contextlib.ExitStack) -> None:
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: len(rows(app)) == 1)
            assert shown(app, "#connection") == NOT_RUNNING
            assert "engine stopped" in shown(app, "#head")
            await pilot.press("r")
            assert app.said == READ_ONLY

            await asyncio.to_thread(stack.enter_context, serving(harness))
            await until(pilot, lambda: app.said == CONNECTED)
            assert shown(app, "#connection") == ""
            assert "engine running" in shown(app, "#head")
            await pilot.press("q")

    feed = reopen(harness.tmp_path)()
    assert not feed.live
    with contextlib.ExitStack() as stack:
        asyncio.run(scenario(Console(feed, reopen(harness.tmp_path)), stack))


def test_an_engine_that_holds_the_state_without_answering_is_said_to_be_starting(
    harness: Harness,
) -> None:
    engine = harness.engine()
    engine.start()  # it holds the journal's lock; no control socket answers for it

    async def scenario(app: Console) -> None:
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: "does not answer yet" in shown(app, "#connection"))
            assert "an engine (pid " in shown(app, "#connection")
            assert "its last state meanwhile, read-only" in shown(app, "#connection")
            await pilot.press("q")

    opener = reopen(harness.tmp_path)
    feed = opener()
    assert not feed.live
    asyncio.run(scenario(Console(feed, opener, starting=lambda: starting(harness.tmp_path))))

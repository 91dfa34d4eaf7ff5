"""The console's log of a run's output (``TextLog``): lines written as they come, a partial
line held until whole, long lines wrapped, markup shown as written; it follows what comes while
the reader is at its end, stays where a reader who scrolled back is, and follows again at End."""

from __future__ import annotations

import asyncio

from textual.app import App, ComposeResult
from textual.pilot import Pilot

from adapters.tui.textlog import TextLog


class Logged(App[None]):
    def compose(self) -> ComposeResult:
        yield TextLog(id="log")


def lines(n: int, start: int = 0) -> str:
    return "".join(f"line {i}\n" for i in range(start, start + n))


async def settled(pilot: Pilot[None]) -> None:
    await pilot.pause()
    await pilot.pause()


def test_the_log_follows_until_the_reader_scrolls_back_and_again_at_end() -> None:
    async def scenario() -> None:
        app = Logged()
        async with app.run_test(size=(40, 10)) as pilot:
            log = app.query_one(TextLog)
            log.focus()
            log.feed("a [b]partial[/b] ")
            assert log.text_lines == []  # held until its line ends
            log.feed("line, " + "long " * 12 + "\n" + lines(30))
            await settled(pilot)
            assert log.text_lines[0].startswith("a [b]partial[/b] line, long")
            assert log.is_vertical_scroll_end
            assert len(log.lines) > len(log.text_lines)  # the long line wrapped at 40

            await pilot.press("pageup", "pageup")
            await settled(pilot)
            where = log.scroll_y
            assert not log.pinned
            log.feed(lines(20, 30))  # more comes: the reader stays where they are
            await settled(pilot)
            assert log.scroll_y == where

            await pilot.press("end")
            await settled(pilot)
            assert log.pinned
            log.feed(lines(20, 50))
            await settled(pilot)
            assert log.is_vertical_scroll_end
            assert log.text_lines[-1] == "line 69"

            log.reset()
            log.feed(lines(30))
            await settled(pilot)
            assert log.is_vertical_scroll_end

    asyncio.run(scenario())

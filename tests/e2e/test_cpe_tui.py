"""`cpe tui` against a real `cpe run` (the local provider, the scripted model): the console
headless (Textual's pilot) through the engine's control socket, as `cpe tui` opens it: the
board shows the finished item, a retry of it is refused and says why, a pause is taken and
shown, the engine stopped -> the console says so and keeps the last state, started again ->
"reconnected". And once through tmux, a real terminal of 100x30 with NO_COLOR and TERM=xterm,
read as a person sees it (`tmux capture-pane`): the board, the help, a refusal, q quits with 0.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import shlex
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from adapters.cli.repository import resolve_config
from adapters.cli.tui import feed_opener
from adapters.scripted_model import Match, ScriptedModelServer, load_scenario
from adapters.tui.app import Console
from tests.adapters.tui.console import SIZE, rows, shown, until
from tests.adapters.tui.terminal import Tmux, colours
from tests.e2e.running import CPE, add_work_item, make_cpe_repo, start_cpe, wait_for, work_items


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    path = make_cpe_repo(tmp_path / "repo")
    add_work_item(path, "Greeting [b]bold[/b]", "Add greet(name) with a test.")
    return path


@contextlib.contextmanager
def finished(
    repo: Path, home: Path, processes: list[subprocess.Popen[str]]
) -> Iterator[tuple[subprocess.Popen[str], ScriptedModelServer]]:
    """`cpe run` on ``repo`` with a scripted model that implements and approves, once its
    item is done; its log in ``home / "cpe.log"``."""
    book = [load_scenario("implement"), load_scenario("approve", match=Match(role="reviewer"))]
    with (home / "cpe.log").open("a") as log, ScriptedModelServer(book) as model:
        engine = start_cpe(repo, home, log, model.client_env())
        processes.append(engine)
        assert wait_for(lambda: [i.status for i in work_items(repo)] == ["done"]), (
            "the item did not finish: " + (home / "cpe.log").read_text()[-3000:]
        )
        yield engine, model


def test_the_console_on_a_real_engine_refuses_takes_and_reconnects(
    repo: Path, tmp_path: Path, processes: list[subprocess.Popen[str]]
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    config, root = resolve_config(None, repo)
    opener = feed_opener(config, root)
    with finished(repo, home, processes) as (engine, model):
        assert wait_for(lambda: _live(opener)), "the engine's control socket never answered"

        async def scenario(app: Console) -> None:
            async with app.run_test(size=SIZE) as pilot:
                await until(pilot, lambda: "engine running" in shown(app, "#head"))
                await until(pilot, lambda: rows(app)[0][2:4] == ["done", "1/3"])
                assert rows(app)[0][:2] == ["#1", "Greeting [b]bold[/b]"]

                await pilot.press("r", "y")  # a retry of a done item
                await until(pilot, lambda: app.said.startswith("refused"))
                assert "done" in app.said
                await pilot.press("p", *"e2e pause", "enter", "enter")  # a pause, taken
                await until(pilot, lambda: "e2e pause" in shown(app, "#banner"))
                await pilot.press("u", "y")
                await until(pilot, lambda: shown(app, "#banner") == "")

                engine.send_signal(signal.SIGTERM)
                assert await asyncio.to_thread(engine.wait, 120) == 0
                await until(pilot, lambda: "engine stopped at" in shown(app, "#connection"))
                assert rows(app)[0][:3] == ["#1", "Greeting [b]bold[/b]", "done"]
                await pilot.press("r")  # refused at once: no engine to ask
                assert "the engine is not running" in app.said

                with (home / "cpe.log").open("a") as log:
                    again = start_cpe(repo, home, log, model.client_env())
                processes.append(again)
                await until(pilot, lambda: app.said == "reconnected", timeout=120)
                assert "engine running" in shown(app, "#head")
                await pilot.press("q")
                again.send_signal(signal.SIGTERM)
                assert await asyncio.to_thread(again.wait, 120) == 0

        app = Console(opener(), opener)
        asyncio.run(scenario(app))
        assert app.return_code == 0


def _live(opener: object) -> bool:
    feed = opener()  # type: ignore[operator]
    try:
        return bool(feed.live)
    finally:
        feed.close()


def test_cpe_tui_in_a_real_terminal_as_a_person_sees_it(
    repo: Path, tmp_path: Path, processes: list[subprocess.Popen[str]]
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    code, stty = tmp_path / "tui.code", tmp_path / "stty.txt"
    command = (
        f"cd {shlex.quote(str(home))} && env -i PATH={shlex.quote(os.environ['PATH'])} "
        f"HOME={shlex.quote(str(home))} LANG=C.UTF-8 NO_COLOR=1 TERM=xterm "
        f"{shlex.quote(str(CPE))} tui --repo {shlex.quote(str(repo))}; "
        f"echo $? > {shlex.quote(str(code))}; stty -a > {shlex.quote(str(stty))}"
    )
    with finished(repo, home, processes) as (engine, _):
        with contextlib.closing(Tmux((100, 30))) as tmux:
            tmux.start(command)
            assert tmux.shows("engine running"), tmux.screen()
            assert tmux.shows("Greeting [b]bold[/b]"), tmux.screen()
            screen = tmux.screen()
            assert re.search(r"#1 +Greeting \[b\]bold\[/b\] +done +1/3", screen), screen
            assert "q quit" in screen
            assert "? help" in screen
            assert colours(tmux.screen(escapes=True)) == set()  # NO_COLOR: greys at most
            tmux.keys("?")
            assert tmux.shows("retry the item (run its implementor now)"), tmux.screen()
            tmux.keys("Escape")
            assert wait_for(lambda: "run its implementor now" not in tmux.screen()), tmux.screen()
            tmux.keys("r")
            assert tmux.shows("Retry #1 Greeting [b]bold[/b]?"), tmux.screen()
            tmux.keys("y")
            assert tmux.shows("refused"), tmux.screen()
            tmux.keys("q")
            assert ended(code, stty, tmux) == "0"
        code.unlink()
        with contextlib.closing(Tmux((80, 24))) as tmux:  # and Ctrl-C, at 80x24
            tmux.start(command)
            assert tmux.shows("Greeting [b]bold[/b]"), tmux.screen()
            tmux.keys("C-c")
            assert ended(code, stty, tmux) == "0"
        engine.send_signal(signal.SIGTERM)
        assert engine.wait(120) == 0


def ended(code: Path, stty: Path, tmux: Tmux) -> str:
    """How the console ended (its exit code), once its window has gone; the terminal given
    back as it was (canonical mode and echo: a shell reads lines again)."""
    assert wait_for(lambda: stty.exists() and not tmux.alive()), tmux.screen()
    modes = stty.read_text().split()
    assert "icanon" in modes, modes
    assert "echo" in modes, modes
    return code.read_text().strip()

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
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from adapters.cli.repository import resolve_config
from adapters.cli.tui import feed_opener
from adapters.scripted_model import Match, ScriptedModelServer, load_scenario
from adapters.tui.app import Console
from tests.adapters.tui.console import SIZE, rows, shown, until
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


# SGR codes of a hue (red … cyan, in the foreground or the background, normal or bright), and
# the extended colour forms (38;5;N, 38;2;R;G;B and the background's 48;…): a NO_COLOR screen
# has none (black, white and greys, bold and reverse are not colours).
HUES = {*range(31, 37), *range(41, 47), *range(91, 97), *range(101, 107), 38, 48}


def colours(escaped: str) -> set[int]:
    """The hue codes among the SGR sequences of a captured screen."""
    codes = set()
    for params in re.findall(r"\x1b\[([0-9;]*)m", escaped):
        codes |= {int(p) for p in params.split(";") if p} & HUES
    return codes


class Tmux:
    """A tmux server of its own (``-L``: a parallel run does not share it) with one window."""

    def __init__(self, size: tuple[int, int]):
        self.socket = f"cpe-tui-{uuid.uuid4().hex[:12]}"
        self.size = size

    def tmux(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["tmux", "-L", self.socket, "-f", "/dev/null", *args],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )

    def start(self, command: str) -> None:
        cols, lines = self.size
        started = self.tmux(
            "new-session", "-d", "-s", "tui", "-x", str(cols), "-y", str(lines), command
        )
        assert started.returncode == 0, started.stderr

    def screen(self, *, escapes: bool = False) -> str:
        return self.tmux("capture-pane", "-p", *(["-e"] if escapes else []), "-t", "tui").stdout

    def shows(self, text: str, timeout: float = 60) -> bool:
        return wait_for(lambda: text in self.screen(), timeout)

    def keys(self, *keys: str) -> None:
        assert self.tmux("send-keys", "-t", "tui", *keys).returncode == 0

    def alive(self) -> bool:
        return self.tmux("has-session", "-t", "tui").returncode == 0

    def close(self) -> None:
        self.tmux("kill-server")


def test_cpe_tui_in_a_real_terminal_as_a_person_sees_it(
    repo: Path, tmp_path: Path, processes: list[subprocess.Popen[str]]
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    code = tmp_path / "tui.code"
    command = (
        f"cd {shlex.quote(str(home))} && env -i PATH={shlex.quote(os.environ['PATH'])} "
        f"HOME={shlex.quote(str(home))} LANG=C.UTF-8 NO_COLOR=1 TERM=xterm "
        f"{shlex.quote(str(CPE))} tui --repo {shlex.quote(str(repo))}; "
        f"echo $? > {shlex.quote(str(code))}"
    )
    tmux = Tmux((100, 30))
    with finished(repo, home, processes) as (engine, _), contextlib.closing(tmux):
        tmux.start(command)
        assert tmux.shows("engine running"), tmux.screen()
        assert tmux.shows("Greeting [b]bold[/b]"), tmux.screen()
        screen = tmux.screen()
        assert re.search(r"#1 +Greeting \[b\]bold\[/b\] +done +1/3", screen), screen
        assert "q quit" in screen
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
        assert wait_for(lambda: code.exists() and code.read_text().strip() == "0"), (
            code.read_text() if code.exists() else tmux.screen()
        )
        assert wait_for(lambda: not tmux.alive())
        engine.send_signal(signal.SIGTERM)
        assert engine.wait(120) == 0

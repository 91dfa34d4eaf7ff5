"""The console's feeds against a real `cpe run` (the local provider, the scripted model, the
dashboard off: the control socket serves the views all the same): the board watched through
the socket, its end said when the engine stops, a watch ended by a killed engine, and the
journal's last state read after, its decisions told."""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path

import pytest

from adapters.scripted_model import Match, ScriptedModelServer, load_scenario
from adapters.tui.connect import open_feed
from adapters.tui.journal_feed import JournalFeed
from adapters.tui.socket_feed import SocketFeed
from tests.adapters.host.serving import SETTINGS, Line
from tests.e2e.running import add_work_item, make_cpe_repo, start_cpe, wait_for


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    path = make_cpe_repo(tmp_path / "repo")
    config = path / "supervisor.toml"
    config.write_text(config.read_text().replace('listen = "127.0.0.1:0"', 'listen = ""'))
    add_work_item(path, "Greeting", "Add greet(name) with a test.")
    return path


def _live(state_dir: Path) -> SocketFeed:
    """The running engine's feed, once its socket answers (it starts after the engine)."""
    found: list[SocketFeed] = []

    def answers() -> bool:
        feed = open_feed(state_dir, SETTINGS)
        if isinstance(feed, SocketFeed):
            found.append(feed)
            return True
        feed.close()
        return False

    assert wait_for(answers), "the engine's control socket never answered"
    return found[0]


def test_a_watch_ends_when_cpe_stops_and_when_it_is_killed_then_the_journal_shows(
    repo: Path, tmp_path: Path, processes: list[subprocess.Popen[str]]
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    state_dir = repo / ".cpe"
    hang = load_scenario("hang", match=Match(role="implementor"))
    with (home / "cpe.log").open("a") as log, ScriptedModelServer([hang]) as model:
        engine = start_cpe(repo, home, log, model.client_env())
        processes.append(engine)
        feed = _live(state_dir)
        assert model.wait_until(lambda s: s.hanging >= 1, timeout=120), "no implementor ran"
        line = Line(state_dir)
        line.ask({"watch": "board"})
        assert line.reply() == {"ok": True}
        assert line.reply()["board"]["engine"] == "running"
        engine.send_signal(signal.SIGTERM)
        while "end" not in (reply := line.reply()):
            assert "board" in reply or "beat" in reply, reply
        assert line.at_end()
        line.close()
        assert engine.wait(120) == 0
        feed.close()

        again = start_cpe(repo, home, log, model.client_env())
        processes.append(again)
        feed = _live(state_dir)
        watch = feed.watch()
        assert next(watch)["engine"] == "running"
        assert wait_for(lambda: bool(feed.board()["runs"]["active"])), "no run again"
        again.kill()
        again.wait(60)
        assert all("work_items" in board for board in watch)  # then it ends
        feed.close()

    offline = open_feed(state_dir, SETTINGS)
    assert isinstance(offline, JournalFeed)
    board = offline.board()
    assert board["engine"] == "stopped"
    assert [i["title"] for i in board["work_items"]] == ["Greeting"]
    texts = [d["text"] for d in board["decisions"]]
    assert any("implementor dispatched" in text for text in texts), texts

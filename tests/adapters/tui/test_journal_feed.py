"""The console's feed of a stopped engine (``JournalFeed``), from a real engine's journal: the
last state through the dashboard's views, with the recent decisions told from the journal at
the times they were journaled, a person's request journaled since shown, every action refused
(read-only); and ``open_feed`` choosing the running engine's socket or the journal."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import pytest

from actors.engine import Engine
from adapters.cli.settings import parse_config
from adapters.host.control import SOCKET_NAME, ControlSettings, accept_offline
from adapters.tui.connect import open_feed
from adapters.tui.feed import Feed, Refused
from adapters.tui.journal_feed import JournalFeed
from adapters.tui.socket_feed import SocketFeed
from domain.models import SessionId, WorkItemId
from domain.requests import Pause
from tests.actors.conftest import Harness, wait_until
from tests.adapters.host.serving import SETTINGS, serving


@pytest.fixture
def harness(tmp_path: Path) -> Iterator[Harness]:
    made = Harness(tmp_path)
    yield made
    made.close()


@pytest.fixture
def stopped(harness: Harness) -> Path:
    """A journal an engine left: #1's run completed (its revision made), #2 pending behind
    it, then the engine stopped."""
    harness.tracker.add_item("1", "pending", title="Greeting")
    harness.tracker.add_item("2", "pending", title="Farewell", blocked_by=["1"])
    engine = harness.engine()
    engine.start()
    [run] = harness.runtime.wait_runs(1)
    run.say("Reading the work item.")
    run.complete()
    wait_until(lambda: _ended(engine, run.session_id), engine)
    engine.stop(reason="test")
    return harness.tmp_path


def _ended(engine: Engine, session_id: str) -> bool:
    run = engine.get_state().agent_runs.get(SessionId(session_id))
    return run is not None and not run.is_active


def _bodies(work_item_id: WorkItemId) -> str:
    return f"the body of #{work_item_id}, read offline"


def test_the_last_state_with_its_decisions_told_from_the_journal(stopped: Path) -> None:
    feed: Feed = JournalFeed(stopped, SETTINGS, title="/srv/repo")
    assert feed.live is False
    board = feed.board()
    assert (board["engine"], board["actions"], board["title"]) == ("stopped", False, "/srv/repo")
    assert [i["id"] for i in board["work_items"]] == ["1", "2"]
    [ended] = board["runs"]["recent"]
    assert ended["work_item_id"] == "1"
    texts = [d["text"] for d in board["decisions"]]
    assert any("implementor dispatched" in text for text in texts), texts
    before = datetime.fromisoformat(board["generated_at"])
    assert all(datetime.fromisoformat(d["at"]) <= before for d in board["decisions"])


def test_an_item_a_run_and_the_unknown_ones(stopped: Path, harness: Harness) -> None:
    feed = JournalFeed(stopped, SETTINGS, body=_bodies)
    item = feed.item("1")
    assert item is not None
    lines = [line for section in item["sections"] for line in section["lines"]]
    assert "the body of #1, read offline" in "\n".join(lines)
    [session] = item["sessions"]
    run = feed.run(session)
    assert run is not None
    assert (run["session_id"], run["live"]) == (session, False)
    assert feed.item("9") is None
    assert feed.run("implementor-nope") is None
    assert list(feed.follow(session)) == []
    bodiless = JournalFeed(stopped, SETTINGS).item("2")
    assert bodiless is not None
    assert "not read while the engine is stopped" in str(bodiless["sections"])


def test_every_action_is_refused_read_only(stopped: Path) -> None:
    feed = JournalFeed(stopped, SETTINGS)
    for call in (lambda: feed.act({"op": "resume"}), feed.refresh):
        with pytest.raises(Refused) as refused:
            call()
        assert refused.value.kind == "read-only"
        assert "the engine is not running" in str(refused.value)


def test_a_request_journaled_while_no_engine_runs_shows_and_the_watch_sees_it(
    stopped: Path,
) -> None:
    feed = JournalFeed(stopped, SETTINGS, look_every=0.05)
    watch = feed.watch()
    assert next(watch)["paused"] is None
    config = parse_config({})
    settings = ControlSettings(config.breaker, config.workflow.max_concurrent)
    accept_offline(Pause(reason="deploy freeze"), settings, stopped, lambda: None)
    board = next(watch)
    assert board["paused"]["reason"] == "deploy freeze"
    assert any("paused" in d["text"] for d in board["decisions"])
    feed.close()
    assert list(watch) == []


def test_no_journal_is_an_empty_board(tmp_path: Path) -> None:
    board = JournalFeed(tmp_path, SETTINGS).board()
    assert (board["engine"], board["work_items"], board["decisions"]) == ("stopped", [], [])


def test_open_feed_takes_the_socket_of_a_running_engine_else_the_journal(
    harness: Harness,
) -> None:
    harness.tracker.add_item("1", "pending", title="Greeting")
    state_dir = harness.tmp_path
    offline = open_feed(state_dir, SETTINGS)  # nothing ran yet
    assert isinstance(offline, JournalFeed)
    with serving(harness) as served:
        journal_watch = offline.watch()
        next(journal_watch)
        assert list(journal_watch) == []  # an engine answers: the journal's watch ends
        live = open_feed(state_dir, SETTINGS)
        try:
            assert isinstance(live, SocketFeed)
            assert live.board()["engine"] == "running"
        finally:
            live.close()
        served.engine.stop(reason="test")
        served.stop_serving()
    assert isinstance(open_feed(state_dir, SETTINGS), JournalFeed)


def test_open_feed_takes_the_journal_while_the_socket_does_not_answer(tmp_path: Path) -> None:
    """A socket a killed engine left (bound, no one listening), or an engine starting."""
    import socket  # noqa: PLC0415

    left = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    left.bind(str(tmp_path / SOCKET_NAME))
    try:
        assert isinstance(open_feed(tmp_path, SETTINGS, timeout=1.0), JournalFeed)
    finally:
        left.close()


def test_an_engine_holding_the_lock_whose_socket_is_not_up_yet_is_read_from_its_journal(
    harness: Harness,
) -> None:
    """As while ``cpe run`` starts: the engine has the lock and journals, no socket answers
    yet; the console shows the journal and tries again."""
    harness.tracker.add_item("1", "pending", title="Greeting")
    engine = harness.engine()
    engine.start()
    harness.runtime.wait_runs(1)
    feed = open_feed(harness.tmp_path, SETTINGS, timeout=1.0)
    assert isinstance(feed, JournalFeed)
    wait_until(lambda: [i["id"] for i in feed.board()["work_items"]] == ["1"], engine)
    assert feed.board()["engine"] == "stopped"

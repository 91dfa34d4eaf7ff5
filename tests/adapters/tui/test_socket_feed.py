"""The console's feed of a running engine (``SocketFeed``), over a real engine and its real
control socket: the board, an item, a run (and the unknown ones: None), a watch that sees a
change and ends when the engine's socket stops or the feed is closed, a run's output followed,
a request taken and one refused with its kind, a refresh; no engine: ``Refused("gone")``."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from adapters.host.control import SOCKET_NAME
from adapters.tui.feed import Feed, Refused
from adapters.tui.socket_feed import SocketFeed
from domain.models import SessionId
from tests.actors.conftest import Harness, wait_until
from tests.adapters.dashboard.test_dashboard_activity import WORKTREE, record
from tests.adapters.host.serving import Served, serving
from tests.fakes.runtime import FakeRun
from tests.support.transcripts import assistant, text, tool


@pytest.fixture
def harness(tmp_path: Path) -> Iterator[Harness]:
    made = Harness(tmp_path)
    yield made
    made.close()


@pytest.fixture
def served(harness: Harness) -> Iterator[Served]:
    harness.tracker.add_item("1", "pending", title="Greeting")
    harness.tracker.add_item("2", "pending", title="Farewell", blocked_by=["1"])
    with serving(harness) as made:
        yield made


@pytest.fixture
def feed(served: Served) -> Iterator[SocketFeed]:
    made = SocketFeed(served.state_dir)
    yield made
    made.close()


def _running(harness: Harness, served: Served) -> FakeRun:
    [run] = harness.runtime.wait_runs(1)
    wait_until(
        lambda: served.engine.get_state().work_items["1"].status == "in-progress", served.engine
    )
    return run


def test_it_is_a_feed_of_a_live_engine(feed: SocketFeed) -> None:
    typed: Feed = feed
    assert typed.live is True


def test_the_board_an_item_and_a_run(harness: Harness, served: Served, feed: SocketFeed) -> None:
    run = _running(harness, served)
    board = feed.board()
    assert board["engine"] == "running"
    assert [i["id"] for i in board["work_items"]] == ["1", "2"]
    item = feed.item("1")
    assert item is not None
    assert (item["id"], item["title"]) == ("1", "Greeting")
    assert run.session_id in item["sessions"]
    detail = feed.run(run.session_id)
    assert detail is not None
    assert (detail["session_id"], detail["live"]) == (run.session_id, True)
    assert feed.item("9") is None
    assert feed.run("implementor-nope") is None


def test_a_watch_sees_a_change_and_ends_when_the_engines_socket_stops(
    served: Served, feed: SocketFeed
) -> None:
    watch = feed.watch()
    assert next(watch)["paused"] is None
    assert feed.act({"op": "pause", "reason": "lunch"}).startswith("dispatch paused")
    board = next(watch)
    while board["paused"] is None:  # a view of an earlier change may come first
        board = next(watch)
    assert board["paused"]["reason"] == "lunch"
    served.stop_serving()
    assert all("work_items" in b for b in watch)  # what was on its way, then its end
    with pytest.raises(StopIteration):
        next(watch)


def test_close_ends_a_watch_and_a_follow_another_thread_is_in(
    harness: Harness, served: Served, feed: SocketFeed
) -> None:
    run = _running(harness, served)
    record(harness, run.session_id).record_native(assistant(text("first words")))
    seen: dict[str, Any] = {}
    watched, followed = threading.Event(), threading.Event()

    def watching() -> None:
        seen["boards"] = list(_noting(feed.watch(), watched))

    def following() -> None:
        seen["chunks"] = list(_noting(feed.follow(run.session_id), followed))

    threads = [threading.Thread(target=watching), threading.Thread(target=following)]
    for thread in threads:
        thread.start()
    assert watched.wait(30), "the watch gave a board"
    assert followed.wait(30), "the follow gave the run's output"
    feed.close()
    for thread in threads:
        thread.join(30)
        assert not thread.is_alive(), "close() did not end it"
    assert seen["boards"][0]["work_items"]
    assert seen["chunks"] == ["assistant: first words\n"]
    with pytest.raises(Refused) as closed:
        feed.board()
    assert closed.value.kind == "gone"


def _noting(boards: Iterator[dict[str, Any]], started: threading.Event) -> Iterator[Any]:
    for board in boards:
        started.set()
        yield board


def test_a_run_is_followed_as_cpe_runs_show_follows_it_until_it_ends(
    harness: Harness, served: Served, feed: SocketFeed
) -> None:
    """Its activity from its start, line by line as its transcript grows (not the engine's
    prose stream); the follow ends with the run; nothing for a run that is not running."""
    run = _running(harness, served)
    files = record(harness, run.session_id)
    files.record_native(assistant(text("Reading the work item.")))
    run.say("prose from the engine's stream")  # a local run's transcript says what it does
    lines = feed.follow(run.session_id)
    assert next(lines) == "assistant: Reading the work item.\n"
    files.record_native(assistant(tool("Write", file_path=f"{WORKTREE}/greet.py", content="x")))
    assert next(lines) == "tool Write: greet.py (1 chars)\n"
    files.record_native(assistant(text("Done.")))
    files.finish("completed", 0)
    run.complete()
    assert list(lines) == ["assistant: Done.\n"]  # then the run ended: so does the follow
    wait_until(lambda: not _active(served, run.session_id), served.engine)
    assert list(feed.follow(run.session_id)) == []
    assert list(feed.follow("implementor-nope")) == []


def _active(served: Served, session_id: str) -> bool:
    run = served.engine.get_state().agent_runs.get(SessionId(session_id))
    return run is not None and run.is_active


def test_a_request_is_taken_or_refused_with_its_kind_and_a_refresh_polls(
    served: Served, feed: SocketFeed
) -> None:
    with pytest.raises(Refused) as unknown:
        feed.act({"op": "retry", "work_item_id": "9"})
    assert unknown.value.kind == "not-found"
    assert "9" in str(unknown.value)
    with pytest.raises(Refused) as invalid:
        feed.act({"op": "explode"})
    assert invalid.value.kind == "invalid"
    assert feed.act({"op": "pause", "reason": "lunch"}).startswith("dispatch paused")
    assert served.engine.get_state().manual_pause is not None
    assert feed.refresh() == "polling now"


def test_no_engine_is_gone_and_so_is_a_socket_a_killed_engine_left(tmp_path: Path) -> None:
    feed = SocketFeed(tmp_path)
    with pytest.raises(Refused) as none:
        feed.board()
    assert none.value.kind == "gone"
    assert SOCKET_NAME in str(none.value)
    left = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)  # bound, never listening
    left.bind(str(tmp_path / SOCKET_NAME))
    try:
        for call in (feed.board, feed.refresh, lambda: list(feed.watch())):
            with pytest.raises(Refused) as stale:
                call()
            assert stale.value.kind == "gone"
        with pytest.raises(Refused):
            feed.act({"op": "resume"})
    finally:
        left.close()


SECRET = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2"


def test_a_token_in_a_title_or_a_runs_output_never_crosses_the_socket(
    harness: Harness,
) -> None:
    harness.tracker.add_item("1", "pending", title=f"rotate {SECRET}", body=f"use {SECRET}")
    with serving(harness) as served:
        feed = SocketFeed(served.state_dir)
        try:
            run = _running(harness, served)
            files = record(harness, run.session_id)
            files.record_native(assistant(tool("Bash", command=f"export GH_TOKEN={SECRET}")))
            run.say(f"export GH_TOKEN={SECRET}\n")
            followed = next(feed.follow(run.session_id))
            wait_until(lambda: SECRET in _buffered(served, run), served.engine)
            views = [feed.board(), feed.item("1"), feed.run(run.session_id), next(feed.watch())]
        finally:
            feed.close()
    assert followed == "tool Bash: export GH_TOKEN=[REDACTED]\n"  # as its record has it
    for view in views:
        assert view is not None
        assert SECRET not in str(view)
    assert views[0]["work_items"][0]["title"] == "rotate [redacted]"
    assert "tool Bash: export GH_TOKEN=[REDACTED]" in views[2]["output"]


def _buffered(served: Served, run: FakeRun) -> str:
    buffer = served.engine.streams.buffer(run.session_id)
    return buffer.text() if buffer is not None else ""

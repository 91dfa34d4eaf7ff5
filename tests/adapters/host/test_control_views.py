"""The control socket's views, over a real engine (the actor tests' fakes, a real journal) and
its real Unix socket: a view of the board, of an item, of a run, each with its bad input; a
watch that sees a change and ends when the engine's socket stops; a watcher that stops reading
holds up nothing; and a socket given no views says so."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from structlog.testing import capture_logs

from adapters.cli.settings import parse_config
from adapters.dashboard.feeds import SourceViews
from adapters.host.control import Control, ControlServer, ControlSettings
from domain.events import UserPausedDispatch, UserResumedDispatch
from tests.actors.conftest import Harness, wait_until
from tests.adapters.host.serving import Line, Served, one_reply, serving, wait_listening
from tests.fakes.runtime import FakeRun


@pytest.fixture
def harness(tmp_path: Path) -> Iterator[Harness]:
    made = Harness(tmp_path)
    yield made
    made.close()


@pytest.fixture
def served(harness: Harness) -> Iterator[Served]:
    harness.tracker.add_item("1", "pending", title="Greeting [b]bold[/b]")
    harness.tracker.add_item("2", "pending", title="Farewell", blocked_by=["1"])
    with serving(harness) as made:
        yield made


def _running(harness: Harness, served: Served) -> FakeRun:
    """The implementor's run on #1, once the engine has seen #1 go in-progress."""
    [run] = harness.runtime.wait_runs(1)
    wait_until(
        lambda: served.engine.get_state().work_items["1"].status == "in-progress", served.engine
    )
    return run


def test_the_board_is_the_dashboards_state_view(harness: Harness, served: Served) -> None:
    session = _running(harness, served).session_id
    reply = one_reply(served.state_dir, {"view": "board"})
    assert reply["ok"] is True
    board = reply["board"]
    assert board["engine"] == "running"
    assert board["title"] == "/srv/repo"
    assert [(i["id"], i["title"]) for i in board["work_items"]] == [
        ("1", "Greeting [b]bold[/b]"),  # as data: the console escapes it
        ("2", "Farewell"),
    ]
    assert [r["session_id"] for r in board["runs"]["active"]] == [session]
    assert any("implementor dispatched" in d["text"] for d in board["decisions"])


def test_an_item_is_what_cpe_work_show_says_and_an_unknown_one_is_not_found(
    served: Served,
) -> None:
    reply = one_reply(served.state_dir, {"view": "item", "item": "2"})
    assert reply["ok"] is True
    assert (reply["item"]["id"], reply["item"]["title"]) == ("2", "Farewell")
    assert reply["item"]["sections"], "the item's sections"
    missing = one_reply(served.state_dir, {"view": "item", "item": "9"})
    assert missing == {"ok": False, "kind": "not-found", "error": "no work item 9"}
    unnamed = one_reply(served.state_dir, {"view": "item"})
    assert (unnamed["ok"], unnamed["kind"]) == (False, "invalid")
    assert '{"view": "item", "item": ID}' in unnamed["error"]


def test_a_run_has_its_output_and_an_unknown_session_is_not_found(
    harness: Harness, served: Served
) -> None:
    run = _running(harness, served)
    session = run.session_id
    run.say("Reading the work item.")

    def output() -> Any:
        return one_reply(served.state_dir, {"view": "run", "session": session})["run"]["output"]

    wait_until(lambda: output() == "Reading the work item.", served.engine)
    reply = one_reply(served.state_dir, {"view": "run", "session": session})
    assert (reply["run"]["session_id"], reply["run"]["live"]) == (session, True)
    assert reply["run"]["item"]["id"] == "1"
    missing = one_reply(served.state_dir, {"view": "run", "session": "implementor-nope"})
    assert missing == {"ok": False, "kind": "not-found", "error": "no agent run implementor-nope"}
    unnamed = one_reply(served.state_dir, {"view": "run", "session": 7})
    assert (unnamed["ok"], unnamed["kind"]) == (False, "invalid")


def test_bad_lines_are_refused_saying_what_was_expected(served: Served) -> None:
    unknown = one_reply(served.state_dir, {"view": "boards"})
    assert unknown == {
        "ok": False,
        "kind": "invalid",
        "error": "unknown view 'boards': expected board, item or run",
    }
    watch = one_reply(served.state_dir, {"watch": "runs"})
    assert watch["error"] == "unknown watch 'runs': expected board"
    not_object = one_reply(served.state_dir, ["view", "board"])
    assert (not_object["ok"], not_object["kind"]) == (False, "invalid")
    assert "expected a JSON object" in not_object["error"]
    line = Line(served.state_dir)
    try:
        line.send(b"{view: board}\n")
        garbled = line.reply()
    finally:
        line.close()
    assert (garbled["ok"], garbled["kind"]) == (False, "invalid")
    assert "unreadable request" in garbled["error"]


def test_a_client_gone_before_its_answer_prints_nothing_on_the_engines_terminal(
    served: Served, capfd: pytest.CaptureFixture[str]
) -> None:
    """A console quit mid-read, a probe that gave up: the engine's answer meets a closed
    socket. socketserver printed a raw BrokenPipe traceback on the operator's terminal."""
    with capture_logs() as logs:
        for _ in range(3):
            line = Line(served.state_dir)
            line.ask({"view": "board"})
            line.close()  # gone before the answer
        wait_until_logged = time.monotonic() + 60
        while not any("went away" in e["event"] for e in logs):
            assert time.monotonic() < wait_until_logged, logs
            threading.Event().wait(0.05)
    assert one_reply(served.state_dir, {"view": "board"})["ok"] is True  # still serving
    said = capfd.readouterr().err
    assert "Traceback" not in said
    assert "BrokenPipeError" not in said


def test_a_watch_sees_a_change_and_ends_when_the_socket_stops(served: Served) -> None:
    line = Line(served.state_dir)
    try:
        line.ask({"watch": "board"})
        assert line.reply() == {"ok": True}
        first = line.reply()["board"]
        assert first["paused"] is None
        assert served.engine.submit([UserPausedDispatch(reason="lunch")], 30) is True
        while True:  # the views after the change: the last one shows it
            reply = line.reply()
            if "beat" in reply:
                continue
            if reply["board"]["paused"] is not None:
                break
        assert reply["board"]["paused"]["reason"] == "lunch"
        served.stop_serving()
        while "board" in (reply := line.reply()):  # one more may have been on its way
            pass
        assert reply == {"end": True}
        assert line.at_end()
    finally:
        line.close()


def test_a_watcher_that_stops_reading_holds_up_neither_the_engine_nor_the_socket(
    harness: Harness,
) -> None:
    """A board large enough to fill the socket's buffers in a few views; the watcher reads
    none; the engine processes event after event meanwhile, and the socket answers others."""
    for n in range(1, 301):
        harness.tracker.add_item(str(n), "blocked", title=f"item {n} " + "x" * 2000)
    with serving(harness) as served:
        stuck = Line(served.state_dir)
        try:
            stuck.ask({"watch": "board"})
            for _ in range(20):  # each processed, each a new board for the stuck watcher
                assert served.engine.submit([UserPausedDispatch(reason="a")], 30) is True
                assert served.engine.submit([UserResumedDispatch()], 30) is True
            board = one_reply(served.state_dir, {"view": "board"})["board"]
            assert len(board["work_items"]) == 300
            buffers = int(Path("/proc/sys/net/core/wmem_default").read_text())
            assert len(json.dumps(board)) > 2 * buffers, "one view fills the socket's buffers"
            assert board["paused"] is None
        finally:
            stuck.close()


def test_a_socket_given_no_views_says_so(harness: Harness) -> None:
    engine = harness.engine()
    config = parse_config({})
    control = Control(engine, ControlSettings(config.breaker, config.workflow.max_concurrent))
    engine.start()
    server = ControlServer(control, harness.tmp_path)
    thread = threading.Thread(target=server.serve, daemon=True)
    thread.start()
    try:
        wait_listening(harness.tmp_path, thread)
        for message in ({"view": "board"}, {"watch": "board"}):
            reply = one_reply(harness.tmp_path, message)
            assert (reply["ok"], reply["kind"]) == (False, "invalid")
            assert "serves no views" in reply["error"]
    finally:
        server.shutdown()
        thread.join(30)


def test_a_burst_of_changes_is_one_view_of_the_latest_state(harness: Harness) -> None:
    """The watcher reads a byte of the first view and no more: its writer waits on the socket
    while the engine processes a burst of changes; once read, the next view is the state after
    the whole burst (one view for them all)."""
    for n in range(1, 301):
        harness.tracker.add_item(str(n), "blocked", title=f"item {n} " + "x" * 2000)
    with serving(harness) as served:
        line = Line(served.state_dir)
        try:
            line.ask({"watch": "board"})
            assert line.reply() == {"ok": True}
            assert line.file.read(1) == b"{"  # the first view is being written
            for n in range(10):
                assert served.engine.submit([UserPausedDispatch(reason=f"{n}")], 30) is True
                assert served.engine.submit([UserResumedDispatch()], 30) is True
            assert served.engine.submit([UserPausedDispatch(reason="last")], 30) is True
            first = json.loads(b"{" + line.file.readline())["board"]
            assert first["paused"] is None  # built before the burst
            second = line.reply()["board"]
            assert second["paused"]["reason"] == "last"
        finally:
            line.close()


def test_an_idle_watch_beats(harness: Harness) -> None:
    with serving(harness, watch_beat=0.05) as served:
        line = Line(served.state_dir)
        try:
            line.ask({"watch": "board"})
            assert line.reply() == {"ok": True}
            assert "board" in line.reply()
            while "board" in (reply := line.reply()):  # the engine's start may still be told
                pass
            assert reply == {"beat": True}
        finally:
            line.close()


def test_a_watcher_that_goes_away_lets_go_of_the_engine(harness: Harness) -> None:
    """Its next line (a beat at the latest) finds it gone: the watch's listener is dropped."""
    with serving(harness, watch_beat=0.05) as served:
        before = len(served.source._listeners)
        line = Line(served.state_dir)
        line.ask({"watch": "board"})
        assert line.reply() == {"ok": True}
        assert "board" in line.reply()
        assert len(served.source._listeners) == before + 1
        line.close()
        end = time.monotonic() + 30
        while len(served.source._listeners) > before:
            assert time.monotonic() < end, "the watch still listens to the engine"
            threading.Event().wait(0.01)  # a poll's pause


def test_a_board_is_built_once_for_a_moment_and_again_after_a_change(served: Served) -> None:
    """Consoles rung by the same change share one build (SourceViews); a change, a new one."""
    views = SourceViews(served.source)
    first = views.board()
    assert views.board() is first
    assert served.engine.submit([UserPausedDispatch(reason="lunch")], 30) is True
    changed = views.board()
    assert changed is not first
    assert changed["paused"]["reason"] == "lunch"

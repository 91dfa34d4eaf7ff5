"""systemd's watchdog is fed only while the engine answers (`cpe run`'s ``WATCHDOG=1``)."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from actors.process import Watchdog
from domain.events import UserTransitionedStatus
from tests.actors.conftest import Harness


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_the_watchdog_is_withheld_while_the_engine_is_stuck_on_one_event(
    harness: Harness,
) -> None:
    harness.tracker.add_item("1", "blocked")
    engine = harness.engine()
    writer: Any = engine.provider.work_item_writer
    write = writer.transition_status
    entered, release = threading.Event(), threading.Event()

    def stuck_write(*args: Any) -> None:
        entered.set()
        release.wait(60)
        write(*args)

    writer.transition_status = stuck_write
    engine.start()
    clock = _Clock()
    watchdog = Watchdog(stall_timeout=10, clock=clock)
    try:
        assert watchdog.healthy(engine)  # an idle engine: a ping goes out
        assert watchdog.ping is not None
        assert watchdog.ping.wait(30), "an idle engine answers"

        assert engine.enqueue(UserTransitionedStatus(work_item_id="1", to="pending"))
        assert entered.wait(30), "the engine never reached the write"
        clock.now = 100
        assert watchdog.healthy(engine)  # the last ping was answered; a new one goes out
        clock.now = 105
        assert watchdog.healthy(engine), "an unanswered ping is tolerated for stall_timeout"
        clock.now = 111
        assert not watchdog.healthy(engine), "stuck past stall_timeout: no WATCHDOG=1"
        clock.now = 500
        assert not watchdog.healthy(engine)
    finally:
        release.set()
    assert watchdog.ping.wait(30), "the engine answers once the event is done"
    clock.now = 501
    assert watchdog.healthy(engine)


def test_no_watchdog_once_the_engine_actor_is_gone(harness: Harness) -> None:
    engine = harness.engine()
    engine.start()
    watchdog = Watchdog(stall_timeout=10)
    assert watchdog.healthy(engine)
    engine.stop()
    assert not watchdog.healthy(engine)


def test_no_watchdog_before_the_engine_started(harness: Harness) -> None:
    assert not Watchdog(stall_timeout=10).healthy(harness.engine())


def test_no_watchdog_once_the_queue_actor_is_gone(harness: Harness) -> None:
    """Without the queue nothing reaches the engine, however well the engine answers."""
    engine = harness.engine()
    engine.start()
    watchdog = Watchdog(stall_timeout=10)
    assert watchdog.healthy(engine)
    assert engine.supervisor is not None
    engine.supervisor.stop_child("event_queue")
    assert not watchdog.healthy(engine)


def test_a_stall_is_tolerated_up_to_stall_timeout_and_logged_once_per_stall(
    harness: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    """One error line when the watchdog is first withheld (how long the engine has not
    answered), none more while the same stall lasts, and one again for the next stall."""
    for wid in "12":
        harness.tracker.add_item(wid, "blocked")
    engine = harness.engine()
    writer: Any = engine.provider.work_item_writer
    write = writer.transition_status
    entered = {wid: threading.Event() for wid in "12"}
    release = {wid: threading.Event() for wid in "12"}

    def stuck_write(wid: str, to: Any) -> None:
        entered[wid].set()
        release[wid].wait(60)
        write(wid, to)

    writer.transition_status = stuck_write
    engine.start()
    clock = _Clock()
    watchdog = Watchdog(stall_timeout=10, clock=clock)

    def withheld() -> list[dict[str, Any]]:
        return [
            r.msg
            for r in caplog.records
            if isinstance(r.msg, dict)
            and r.msg.get("event") == "the engine has not answered; withholding the watchdog"
        ]

    def stall(wid: str, at: float) -> None:
        """The engine gets stuck on a write; a ping goes out at ``at``."""
        assert engine.enqueue(UserTransitionedStatus(work_item_id=wid, to="pending"))
        assert entered[wid].wait(30), "the engine never reached the write"
        clock.now = at
        assert watchdog.healthy(engine)  # the last ping was answered; a new one goes out

    try:
        assert watchdog.healthy(engine)
        assert watchdog.ping is not None
        assert watchdog.ping.wait(30)
        stall("1", at=100)
        clock.now = 110
        assert watchdog.healthy(engine), "stall_timeout itself is still tolerated"
        clock.now = 111.26
        assert not watchdog.healthy(engine)
        clock.now = 200
        assert not watchdog.healthy(engine)
        assert [(w["waited_s"], w["stall_timeout"]) for w in withheld()] == [(11.3, 10)]
        release["1"].set()
        assert watchdog.ping.wait(30)
        stall("2", at=300)
        clock.now = 320
        assert not watchdog.healthy(engine)
        assert [w["waited_s"] for w in withheld()] == [11.3, 20.0]
    finally:
        for gate in release.values():
            gate.set()

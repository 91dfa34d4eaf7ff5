"""systemd's watchdog is fed only while the engine answers (`cpe run`'s ``WATCHDOG=1``)."""

from __future__ import annotations

import threading
from typing import Any

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

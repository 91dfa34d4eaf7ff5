"""Write pacing every provider's transport shares (``adapters/providers/pacing.py``): the token
buckets' bounds in any minute and any hour, and a write's turn taken ahead of a read."""

from __future__ import annotations

import logging
import threading

import pytest

from adapters.providers.pacing import WritePacer, WriteTurns


class Clock:
    """Time that moves only when slept: a pacer's waits are exact."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.slept: list[float] = []

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def test_a_burst_goes_out_at_once_and_then_writes_are_spaced_by_the_minute_rate() -> None:
    clock = Clock()
    pacer = WritePacer(per_minute=30, per_hour=600, burst=10, clock=lambda: clock.now)
    waits = [pacer.reserve() for _ in range(12)]
    assert waits[:10] == [0.0] * 10
    assert waits[10] == pytest.approx(2.0)  # 30 a minute: one every 2 s once the burst is spent
    assert waits[11] == pytest.approx(4.0)  # reserved in order: the next one queues behind
    assert pacer.limits == (40, 640)


def test_no_minute_and_no_hour_holds_more_writes_than_the_limits() -> None:
    clock = Clock()
    pacer = WritePacer(per_minute=30, per_hour=600, burst=10, clock=lambda: clock.now)
    sent: list[float] = []
    for _ in range(800):
        clock.sleep(pacer.reserve())
        sent.append(clock.now)
    minute, hour = pacer.limits
    for i, at in enumerate(sent):
        assert sum(1 for t in sent[i:] if t < at + 60) <= minute
        assert sum(1 for t in sent[i:] if t < at + 3600) <= hour


def test_a_turn_taken_ahead_is_the_next_writes_and_only_this_threads() -> None:
    clock = Clock()
    pacer = WritePacer(per_minute=60, per_hour=3600, burst=1, clock=lambda: clock.now)
    turns = WriteTurns(pacer, clock.sleep, logging.getLogger("test"))
    turns.pace()  # the burst's one token
    with turns.write_turn():  # waits here, before the read the write depends on
        assert clock.slept == [pytest.approx(1.0)]
        other: list[float] = []
        thread = threading.Thread(target=lambda: other.append(pacer.reserve()))
        thread.start()
        thread.join()
        assert other[0] > 0  # another thread's write still waits its own turn
        turns.pace()  # the write inside the block: its turn was taken, no wait
        assert len(clock.slept) == 1
    turns.pace()  # the next write waits again
    assert len(clock.slept) == 2


def test_without_a_pacer_nothing_waits() -> None:
    clock = Clock()
    turns = WriteTurns(None, clock.sleep, logging.getLogger("test"))
    for _ in range(100):
        turns.pace()
    with turns.write_turn():
        turns.pace()
    assert clock.slept == []

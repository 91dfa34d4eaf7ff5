"""The refresher on a clock the test moves: the first poll a delivery asks for at once, then at
most one trailing poll per ``min_gap`` per poller however many deliveries come, and one
follow-up ``min_gap`` after the last (the vendor's API may show the change a moment late), each
poller on its own gap; a failing refresh does not stop it; closed, its thread ends and polls
nothing more."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from adapters.host.webhooks.refresher import Refresher


class Calls:
    def __init__(self) -> None:
        self.made: list[list[str]] = []
        self.told: list[tuple[str, float]] = []
        self.cond = threading.Condition()

    def refresh(self, names: list[str]) -> None:
        with self.cond:
            self.made.append(names)
            self.cond.notify_all()

    def wait(self, count: int, timeout: float = 30.0) -> list[list[str]]:
        with self.cond:
            assert self.cond.wait_for(lambda: len(self.made) >= count, timeout), self.made
            return list(self.made)


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def calls() -> Calls:
    return Calls()


@pytest.fixture
def refresher(calls: Calls, clock: Clock) -> Iterator[Refresher]:
    made = Refresher(
        calls.refresh, 1.0, clock=clock, on_poll=lambda n, w: calls.told.append((n, w))
    ).start()
    yield made
    made.close()


def settle(refresher: Refresher) -> None:
    """Let the thread look at the clock again (a request of nothing wakes it)."""
    refresher.request([])


def test_the_first_delivery_polls_at_once_and_a_burst_makes_one_trailing_poll(
    refresher: Refresher, calls: Calls, clock: Clock
) -> None:
    refresher.request(["work_items"])
    assert calls.wait(1) == [["work_items"]]
    for _ in range(100):
        clock.now += 0.005
        refresher.request(["work_items"])
    clock.now = 100.9  # still inside the gap: nothing more
    settle(refresher)
    assert refresher.pending() == {"work_items"}
    assert len(calls.made) == 1
    clock.now = 101.0  # the gap is over: ONE trailing poll for the hundred
    settle(refresher)
    assert calls.wait(2) == [["work_items"], ["work_items"]]
    assert refresher.pending() == set()
    assert calls.told[-1] == ("work_items", pytest.approx(100.005))  # the earliest one waiting
    clock.now = 102.0  # the follow-up of the last delivery's poll, and then nothing
    settle(refresher)
    assert calls.wait(3) == [["work_items"]] * 3
    assert calls.told[-1] == ("work_items", None)
    assert refresher.owed() == set()
    clock.now = 200.0
    settle(refresher)
    assert refresher.owed() == set()
    assert len(calls.made) == 3


def test_a_lone_delivery_polls_at_once_and_once_more_a_gap_later(
    refresher: Refresher, calls: Calls, clock: Clock
) -> None:
    refresher.request(["revisions"])
    assert calls.wait(1) == [["revisions"]]
    assert refresher.owed() == {"revisions"}  # GitHub's API may not show the change yet
    clock.now += 0.99
    settle(refresher)
    assert refresher.owed() == {"revisions"}
    assert len(calls.made) == 1
    clock.now += 0.01
    settle(refresher)
    assert calls.wait(2) == [["revisions"], ["revisions"]]
    assert calls.told == [("revisions", 100.0), ("revisions", None)]
    assert refresher.owed() == set()


def test_with_no_gap_every_delivery_polls_at_once_and_nothing_follows(
    calls: Calls, clock: Clock
) -> None:
    refresher = Refresher(calls.refresh, 0.0, clock=clock).start()
    try:
        refresher.request(["specs"])
        calls.wait(1)
        assert refresher.owed() == set()
        refresher.request(["specs"])
        assert calls.wait(2) == [["specs"], ["specs"]]
        assert refresher.owed() == set()
    finally:
        refresher.close()


def test_each_poller_keeps_its_own_gap(refresher: Refresher, calls: Calls, clock: Clock) -> None:
    refresher.request(["work_items"])
    calls.wait(1)
    clock.now += 0.5
    refresher.request(["work_items", "revisions"])  # revisions never polled: at once
    assert calls.wait(2)[1] == ["revisions"]
    assert refresher.pending() == {"work_items"}
    clock.now += 0.5
    settle(refresher)
    assert calls.wait(3)[2] == ["work_items"]


def test_a_delivery_after_a_quiet_gap_polls_at_once_again(
    refresher: Refresher, calls: Calls, clock: Clock
) -> None:
    refresher.request(["specs"])
    calls.wait(1)
    clock.now += 5
    refresher.request(["specs"])
    assert calls.wait(2) == [["specs"], ["specs"]]


def test_a_failing_refresh_is_logged_and_the_next_poll_still_comes(clock: Clock) -> None:
    made: list[list[str]] = []
    first, second = threading.Event(), threading.Event()

    def refresh(names: list[str]) -> None:
        made.append(names)
        if not first.is_set():
            first.set()
            raise RuntimeError("the engine is stopping")
        second.set()

    refresher = Refresher(refresh, 0.0, clock=clock).start()
    try:
        refresher.request(["work_items"])
        assert first.wait(30)
        refresher.request(["revisions"])
        assert second.wait(30)
    finally:
        refresher.close()
    assert made == [["work_items"], ["revisions"]]


def test_closed_it_stops_its_thread_and_polls_nothing_more(calls: Calls, clock: Clock) -> None:
    refresher = Refresher(calls.refresh, 1.0, clock=clock).start()
    refresher.request(["work_items"])
    calls.wait(1)
    refresher.request(["work_items"])  # a trailing poll owed
    refresher.close()
    assert not any(t.name == "cpe-webhook-refresher" for t in threading.enumerate())
    clock.now += 10
    refresher.request(["work_items"])
    assert calls.made == [["work_items"]]


def test_a_request_never_waits_on_the_engine(clock: Clock) -> None:
    """The refresh blocks (a slow engine): the HTTP handler's request returns regardless."""
    release = threading.Event()
    entered = threading.Event()

    def slow(names: list[str]) -> None:
        entered.set()
        release.wait(30)

    refresher = Refresher(slow, 0.0, clock=clock).start()
    try:
        refresher.request(["work_items"])
        assert entered.wait(30)
        for _ in range(1000):
            refresher.request(["work_items"])  # returns while the refresh is held
        assert refresher.pending() == {"work_items"}
    finally:
        release.set()
        refresher.close()

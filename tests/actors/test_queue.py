"""The event queue actor: neither its own restart nor the engine's sticks processing, loses an
event or processes one twice, whatever was in flight."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pykka
import pytest

from actors.journal import Journal
from actors.queue import Inbox, QueueActor, Wake
from actors.settings import SupervisorSettings
from domain.events import UserTransitionedStatus
from tests.actors.conftest import Harness, crash_queue_once, wait_until


def _transition(wid: str) -> UserTransitionedStatus:
    return UserTransitionedStatus.model_validate({"work_item_id": wid, "to": "done"})


def _statuses(engine: Any) -> dict[str, str]:
    return {wid: item.status for wid, item in engine.get_state().work_items.items()}


class Counting:
    """A handler that counts how often each work item's transition was processed, and can
    hold the engine on one of them until the test lets it go."""

    def __init__(self, hold: str | None = None, *, crash: bool = False) -> None:
        self.counts: Counter[str] = Counter()
        self.hold = hold
        self.holding = threading.Event()
        self.release = threading.Event()
        self.crash = crash  # once let go, the engine dies of the held event (once)

    def __call__(self, event: Any, state: Any) -> list[Any]:
        if isinstance(event, UserTransitionedStatus):
            self.counts[event.work_item_id] += 1
            if event.work_item_id == self.hold:
                self.holding.set()
                assert self.release.wait(60)
                if self.crash:
                    self.crash = False
                    raise RuntimeError("injected: the engine dies mid-event")
        return []


def _engine_with(harness: Harness, counting: Counting, **overrides: Any) -> Any:
    for wid in "12":
        harness.tracker.add_item(wid, "blocked")
    engine = harness.engine(**overrides)
    engine.start()
    assert engine.inbox.wait_idle(30)
    engine.loop.handlers = (counting, *engine.handlers)
    return engine


def _wait_restarted(engine: Any, child_id: str) -> None:
    sup = engine.supervisor

    def restarted() -> bool:
        return sup.generation(child_id) == 2 and sup.ref(child_id) is not None

    assert sup.wait_until(restarted, timeout=30)


def _both_done_once(engine: Any, counting: Counting) -> None:
    wait_until(lambda: _statuses(engine) == {"1": "done", "2": "done"}, engine)
    assert engine.inbox.wait_idle(30)
    assert counting.counts == {"1": 1, "2": 1}
    assert engine.supervisor.generation("engine") == 1


@pytest.mark.spec("S002-01")
def test_a_queue_that_dies_while_the_engine_processes_an_event_resumes_after_it(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    counting = Counting(hold="1")
    engine = _engine_with(harness, counting)
    engine.enqueue(_transition("1"))
    engine.enqueue(_transition("2"))
    assert counting.holding.wait(30)  # the engine holds event 1; event 2 waits in the queue
    crashed: list[bool] = []
    crash_queue_once(monkeypatch, crashed, "injected: the queue dies")
    engine.supervisor.ref("event_queue").tell(Wake())
    _wait_restarted(engine, "event_queue")
    engine.supervisor.ref("event_queue").ask(Wake(), timeout=10)  # the new queue has pumped
    # still one event at a time: the second is not handed out while the first is processed
    flight = engine.inbox.in_flight()
    assert flight is not None
    [held] = [e.event for e in engine.journal.entries() if e.seq == flight[0]]
    assert held == _transition("1")
    assert counting.counts == {"1": 1}
    counting.release.set()
    _both_done_once(engine, counting)
    assert crashed == [True]


def test_a_queue_that_dies_after_taking_an_event_hands_it_out_again(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The queue holds no event, only a wake-up: it dies with the wake-up, before ringing the
    # engine. The restarted queue rings instead.
    counting = Counting()
    engine = _engine_with(harness, counting)
    crashed: list[bool] = []
    crash_queue_once(monkeypatch, crashed, "injected: the queue dies holding an event")
    engine.enqueue(_transition("1"))
    engine.enqueue(_transition("2"))
    _both_done_once(engine, counting)
    assert crashed == [True]
    assert engine.supervisor.generation("event_queue") == 2


def test_a_queue_that_dies_handing_an_event_over_hands_it_out_again_once(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The queue dies right after ringing the engine: the restarted queue rings again, and the
    # second ring must not hand out the event a second time.
    counting = Counting()
    engine = _engine_with(harness, counting)
    crashed: list[bool] = []
    crash_queue_once(
        monkeypatch, crashed, "injected: the queue dies handing the event over", after=True
    )
    engine.enqueue(_transition("1"))
    engine.enqueue(_transition("2"))
    _both_done_once(engine, counting)
    assert crashed == [True]
    assert engine.supervisor.generation("event_queue") == 2


@pytest.mark.parametrize("then", ["finishes", "crashes"])
def test_an_engine_abandoned_mid_event_hands_on_its_event_once(
    harness: Harness, monkeypatch: pytest.MonkeyPatch, then: str
) -> None:
    # one_for_all restarts the engine with the crashed queue, and an engine that does not stop
    # in time is abandoned (actors/supervisor.py): its successor starts beside it. The
    # successor must not take the event the abandoned engine holds; it takes the next one once
    # that is finished, or the held one again once the abandoned engine died of it.
    counting = Counting(hold="1", crash=then == "crashes")
    group = SupervisorSettings(
        strategy="one_for_all", backoff_initial=0, jitter=0, child_shutdown_timeout=0.1
    )
    engine = _engine_with(harness, counting, supervisor=group)
    engine.enqueue(_transition("1"))
    engine.enqueue(_transition("2"))
    assert counting.holding.wait(30)
    abandoned = engine.supervisor.ref("engine")
    crashed: list[bool] = []
    crash_queue_once(monkeypatch, crashed, "injected: the queue dies")
    engine.supervisor.ref("event_queue").tell(Wake())
    _wait_restarted(engine, "engine")
    engine.supervisor.ref("engine").ask(Wake(), timeout=10)  # the successor has looked
    flight = engine.inbox.in_flight()
    assert flight is not None
    assert flight[1] is abandoned
    assert counting.counts == {"1": 1}
    counting.release.set()
    wait_until(lambda: _statuses(engine) == {"1": "done", "2": "done"}, engine)
    assert engine.inbox.wait_idle(30)
    assert counting.counts == {"1": 2 if then == "crashes" else 1, "2": 1}
    assert engine.supervisor.generation("engine") == 2  # the abandoned one's end restarts none


# ---------------------------------------------------------------------------- the queue alone


class Engine(pykka.ThreadingActor):
    """A stand-in engine: records what it takes when rung, as the real one does
    (actors/loop.py), and finishes it when told to."""

    def __init__(self, inbox: Inbox, got: list[int]) -> None:
        super().__init__()
        self.inbox = inbox
        self.got = got

    def on_receive(self, message: Any) -> Any:
        if isinstance(message, Wake):
            item = self.inbox.take(self.actor_ref)
            if item is not None:
                self.got.append(item[0])
        elif message == "finish":
            self.inbox.finish(self.got[-1])  # rings the queue when more is queued
        elif message == "crash":
            raise RuntimeError("injected: the engine dies mid-event")
        return None


class QueueRig:
    def __init__(self, tmp_path: Path) -> None:
        self.inbox = Inbox(Journal(tmp_path / "j.sqlite3"))
        self.inbox.processing.set()
        self.got: list[int] = []
        self.engine: pykka.ActorRef[Any] = Engine.start(self.inbox, self.got)
        self.queue = QueueActor.start(self.inbox, lambda: self.engine, child_id="event_queue")

    def settle(self) -> None:
        """Wait until the queue has handled everything told to it so far."""
        self.queue.ask("sync", timeout=10)

    def put(self) -> int:
        seq = self.inbox.put(_transition("1"))
        assert seq is not None
        return seq


@pytest.fixture
def rig(tmp_path: Path) -> Iterator[QueueRig]:
    r = QueueRig(tmp_path)
    yield r
    for ref in (r.queue, r.engine):
        if ref.is_alive():
            ref.stop(block=True, timeout=10)


def test_a_wake_up_does_not_hand_out_again_an_event_a_live_engine_holds(rig: QueueRig) -> None:
    # A restarted engine's ring (or any duplicated one) can come while a live engine holds an
    # event (an abandoned engine still finishing it): that event must not be handed out a
    # second time.
    first = rig.put()
    rig.settle()
    rig.engine.ask("sync", timeout=10)
    assert rig.got == [first]
    rig.queue.tell(Wake())
    rig.settle()
    rig.engine.ask("sync", timeout=10)
    assert rig.got == [first]
    second = rig.put()
    rig.engine.ask("finish", timeout=10)  # finishing the first lets the queue hand out the next
    rig.settle()
    rig.engine.ask("sync", timeout=10)
    assert rig.got == [first, second]


def test_an_event_held_by_an_engine_that_died_is_handed_to_the_next_one(rig: QueueRig) -> None:
    first = rig.put()
    rig.settle()
    rig.engine.tell("crash")
    assert rig.engine.actor_stopped.wait(10)
    dead = rig.got[:]
    rig.engine = Engine.start(rig.inbox, rig.got)
    rig.queue.tell(Wake())  # the ring a restarted engine makes
    rig.settle()
    rig.engine.ask("sync", timeout=10)
    assert dead == [first]
    assert rig.got == [first, first]  # once by the dead engine, once by its successor


def test_queued_lists_what_waits_behind_the_event_in_flight_and_results_join_the_end(
    tmp_path: Path,
) -> None:
    inbox = Inbox(Journal(tmp_path / "j.sqlite3"))
    first, second = _transition("1"), _transition("2")
    seq = inbox.put(first)
    inbox.put(second)
    taken = inbox.take()
    assert taken is not None
    assert taken[0] == seq
    assert inbox.queued() == (second,)
    result = _transition("3")
    inbox.finish(seq, [result])
    assert inbox.queued() == (second, result)

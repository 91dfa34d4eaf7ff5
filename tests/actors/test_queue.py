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

import actors.queue
from actors.base import tell
from actors.journal import Journal
from actors.loop import Ping
from actors.queue import EngineReady, Inbox, Process, QueueActor, Wake
from domain.events import UserTransitionedStatus
from tests.actors.conftest import Harness, wait_until


def _transition(wid: str) -> UserTransitionedStatus:
    return UserTransitionedStatus.model_validate({"work_item_id": wid, "to": "done"})


def _statuses(engine: Any) -> dict[str, str]:
    return {wid: item.status for wid, item in engine.get_state().work_items.items()}


class Counting:
    """A handler that counts how often each work item's transition was processed, and can
    hold the engine on one of them until the test lets it go."""

    def __init__(self, hold: str | None = None) -> None:
        self.counts: Counter[str] = Counter()
        self.hold = hold
        self.holding = threading.Event()
        self.release = threading.Event()

    def __call__(self, event: Any, state: Any) -> list[Any]:
        if isinstance(event, UserTransitionedStatus):
            self.counts[event.work_item_id] += 1
            if event.work_item_id == self.hold:
                self.holding.set()
                assert self.release.wait(60)
        return []


def _engine_with(harness: Harness, counting: Counting) -> Any:
    for wid in "12":
        harness.tracker.add_item(wid, "blocked")
    engine = harness.engine()
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
    harness: Harness,
) -> None:
    counting = Counting(hold="1")
    engine = _engine_with(harness, counting)
    engine.enqueue(_transition("1"))
    engine.enqueue(_transition("2"))
    assert counting.holding.wait(30)  # the engine holds event 1; event 2 waits in the queue
    real_take = engine.inbox.take
    crashed: list[bool] = []

    def take_crashing_once() -> Any:
        if not crashed:
            crashed.append(True)
            raise RuntimeError("injected: the queue dies")
        return real_take()

    engine.inbox.take = take_crashing_once  # type: ignore[method-assign]
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


def test_a_queue_that_dies_after_taking_an_event_hands_it_out_again(harness: Harness) -> None:
    counting = Counting()
    engine = _engine_with(harness, counting)
    real_take = engine.inbox.take
    crashed: list[bool] = []

    def take_then_crash() -> Any:
        item = real_take()
        if item is not None and not crashed:
            crashed.append(True)
            raise RuntimeError("injected: the queue dies holding an event")
        return item

    engine.inbox.take = take_then_crash  # type: ignore[method-assign]
    engine.enqueue(_transition("1"))
    engine.enqueue(_transition("2"))
    _both_done_once(engine, counting)
    assert crashed == [True]
    assert engine.supervisor.generation("event_queue") == 2


def test_a_queue_that_dies_handing_an_event_over_hands_it_out_again_once(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The in-flight event is recorded as handed to the (live) engine, but the tell never
    # happened: the restarted queue pings the engine to find out.
    counting = Counting()
    engine = _engine_with(harness, counting)
    real_tell = actors.queue.tell
    crashed: list[bool] = []

    def tell_crashing_once(ref: Any, message: object) -> bool:
        if isinstance(message, Process) and not crashed:
            crashed.append(True)
            raise RuntimeError("injected: the queue dies handing the event over")
        return real_tell(ref, message)

    monkeypatch.setattr(actors.queue, "tell", tell_crashing_once)
    engine.enqueue(_transition("1"))
    engine.enqueue(_transition("2"))
    _both_done_once(engine, counting)
    assert crashed == [True]
    assert engine.supervisor.generation("event_queue") == 2


# ---------------------------------------------------------------------------- the queue alone


class Engine(pykka.ThreadingActor):
    """A stand-in engine: records what it is handed and finishes it when told to."""

    def __init__(self, inbox: Inbox, got: list[int]) -> None:
        super().__init__()
        self.inbox = inbox
        self.got = got
        self.queue: pykka.ActorRef[Any] | None = None

    def on_receive(self, message: Any) -> Any:
        if isinstance(message, Process):
            self.got.append(message.seq)
        elif isinstance(message, Ping):
            message.answered.set()
        elif message == "finish":
            self.inbox.finish(self.got[-1])
            tell(self.queue, Wake())  # as the real engine does after each event
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
        self.engine.proxy().queue = self.queue

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


def test_engine_ready_does_not_take_back_an_event_a_live_engine_holds(rig: QueueRig) -> None:
    # A Wake can hand an event to a restarted engine before its EngineReady arrives (or to an
    # abandoned engine still finishing it): that event must not be handed out a second time.
    first = rig.put()
    rig.settle()
    rig.engine.ask("sync", timeout=10)
    assert rig.got == [first]
    rig.queue.tell(EngineReady())
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
    rig.queue.tell(EngineReady())
    rig.settle()
    rig.engine.ask("sync", timeout=10)
    assert dead == [first]
    assert rig.got == [first, first]  # once by the dead engine, once by its successor

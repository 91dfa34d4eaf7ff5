"""Supervision: every pykka failure path reaches the supervisor; OTP strategies, restart types,
intensity and backoff."""

from __future__ import annotations

import random
import threading
import time
from typing import Any, ClassVar

import pykka
import pytest

from actors.base import SupervisedActor
from actors.supervisor import ChildSpec, Supervisor, SupervisorSettings

FAST = SupervisorSettings(backoff_initial=0, jitter=0, max_restarts=10, within_seconds=60)


class Boom(Exception):
    pass


class Worker(SupervisedActor):
    """A test actor: ``tell``/``ask`` ``"boom"`` raises, ``"base"`` raises a BaseException."""

    started: ClassVar[dict[str, int]] = {}
    fail_on_start: ClassVar[set[str]] = set()
    lock = threading.Lock()

    def on_start(self) -> None:
        with Worker.lock:
            Worker.started[self.child_id] = Worker.started.get(self.child_id, 0) + 1
        if self.child_id in Worker.fail_on_start:
            Worker.fail_on_start.discard(self.child_id)
            raise Boom("on_start")

    def on_receive(self, message: Any) -> Any:
        if message == "boom":
            raise Boom("in a handler")
        if message == "base":
            raise KeyboardInterrupt("a BaseException")
        if message == "exit":
            raise SystemExit(3)
        return ("ok", self.child_id, self.generation)


@pytest.fixture(autouse=True)
def _reset() -> None:
    Worker.started = {}
    Worker.fail_on_start = set()


def spec(child_id: str, restart: str = "permanent") -> ChildSpec:
    return ChildSpec(
        child_id,
        lambda g, r: Worker.start(child_id=child_id, generation=g, report=r),
        restart=restart,  # type: ignore[arg-type]
    )


def wait_generation(sup: Supervisor, child_id: str, generation: int) -> None:
    def restarted() -> bool:
        return sup.generation(child_id) >= generation and sup.ref(child_id) is not None

    assert sup.wait_until(restarted, timeout=30), f"{child_id} was not restarted"


@pytest.fixture
def sup() -> Any:
    s = Supervisor(FAST, rng=random.Random(1))
    yield s
    s.stop(timeout=10)


@pytest.mark.parametrize("message", ["boom", "base", "exit"])
def test_a_failing_tell_is_reported_and_the_child_restarted(sup: Supervisor, message: str) -> None:
    ref = sup.start_child(spec("a"))
    ref.tell(message)
    wait_generation(sup, "a", 2)
    assert sup.ref("a").ask("hi", timeout=10) == ("ok", "a", 2)


def test_a_failing_ask_raises_for_the_caller_and_restarts_the_child(sup: Supervisor) -> None:
    ref = sup.start_child(spec("a"))
    with pytest.raises(Boom):
        ref.ask("boom", timeout=10)
    wait_generation(sup, "a", 2)


def test_a_failing_on_start_is_reported_and_retried(sup: Supervisor) -> None:
    Worker.fail_on_start = {"a"}
    sup.start_child(spec("a"))
    wait_generation(sup, "a", 2)
    assert Worker.started["a"] == 2


def test_a_base_exception_does_not_stop_the_other_actors(sup: Supervisor) -> None:
    sup.start_child(spec("a"))
    b = sup.start_child(spec("b"))
    sup.ref("a").tell("base")
    wait_generation(sup, "a", 2)
    assert b.is_alive()
    assert sup.generation("b") == 1


def test_one_for_one_restarts_only_the_failed_child(sup: Supervisor) -> None:
    for name in "abc":
        sup.start_child(spec(name))
    sup.ref("b").tell("boom")
    wait_generation(sup, "b", 2)
    assert [sup.generation(n) for n in "abc"] == [1, 2, 1]


def test_rest_for_one_restarts_the_failed_child_and_those_after_it() -> None:
    sup = Supervisor(FAST.model_copy(update={"strategy": "rest_for_one"}))
    try:
        for name in "abc":
            sup.start_child(spec(name))
        sup.ref("b").tell("boom")
        wait_generation(sup, "c", 2)
        wait_generation(sup, "b", 2)
        assert [sup.generation(n) for n in "abc"] == [1, 2, 2]
    finally:
        sup.stop(timeout=10)


def test_one_for_all_restarts_every_child() -> None:
    sup = Supervisor(FAST.model_copy(update={"strategy": "one_for_all"}))
    try:
        for name in "abc":
            sup.start_child(spec(name))
        sup.ref("c").tell("boom")
        for name in "abc":
            wait_generation(sup, name, 2)
    finally:
        sup.stop(timeout=10)


def test_a_temporary_child_is_not_restarted(sup: Supervisor) -> None:
    ref = sup.start_child(spec("s", restart="temporary"))
    ref.tell("boom")
    assert sup.wait_until(lambda: "s" not in sup.child_ids(), timeout=30)
    assert Worker.started["s"] == 1


def test_past_the_intensity_everything_stops_and_the_exit_code_is_75() -> None:
    gave_up = threading.Event()
    sup = Supervisor(
        FAST.model_copy(update={"max_restarts": 2}), on_give_up=lambda exc: gave_up.set()
    )
    sup.start_child(spec("a"))
    other = sup.start_child(spec("b"))
    for generation in (1, 2, 3):
        wait_generation(sup, "a", generation)
        sup.ref("a").tell("boom")
    assert gave_up.wait(30)
    assert sup.exit_code == 75
    assert not other.is_alive()
    assert sup.ref("a") is None
    assert pykka.ActorRegistry.get_all() == []


def test_backoff_doubles_with_jitter_and_is_capped() -> None:
    settings = SupervisorSettings(backoff_initial=1, backoff_max=10, jitter=0.2)
    sup = Supervisor(settings, rng=random.Random(7))
    try:
        delays = [sup._backoff(n) for n in range(1, 7)]
    finally:
        sup.stop()
    bases = [1, 2, 4, 8, 10, 10]
    for delay, base in zip(delays, bases, strict=True):
        assert base * 0.8 <= delay <= base * 1.2
    assert len(set(delays)) == len(delays)  # jittered, not a fixed schedule


def test_the_restart_waits_its_backoff() -> None:
    sup = Supervisor(SupervisorSettings(backoff_initial=0.3, jitter=0))
    try:
        sup.start_child(spec("a"))
        start = time.monotonic()
        sup.ref("a").tell("boom")
        wait_generation(sup, "a", 2)
        waited = time.monotonic() - start
    finally:
        sup.stop()
    assert waited >= 0.3  # a lower bound: load can only make it longer

"""Supervision: every pykka failure path reaches the supervisor; OTP strategies, restart types,
intensity and backoff."""

from __future__ import annotations

import random
import threading
import time
from typing import Any, ClassVar

import pykka
import pytest
from structlog.testing import capture_logs

from actors.base import CrashReport, SupervisedActor
from actors.settings import SupervisorSettings
from actors.supervisor import ChildSpec, Supervisor

FAST = SupervisorSettings(backoff_initial=0, jitter=0, max_restarts=10, within_seconds=60)


class Boom(Exception):
    pass


class Worker(SupervisedActor):
    """A test actor: ``tell``/``ask`` ``"boom"`` raises, ``"base"`` raises a BaseException,
    ``"stop"`` stops it normally (its ``release`` raises for the ``(id, generation)`` pairs in
    ``fail_release``)."""

    started: ClassVar[dict[str, int]] = {}
    fail_on_start: ClassVar[set[str]] = set()
    fail_release: ClassVar[set[tuple[str, int]]] = set()
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
        if message == "stop":
            self.stop()
            return None
        return ("ok", self.child_id, self.generation)

    def release(self) -> None:
        if (self.child_id, self.generation) in Worker.fail_release:
            raise Boom("release")


@pytest.fixture(autouse=True)
def _reset() -> None:
    Worker.started = {}
    Worker.fail_on_start = set()
    Worker.fail_release = set()


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
    """Every child but the temporary ones (agent sessions): a poller's crash must not kill
    the runs under way."""
    sup = Supervisor(FAST.model_copy(update={"strategy": "one_for_all"}))
    try:
        for name in "abc":
            sup.start_child(spec(name))
        session = sup.start_child(spec("t", restart="temporary"))
        sup.ref("c").tell("boom")
        for name in "abc":
            wait_generation(sup, name, 2)
        assert Worker.started["t"] == 1
        assert session.is_alive()
    finally:
        sup.stop(timeout=10)


def test_a_temporary_child_is_not_restarted(sup: Supervisor) -> None:
    ref = sup.start_child(spec("s", restart="temporary"))
    ref.tell("boom")
    assert sup.wait_until(lambda: "s" not in sup.child_ids(), timeout=30)
    assert Worker.started["s"] == 1


def test_past_the_intensity_everything_stops_and_the_exit_code_is_75() -> None:
    gave_up = threading.Event()
    why: list[BaseException] = []
    sup = Supervisor(
        FAST.model_copy(update={"max_restarts": 2}),
        on_give_up=lambda exc: (why.append(exc), gave_up.set()),
    )
    sup.start_child(spec("a"))
    other = sup.start_child(spec("b"))
    for generation in (1, 2, 3):
        wait_generation(sup, "a", generation)
        sup.ref("a").tell("boom")
    assert gave_up.wait(30)
    assert sup.exit_code == 75
    # told why: the crash that broke the intensity
    [exc] = why
    assert isinstance(exc, Boom)
    assert str(exc) == "in a handler"
    assert not other.is_alive()
    assert sup.ref("a") is None
    assert pykka.ActorRegistry.get_all() == []


def test_wait_ref_waits_out_a_restart_and_returns_none_for_a_child_it_does_not_have() -> None:
    """How the engine finds its executor at every command: during the child's restart backoff
    there is no ref yet, and wait_ref waits for the new one; a child that is not there at all
    (or does not come back in time) is None."""
    sup = Supervisor(FAST.model_copy(update={"backoff_initial": 0.3}))
    try:
        first = sup.start_child(spec("a"))
        first.tell("boom")
        assert sup.wait_until(lambda: sup.ref("a") is None, timeout=30)  # in its backoff
        again = sup.wait_ref("a", timeout=30)
        assert again is not None
        assert again != first
        assert sup.generation("a") == 2
        assert sup.wait_ref("nobody", timeout=30) is None
    finally:
        sup.stop()
    slow = Supervisor(FAST.model_copy(update={"backoff_initial": 60}))
    try:
        slow.start_child(spec("b")).tell("boom")
        assert slow.wait_until(lambda: slow.ref("b") is None, timeout=30)
        assert slow.wait_ref("b", timeout=0.2) is None  # not back within the wait
    finally:
        slow.stop()


def test_wait_until_says_false_when_the_condition_does_not_come_in_time() -> None:
    sup = Supervisor(FAST)
    try:
        assert sup.wait_until(lambda: True, timeout=30)
        assert not sup.wait_until(lambda: False, timeout=0.1)
    finally:
        sup.stop()


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


# ---------------------------------------------------------------------------- restart types


def _stop_from_inside(sup: Supervisor, child_id: str) -> None:
    sup.ref(child_id).tell("stop")


def _stop_from_outside(sup: Supervisor, child_id: str) -> None:
    sup.ref(child_id).stop(block=True, timeout=10)


@pytest.mark.parametrize("stop", [_stop_from_inside, _stop_from_outside])
def test_a_permanent_child_that_stops_normally_is_restarted(sup: Supervisor, stop: Any) -> None:
    sup.start_child(spec("p", restart="permanent"))
    stop(sup, "p")
    wait_generation(sup, "p", 2)
    assert sup.ref("p").ask("hi", timeout=10) == ("ok", "p", 2)


@pytest.mark.parametrize("stop", [_stop_from_inside, _stop_from_outside])
def test_a_transient_child_that_stops_normally_is_not_restarted(sup: Supervisor, stop: Any) -> None:
    sup.start_child(spec("t", restart="transient"))
    other = sup.start_child(spec("p"))
    stop(sup, "t")
    assert sup.wait_until(lambda: "t" not in sup.child_ids(), timeout=30)
    assert Worker.started["t"] == 1
    assert sup.ref("t") is None
    assert sup.restart_count == 0
    assert other.is_alive()


@pytest.mark.parametrize("message", ["boom", "base"])
def test_a_transient_child_that_crashes_is_restarted(sup: Supervisor, message: str) -> None:
    sup.start_child(spec("t", restart="transient"))
    sup.ref("t").tell(message)
    wait_generation(sup, "t", 2)
    assert sup.ref("t").ask("hi", timeout=10) == ("ok", "t", 2)


def test_a_transient_child_whose_stop_fails_to_clean_up_is_restarted(sup: Supervisor) -> None:
    # a release() that raises makes the exit abnormal
    Worker.fail_release = {("t", 1)}
    sup.start_child(spec("t", restart="transient"))
    sup.ref("t").tell("stop")
    wait_generation(sup, "t", 2)


@pytest.mark.parametrize("message", ["stop", "boom"])
def test_a_temporary_child_is_never_restarted(sup: Supervisor, message: str) -> None:
    ref = sup.start_child(spec("s", restart="temporary"))
    ref.tell(message)
    assert sup.wait_until(lambda: "s" not in sup.child_ids(), timeout=30)
    assert Worker.started["s"] == 1
    assert sup.restart_count == 0


def test_a_child_stopped_with_stop_child_is_not_restarted(sup: Supervisor) -> None:
    sup.start_child(spec("a"))
    sup.start_child(spec("b"))
    sup.stop_child("a")
    sup.stop_child("never-was")  # a child it does not have: nothing to stop
    # reports are handled in order: once b's crash was handled, so was a's stop
    sup.ref("b").tell("boom")
    wait_generation(sup, "b", 2)
    assert "a" not in sup.child_ids()
    assert Worker.started["a"] == 1


def test_siblings_stopped_by_a_group_restart_are_restarted_once() -> None:
    sup = Supervisor(FAST.model_copy(update={"strategy": "rest_for_one"}))
    try:
        for name in "abc":
            sup.start_child(spec(name))
        sup.ref("b").tell("boom")
        wait_generation(sup, "c", 2)
        # c's stop (by the group restart) was reported after that restart; once a later crash
        # was handled, so was that report
        sup.ref("a").tell("boom")  # rest_for_one from a: a, b and c again
        for name in "abc":
            wait_generation(sup, name, {"a": 2, "b": 3, "c": 3}[name])
        assert [Worker.started[n] for n in "abc"] == [2, 3, 3]
    finally:
        sup.stop(timeout=10)


# ---------------------------------------------------------------------------- shutdown timeout


class Stuck(SupervisedActor):
    """A child whose stop does not finish until ``gate`` is set."""

    def __init__(self, gate: threading.Event, threads: list[threading.Thread], **base: Any):
        super().__init__(**base)
        self.gate = gate
        self.threads = threads

    def on_start(self) -> None:
        self.threads.append(threading.current_thread())

    def release(self) -> None:
        self.gate.wait(60)


def test_a_child_that_does_not_stop_within_its_shutdown_timeout_is_abandoned() -> None:
    # the supervisor-wide default is far beyond the test's own timeout: only the child's own
    # shutdown_timeout can end the wait
    sup = Supervisor(FAST.model_copy(update={"child_shutdown_timeout": 600}))
    gate = threading.Event()
    threads: list[threading.Thread] = []

    def start_stuck(generation: int, report: CrashReport) -> pykka.ActorRef[Any]:
        return Stuck.start(gate, threads, child_id="stuck", generation=generation, report=report)

    first = sup.start_child(spec("first"))
    sup.start_child(ChildSpec("stuck", start_stuck, shutdown_timeout=0.2))
    last = sup.start_child(spec("last"))
    try:
        with capture_logs() as logs:
            sup.stop()  # returns although one child never stopped
        abandoned = [e for e in logs if e["event"] == "child did not stop in time; abandoned"]
        assert [(e["child"], e["timeout_s"]) for e in abandoned] == [("stuck", 0.2)]
        assert not first.is_alive()  # stopped after the stuck one was given up on
        assert not last.is_alive()
        assert threads[0].is_alive(), "the stuck child is still in its release: abandoned"
    finally:
        gate.set()
        threads[0].join(30)
    assert not threads[0].is_alive()


def test_a_stop_deadline_cuts_every_childs_wait_short() -> None:
    """The engine's stop gives its actors one overall budget: a child whose own timeout is far
    longer is abandoned when the deadline passes, and the stop returns."""
    sup = Supervisor(FAST.model_copy(update={"child_shutdown_timeout": 600}))
    gate = threading.Event()
    threads: list[threading.Thread] = []

    def start_stuck(generation: int, report: CrashReport) -> pykka.ActorRef[Any]:
        return Stuck.start(gate, threads, child_id="stuck", generation=generation, report=report)

    sup.start_child(ChildSpec("stuck", start_stuck, shutdown_timeout=600))
    last = sup.start_child(spec("last"))
    try:
        with capture_logs() as logs:
            sup.stop(deadline=time.monotonic() + 0.2)
        [abandoned] = [e for e in logs if e["event"] == "child did not stop in time; abandoned"]
        assert abandoned["child"] == "stuck"
        assert abandoned["timeout_s"] <= 0.2  # the deadline, not the child's 600 s
        assert not last.is_alive()
        assert threads[0].is_alive()
    finally:
        gate.set()
        threads[0].join(30)


def test_a_child_waiting_out_a_long_backoff_does_not_delay_another_childs_restart() -> None:
    """Backoffs are scheduled, not slept through by the one worker: ``a`` crashes twice (its
    second backoff is 2 s), then ``b`` once (1 s): ``b`` is back before ``a``."""
    settings = FAST.model_copy(update={"backoff_initial": 1.0, "backoff_max": 60})
    sup = Supervisor(settings)
    try:
        for name in "ab":
            sup.start_child(spec(name))
        sup.ref("a").tell("boom")
        wait_generation(sup, "a", 2)
        second = sup.ref("a")
        second.tell("boom")  # now waiting 2 s
        assert sup.wait_until(lambda: not second.is_alive(), timeout=30)
        sup.ref("b").tell("boom")  # waiting 1 s
        wait_generation(sup, "b", 2)
        assert sup.generation("a") == 2, "a's longer backoff is still running"
        wait_generation(sup, "a", 3)
    finally:
        sup.stop()


# ---------------------------------------------------------------------------- intensity window


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _crash_every(seconds: float, crashes: int, clock: FakeClock, sup: Supervisor) -> None:
    for generation in range(1, crashes + 1):
        wait_generation(sup, "a", generation)
        clock.now += seconds
        sup.ref("a").tell("boom")


def test_restarts_spread_beyond_the_window_do_not_trip_the_intensity() -> None:
    clock = FakeClock()
    gave_up = threading.Event()
    settings = FAST.model_copy(update={"max_restarts": 2, "within_seconds": 10})
    sup = Supervisor(settings, clock=clock, on_give_up=lambda exc: gave_up.set())
    try:
        sup.start_child(spec("a"))
        # 6 s apart: two restarts are always within 10 s, never three
        _crash_every(6, 5, clock, sup)
        wait_generation(sup, "a", 6)
        assert not gave_up.is_set()
        assert sup.restart_count == 5
        assert sup.exit_code == 0
    finally:
        sup.stop(timeout=10)


def test_the_same_restarts_inside_the_window_trip_the_intensity() -> None:
    clock = FakeClock()
    gave_up = threading.Event()
    settings = FAST.model_copy(update={"max_restarts": 2, "within_seconds": 10})
    sup = Supervisor(settings, clock=clock, on_give_up=lambda exc: gave_up.set())
    try:
        sup.start_child(spec("a"))
        _crash_every(1, 3, clock, sup)  # three crashes within 3 s
        assert gave_up.wait(30)
        assert sup.restart_count == 2
        assert sup.exit_code == 75
        assert sup.ref("a") is None
    finally:
        sup.stop(timeout=10)

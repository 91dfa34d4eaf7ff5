"""The supervisor's, the actors' and the agent sessions' log lines and messages, word for word:
what an operator reads when a child stops, crashes or will not stop."""

from __future__ import annotations

import random
import threading
from typing import Any

import pykka
import pytest
from structlog.testing import capture_logs

from actors.base import CrashReport
from actors.supervisor import ChildSpec, Supervisor
from tests.actors.test_supervision import FAST, Boom, FakeClock, Worker, spec, wait_generation


def _lines(logs: list[dict[str, Any]], event: str) -> list[dict[str, Any]]:
    return [line for line in logs if line["event"] == event]


@pytest.fixture(autouse=True)
def _fresh_worker(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(Worker, "started", {})
    monkeypatch.setattr(Worker, "fail_on_start", set())
    monkeypatch.setattr(Worker, "fail_release", set())


# ---------------------------------------------------------------------------- the supervisor


def test_a_permanent_child_that_stops_is_restarted_with_a_line_saying_so() -> None:
    sup = Supervisor(FAST, rng=random.Random(1))
    try:
        sup.start_child(spec("a"))
        with capture_logs() as logs:
            sup.ref("a").tell("stop")
            wait_generation(sup, "a", 2)
        assert _lines(logs, "restarting") == [
            {
                "event": "restarting",
                "child": "a",
                "reason": "RuntimeError: the permanent child a stopped",
                "strategy": "one_for_one",
                "group": ["a"],
                "backoff_s": 0.0,
                "log_level": "warning",
            }
        ]
    finally:
        sup.stop(timeout=10)


def test_past_the_intensity_the_line_names_the_child_and_the_limit() -> None:
    given_up: list[BaseException] = []
    gave_up = threading.Event()
    sup = Supervisor(
        FAST.model_copy(update={"max_restarts": 0}),
        on_give_up=lambda exc: (given_up.append(exc), gave_up.set()),
    )
    try:
        sup.start_child(spec("a"))
        with capture_logs() as logs:
            sup.ref("a").tell("stop")
            assert gave_up.wait(30)
        assert _lines(logs, "restart intensity exceeded; stopping everything") == [
            {
                "event": "restart intensity exceeded; stopping everything",
                "child": "a",
                "max_restarts": 0,
                "within_seconds": 60,
                "log_level": "error",
            }
        ]
        [why] = given_up
        assert (type(why), str(why)) == (RuntimeError, "the permanent child a stopped")
    finally:
        sup.stop(timeout=10)


def test_a_childs_backoff_counts_its_restarts_up_to_the_window_inclusive() -> None:
    """A crash exactly ``within_seconds`` after the first still counts it: the backoff
    doubles."""
    clock = FakeClock()
    settings = FAST.model_copy(update={"backoff_initial": 0.01, "within_seconds": 10})
    sup = Supervisor(settings, clock=clock)
    try:
        sup.start_child(spec("a"))
        with capture_logs() as logs:
            sup.ref("a").tell("boom")
            wait_generation(sup, "a", 2)
            clock.now += 10
            sup.ref("a").tell("boom")
            wait_generation(sup, "a", 3)
        assert [line["backoff_s"] for line in _lines(logs, "restarting")] == [0.01, 0.02]
    finally:
        sup.stop(timeout=10)


class CannotStart(Exception):
    pass


def test_a_supervisor_that_fails_to_restart_a_child_gives_up_with_that_failure() -> None:
    given_up: list[BaseException] = []
    gave_up = threading.Event()
    failure = CannotStart("no second start")

    def start(generation: int, report: CrashReport) -> pykka.ActorRef[Any]:
        if generation > 1:
            raise failure
        return Worker.start(child_id="a", generation=generation, report=report)

    sup = Supervisor(FAST, on_give_up=lambda exc: (given_up.append(exc), gave_up.set()))
    try:
        sup.start_child(ChildSpec("a", start))
        with capture_logs() as logs:
            sup.ref("a").tell("boom")
            assert gave_up.wait(30)
        assert given_up == [failure]
        assert sup.exit_code == 75
        assert _lines(logs, "supervisor failed to handle a crash") == [
            {"event": "supervisor failed to handle a crash", "log_level": "error", "exc_info": True}
        ]
    finally:
        sup.stop(timeout=10)


# ---------------------------------------------------------------------------- a crashing actor


def test_a_release_that_fails_after_a_crash_is_logged_and_the_crash_still_reported() -> None:
    Worker.fail_release = {("a", 0)}
    reported: list[BaseException | None] = []
    done = threading.Event()

    def report(child_id: str, generation: int, exc: BaseException | None) -> None:
        reported.append(exc)
        done.set()

    ref = Worker.start(child_id="a", report=report)
    with capture_logs() as logs:
        with pytest.raises(Boom):
            ref.ask("boom", timeout=10)
        assert done.wait(30)
    assert [type(exc) for exc in reported] == [Boom]
    assert _lines(logs, "release after a crash failed") == [
        {
            "event": "release after a crash failed",
            "actor": "a",
            "log_level": "error",
            "exc_info": True,
        }
    ]

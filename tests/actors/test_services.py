"""Services beside the engine (``actors.services``): a crashed service is started again, one that
keeps crashing is given up alone, and a stop ends them all (waiting for each, up to a limit);
the log says why each crashed and which was given up."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

import actors.services as services_module
from actors.services import Services
from actors.settings import SupervisorSettings
from tests.actors.test_logs import Lines, json_log

FAST = SupervisorSettings(backoff_initial=0, jitter=0, max_restarts=3, within_seconds=60)


class Flaky:
    """Fails its first ``failures`` serves, then serves until shut down."""

    name = "flaky"

    def __init__(self, log: list[str], failures: int):
        self.log = log
        self.failures = failures
        self.stop = threading.Event()

    def serve(self) -> None:
        self.log.append("serve")
        if self.log.count("serve") <= self.failures:
            raise OSError("address already in use")
        self.stop.wait()

    def shutdown(self) -> None:
        self.stop.set()


def started(log: list[str], count: int) -> bool:
    done = threading.Event()
    for _ in range(200):
        if log.count("serve") >= count:
            return True
        done.wait(0.05)
    return log.count("serve") >= count


def test_a_service_that_crashes_is_started_again() -> None:
    log: list[str] = []
    services = Services(FAST)
    instances: list[Flaky] = []

    def build() -> Flaky:
        instances.append(Flaky(log, failures=2))
        return instances[-1]

    services.start("flaky", build)
    supervisor = services.supervisor("flaky")
    assert supervisor.wait_until(lambda: supervisor.restart_count == 2, timeout=30)
    assert started(log, 3)
    assert not supervisor.gave_up.is_set()
    services.stop()
    assert instances[-1].stop.is_set()


def test_a_service_that_keeps_crashing_is_given_up_without_touching_another() -> None:
    log: list[str] = []
    other: list[str] = []
    services = Services(FAST)
    services.start("broken", lambda: Flaky(log, failures=1_000))
    services.start("steady", lambda: Flaky(other, failures=0))
    broken = services.supervisor("broken")
    assert broken.gave_up.wait(30)
    assert log.count("serve") == 4  # the first start and three restarts
    assert not services.supervisor("steady").gave_up.is_set()
    assert started(other, 1)  # its thread may start after the other gave up, on a loaded machine
    assert other == ["serve"]
    services.stop()


@pytest.fixture
def log() -> Iterator[Lines]:
    yield from json_log()


def test_a_services_crash_is_logged_with_why_it_stopped(log: Lines) -> None:
    """Whatever the settings say, a service's supervisor restarts it alone (it is its only
    child)."""
    services = Services(FAST.model_copy(update={"strategy": "one_for_all"}))
    log_of_serves: list[str] = []
    services.start("control socket", lambda: Flaky(log_of_serves, failures=1))
    restarting = log.wait_for(lambda line: line["event"] == "restarting")
    crashed = log.wait_for(lambda line: line["event"] == "actor crashed")
    assert started(log_of_serves, 2)
    services.stop()
    why = "ServiceEnded: the flaky stopped (OSError: address already in use)"
    assert (crashed["actor"], crashed["error"]) == ("service:control socket", why)
    assert (restarting["child"], restarting["reason"], restarting["strategy"]) == (
        "service:control socket",
        why,
        "one_for_one",
    )


class Quitter:
    """Returns from ``serve()`` at once, unasked."""

    name = "quitter"

    def serve(self) -> None:
        pass

    def shutdown(self) -> None:
        pass


def test_a_service_given_up_is_logged_with_its_last_failure(log: Lines) -> None:
    services = Services(FAST)
    broken: list[str] = []
    services.start("dashboard", lambda: Flaky(broken, failures=1_000))
    services.start("quitting", Quitter)
    lines = [
        log.wait_for(
            lambda line, name=name: (
                line["event"].startswith("a service keeps failing") and line["service"] == name
            )
        )
        for name in ("dashboard", "quitting")
    ]
    services.stop()
    assert [(line["event"], line["level"], line["error"]) for line in lines] == [
        (
            "a service keeps failing; it is off until cpe restarts (the engine goes on)",
            "error",
            "ServiceEnded: the flaky stopped (OSError: address already in use)",
        ),
        (
            "a service keeps failing; it is off until cpe restarts (the engine goes on)",
            "error",
            "ServiceEnded: the quitter stopped",  # it returned: no error to name
        ),
    ]


class Slow:
    """Serves in a thread it records; after ``shutdown()`` it takes ``closing`` seconds to
    return (a server closing its socket), or never returns if ``closing`` is None."""

    name = "slow"

    def __init__(self, closing: float | None):
        self.closing = closing
        self.stop = threading.Event()
        self.serving = threading.Event()
        self.returned = threading.Event()
        self.release = threading.Event()
        self.thread: threading.Thread | None = None

    def serve(self) -> None:
        self.thread = threading.current_thread()
        self.serving.set()
        self.stop.wait()
        if self.closing is None:
            self.release.wait()
        else:
            self.release.wait(self.closing)
        self.returned.set()

    def shutdown(self) -> None:
        self.stop.set()


def test_a_service_serves_in_a_daemon_thread_of_its_own_and_stop_waits_for_it() -> None:
    """Named for a thread dump; a daemon, so that a stuck service cannot keep cpe alive. A stop
    returns once ``serve()`` did: the port is free for the next start."""
    services = Services(FAST)
    service = Slow(closing=0.2)
    services.start("slow", lambda: service)
    assert service.serving.wait(30)
    assert service.thread is not None
    assert (service.thread.name, service.thread.daemon) == ("cpe-service-slow", True)
    services.stop()
    assert service.returned.is_set()


def test_a_service_that_does_not_stop_in_time_is_logged_and_left(
    log: Lines, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(services_module, "STOP_TIMEOUT", 0.05)
    services = Services(FAST)
    service = Slow(closing=None)
    services.start("stuck", lambda: service)
    assert service.serving.wait(30)
    try:
        services.stop()
        [line] = [line for line in log.lines() if line["event"].endswith("in time")]
        assert (line["event"], line["level"], line["service"]) == (
            "a service did not stop in time",
            "error",
            "slow",
        )
        assert not service.returned.is_set()
    finally:
        service.release.set()

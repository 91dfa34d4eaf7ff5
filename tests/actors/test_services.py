"""Services beside the engine (``actors.services``): a crashed service is started again, one that
keeps crashing is given up alone, and a stop ends them all."""

from __future__ import annotations

import threading

from actors.services import Services
from actors.supervisor import SupervisorSettings

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
    assert other == ["serve"]
    services.stop()

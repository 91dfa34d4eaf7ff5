"""A child that fails the same way at every start is not restarted in a loop: a crash a restart
cannot fix (a ``ConfigError``, raised or raised from) starts the child once, is logged once and
gives the tree up with exit code 78 (EX_CONFIG, which systemd does not restart), whichever
child it is: a test actor, an engine's poller, a service."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any, ClassVar

import pytest

from actors.base import SupervisedActor
from actors.config import PollerSettings
from actors.services import Services
from actors.settings import SupervisorSettings
from actors.supervisor import ChildSpec, Supervisor, permanent_error
from domain.errors import ConfigError
from tests.actors.conftest import Harness
from tests.actors.test_logs import Lines, json_log

# Restarts at once and many of them: a loop would show within the test's wait.
LOOSE = SupervisorSettings(backoff_initial=0, jitter=0, max_restarts=50, within_seconds=60)
NOT_RESTARTED = "a child cannot start with this configuration; not restarted"


class Misconfigured(SupervisedActor):
    """Fails at every start, the same way: its configuration names an address in use."""

    starts: ClassVar[list[int]] = []
    wrapped = False

    def on_start(self) -> None:
        Misconfigured.starts.append(self.generation)
        error = ConfigError("127.0.0.1:8765 is in use", key_path="dashboard.listen")
        if self.wrapped:  # as a service's crash comes: ServiceEnded from the service's error
            raise RuntimeError("the dashboard stopped") from error
        raise error


class WrappedMisconfigured(Misconfigured):
    wrapped = True


class Steady(SupervisedActor):
    pass


@pytest.fixture(autouse=True)
def _reset() -> None:
    Misconfigured.starts = []


@pytest.fixture
def log() -> Iterator[Lines]:
    yield from json_log()


@pytest.mark.parametrize("restart", ["permanent", "transient"])
@pytest.mark.parametrize("actor", [Misconfigured, WrappedMisconfigured])
def test_a_child_that_cannot_start_with_its_configuration_is_started_once_and_given_up(
    log: Lines, restart: Any, actor: type[Misconfigured]
) -> None:
    why: list[BaseException] = []
    gave_up = threading.Event()
    sup = Supervisor(LOOSE, on_give_up=lambda exc: (why.append(exc), gave_up.set()))
    try:
        steady = sup.start_child(
            ChildSpec(
                "steady", lambda g, r: Steady.start(child_id="steady", generation=g, report=r)
            )
        )
        sup.start_child(
            ChildSpec(
                "bad",
                lambda g, r: actor.start(child_id="bad", generation=g, report=r),
                restart=restart,
            )
        )
        assert gave_up.wait(30)
        line = log.wait_for(lambda line: line["event"] == NOT_RESTARTED)
    finally:
        sup.stop(timeout=10)
    assert Misconfigured.starts == [1]  # started once, never again
    assert sup.restart_count == 0
    assert sup.exit_code == 78
    [exc] = why  # the failure reported, with the configuration error behind it
    assert str(permanent_error(exc)) == "dashboard.listen: 127.0.0.1:8765 is in use"
    assert (line["child"], line["error"]) == ("bad", "dashboard.listen: 127.0.0.1:8765 is in use")
    events = [line["event"] for line in log.lines()]
    assert events.count(NOT_RESTARTED) == 1
    assert "restarting" not in events
    assert "restart intensity exceeded; stopping everything" not in events
    assert not steady.is_alive()  # the tree was stopped, as past the intensity


def test_a_temporary_child_that_cannot_start_leaves_the_tree_alone(log: Lines) -> None:
    """An agent session is never restarted anyway: its failure is its run's, not the tree's."""
    sup = Supervisor(LOOSE)
    try:
        sup.start_child(
            ChildSpec(
                "session",
                lambda g, r: Misconfigured.start(child_id="session", generation=g, report=r),
                restart="temporary",
            )
        )
        assert sup.wait_until(lambda: "session" not in sup.child_ids(), timeout=30)
        assert not sup.gave_up.is_set()
        assert sup.exit_code == 0
    finally:
        sup.stop(timeout=10)
    assert Misconfigured.starts == [1]


def test_an_engine_child_that_cannot_work_with_its_configuration_stops_the_engine_with_78(
    harness: Harness,
) -> None:
    """A poller whose provider says its configuration is wrong, at every poll: one crash, no
    restart, the engine stopped with one line for ``cpe run`` to print and exit 78."""
    harness.tracker.add_item("1", "blocked")
    engine = harness.engine(
        work_item_poller=PollerSettings(poll_interval=0.02),
        supervisor=SupervisorSettings(max_restarts=50, backoff_initial=0, jitter=0),
    )
    engine.start()
    wrong = ConfigError("the variable GH_TOKEN is not set", key_path="provider.github.token_env")
    harness.tracker.fail_next("list_work_items", *[wrong] * 10)
    assert engine.wait(30) == 78
    assert engine.fatal_error == (
        "configuration error: provider.github.token_env: the variable GH_TOKEN is not set"
    )
    assert engine.supervisor is not None
    assert engine.supervisor.restart_count == 0
    assert len(harness.tracker.faults["list_work_items"]) == 9  # polled once, not per restart
    engine.journal.close()


class Unservable:
    """A service whose configuration cannot work: ``serve()`` fails the same way every time."""

    name = "unservable"

    def __init__(self, serves: list[str]):
        self.serves = serves

    def serve(self) -> None:
        self.serves.append("serve")
        raise ConfigError("the dashboard cannot listen on 127.0.0.1:8765: in use")

    def shutdown(self) -> None:
        pass


def test_a_service_that_cannot_start_is_given_up_at_once_and_alone(log: Lines) -> None:
    serves: list[str] = []
    services = Services(LOOSE)
    try:
        services.start("dashboard", lambda: Unservable(serves))
        broken = services.supervisor("dashboard")
        assert broken.gave_up.wait(30)
        line = log.wait_for(lambda line: line["event"].startswith("a service cannot start"))
    finally:
        services.stop()
    assert serves == ["serve"]
    assert broken.restart_count == 0
    assert line["service"] == "dashboard"
    assert line["error"] == "the dashboard cannot listen on 127.0.0.1:8765: in use"
    assert "restarting" not in [line["event"] for line in log.lines()]

"""Fixtures for the actor tests: an engine on fakes, and no actor left behind."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pykka
import pytest

from actors.config import EngineConfig, PollerSettings
from actors.engine import Engine, create_engine
from actors.journal import Journal
from actors.queue import QueueActor, Wake
from actors.settings import SupervisorSettings
from domain.handlers.options import HandlerOptions
from tests.fakes.provider import FakeTracker, fake_provider
from tests.fakes.runtime import FakeRuntime, Script, fake_runtimes

NO_TIMER = PollerSettings(poll_interval=0)


@pytest.fixture(autouse=True)
def _no_actor_left_behind() -> Iterator[None]:
    yield
    alive = pykka.ActorRegistry.get_all()
    pykka.ActorRegistry.stop_all(block=True, timeout=30)
    assert not alive, f"actors left running: {alive}"


class Harness:
    def __init__(self, tmp_path: Path):
        self.tmp_path = tmp_path
        self.tracker = FakeTracker()
        self.runtime = FakeRuntime()
        self.engines: list[Engine] = []

    def engine(self, **overrides: Any) -> Engine:
        _, provider = fake_provider(self.tracker)
        settings: dict[str, Any] = {
            "provider": provider,
            "create_runtime_adapters": fake_runtimes(self.runtime),
            "journal_path": str(self.tmp_path / "journal.sqlite3"),
            "work_item_poller": NO_TIMER,
            "revision_poller": NO_TIMER,
            "spec_poller": NO_TIMER,
            "shutdown_timeout": 30,
            "cancel_grace": 5,
            "supervisor": SupervisorSettings(backoff_initial=0, jitter=0),
            "handlers": HandlerOptions(auto_merge=True),
        }
        settings.update(overrides)
        engine = create_engine(EngineConfig(**settings))
        self.engines.append(engine)
        return engine

    def script(self, **fields: Any) -> None:
        self.runtime.script = Script(**fields)

    def close(self) -> None:
        for engine in self.engines:
            engine.stop(reason="test teardown")
        self.runtime.release_start.set()


@pytest.fixture
def harness(tmp_path: Path) -> Iterator[Harness]:
    h = Harness(tmp_path)
    yield h
    h.close()


def wait_until(condition: Callable[[], bool], engine: Engine, timeout: float = 30.0) -> None:
    """Wait until ``condition`` holds, re-checking on every state change (and at least every
    half second, for conditions on things outside the state)."""
    changed = threading.Event()
    unsubscribe = engine.subscribe(lambda _: changed.set())
    end = time.monotonic() + timeout
    try:
        while not condition():
            left = end - time.monotonic()
            if left <= 0:
                raise AssertionError("condition not reached in time")
            changed.wait(min(left, 0.5))
            changed.clear()
    finally:
        unsubscribe()


def crash_queue_once(
    monkeypatch: pytest.MonkeyPatch, crashed: list[bool], why: str, *, after: bool = False
) -> None:
    """The queue actor's next wake-up crashes it: before it rings the engine, or ``after``."""
    real = QueueActor.on_receive

    def on_receive(self: QueueActor, message: Any) -> Any:
        if not isinstance(message, Wake) or crashed:
            return real(self, message)
        crashed.append(True)
        if after:
            real(self, message)
        raise RuntimeError(why)

    monkeypatch.setattr(QueueActor, "on_receive", on_receive)


def fill_the_disk(journal: Journal) -> None:
    """From now on ``journal`` is refused the space to grow, as a full disk would refuse it:
    sqlite's page limit is set to the pages it has (a write that needs none still succeeds)."""
    db = journal._db
    db.execute(f"PRAGMA max_page_count = {db.execute('PRAGMA page_count').fetchone()[0]}")


def write_until_refused(write: Callable[[], object]) -> None:
    """``write`` again and again: each needs more space, until one is refused."""
    for _ in range(10_000):
        write()

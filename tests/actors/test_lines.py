"""The lines an operator reads about the engine's life and its pollers, word for word: their
event names and every field (what docs/operations.md tells a person to look for)."""

from __future__ import annotations

from typing import Any

import pytest
from structlog.testing import capture_logs

from actors.config import PollerSettings
from domain.errors import ProviderError
from domain.models import EngineState
from tests.actors.conftest import Harness
from tests.actors.test_pollers import REVISION, Clock, Reader
from tests.support.pollers import revision_poller


def lines(caplog: pytest.LogCaptureFixture, event: str) -> list[dict[str, Any]]:
    """The fields of every line with this event name, in order."""
    return [
        {k: v for k, v in r.msg.items() if k not in ("event", "timestamp", "level", "logger")}
        for r in caplog.records
        if isinstance(r.msg, dict) and r.msg.get("event") == event
    ]


def test_the_engine_says_how_it_starts_and_how_many_runs_its_stop_cancelled(
    harness: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    harness.tracker.add_item("1")
    engine = harness.engine(work_item_poller=PollerSettings(poll_interval=0.5))
    engine.start()
    harness.runtime.wait_run()
    engine.stop(reason="a test")
    roles = {role: type(a).__name__ for role, a in engine.runtime_adapters.items()}
    assert set(roles) == {"planner", "implementor", "reviewer"}
    assert "NoneType" not in roles.values()
    assert lines(caplog, "engine starting") == [
        {
            "log_level": "info",
            "poll_intervals": {"work_items": 0.5, "revisions": 0, "specs": 0},
            "shutdown_timeout": 30.0,
            "roles": roles,
            "restored_events": 0,
            "unprocessed_events": 0,
            "resumed_writes": 0,
        }
    ]
    assert lines(caplog, "shutdown initiated") == [{"reason": "a test"}]
    assert lines(caplog, "shutdown complete") == [{"runs_cancelled": 1}]


def test_a_first_poll_that_fails_is_said_with_its_poller_and_error(
    harness: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    """Not a provider's refusal (the poller takes those itself): a bug in the read."""
    bug = RuntimeError("injected: a reader bug")
    harness.tracker.fail_next("list_work_items", bug)
    engine = harness.engine()
    engine.start()
    engine.stop()
    assert lines(caplog, "first poll failed") == [{"poller": "work_items", "error": repr(bug)}]


def test_a_pollers_wait_skip_resume_and_changes_are_said_word_for_word() -> None:
    """A refusal that asks for 90.46 s (said rounded to a tenth), a cycle skipped meanwhile,
    the resumption, an entity changed, an unchanged cycle, an entity removed."""
    reader = Reader(ProviderError("limited", status=403, retry_after=90.46))
    clock, events = Clock(), []
    listed = [REVISION]
    poller = revision_poller(reader, EngineState, events.append, interval=30)
    poller.clock = clock
    with capture_logs() as logs:
        poller.poll()
        clock.now += 30
        poller.poll()
        clock.now += 61
        poller.poll()  # reports REVISION as changed (the state never learns it)
    said = [(line.pop("event"), line) for line in logs]
    assert said == [
        ("poller cycle start", {"poller": "revisions", "cycle": 1, "log_level": "debug"}),
        (
            "provider API error",
            {
                "poller": "revisions",
                "method": None,
                "error": "limited (status 403)",
                "log_level": "error",
            },
        ),
        (
            "poller waits as the provider asked",
            {"poller": "revisions", "wait_s": 90.5, "log_level": "warning"},
        ),
        (
            "poller cycle skipped: waiting for the provider",
            {"poller": "revisions", "log_level": "debug"},
        ),
        ("poller resumes after the provider's wait", {"poller": "revisions", "log_level": "info"}),
        ("poller cycle start", {"poller": "revisions", "cycle": 3, "log_level": "debug"}),
        (
            "change detected",
            {"poller": "revisions", "change": "changed", "id": "7", "log_level": "info"},
        ),
    ]

    class Listing:
        def list_revisions(self) -> list[Any]:
            return listed

    known = EngineState(revisions={REVISION.id: REVISION})
    quiet = revision_poller(Listing(), lambda: known, events.append, interval=30)
    with capture_logs() as logs:
        quiet.poll()  # nothing new
        listed.clear()
        quiet.poll()  # REVISION is gone
    assert [line["cycle"] for line in logs if line["event"] == "no changes detected"] == [1]
    said = [(line.pop("event"), line) for line in logs if line["log_level"] != "debug"]
    assert said == [
        (
            "change detected",
            {"poller": "revisions", "change": "removed", "id": "7", "log_level": "info"},
        )
    ]

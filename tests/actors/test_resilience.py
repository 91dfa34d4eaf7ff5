"""What must survive failures: queued events across engine and queue restarts, a crashing
session (an AgentFailed, not a restart), a process restart (nothing re-planned), and the exit
codes a process supervisor acts on."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from actors.config import PollerSettings
from actors.executor import ExecutorActor
from actors.journal import Journal
from actors.session_actor import AgentSession
from domain.events import AgentFailed, UserTransitionedStatus
from tests.actors.conftest import Harness, crash_queue_once, wait_until
from tests.actors.test_engine import journal_types

ROOT = Path(__file__).resolve().parents[2]


def _run_status(engine: Any, session_id: str) -> str | None:
    run = engine.get_state().agent_runs.get(session_id)
    return run.status if run else None


def _statuses(engine: Any) -> dict[str, str]:
    return {wid: item.status for wid, item in engine.get_state().work_items.items()}


def test_a_crashed_engine_is_restarted_and_no_queued_event_is_lost(harness: Harness) -> None:
    for wid in "123":
        harness.tracker.add_item(wid, "blocked")
    engine = harness.engine()
    engine.start()
    assert engine.inbox.wait_idle(30)
    crashed: list[str] = []

    def crash_once(event: Any, state: Any) -> list[Any]:
        if isinstance(event, UserTransitionedStatus) and event.work_item_id == "2" and not crashed:
            crashed.append("engine")
            raise RuntimeError("injected: the engine dies mid-event")
        return []

    engine.loop.handlers = (crash_once, *engine.handlers)
    engine.pause()
    for wid in "123":
        engine.enqueue(UserTransitionedStatus.model_validate({"work_item_id": wid, "to": "done"}))
    engine.resume()
    wait_until(lambda: set(_statuses(engine).values()) == {"done"}, engine)
    assert crashed == ["engine"]
    assert engine.supervisor.generation("engine") == 2
    assert engine.supervisor.generation("event_queue") == 1  # one_for_one


def test_a_crashed_executor_is_restarted_its_command_fails_and_the_next_is_made(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The executor actor dies executing a status change: the engine gets a CommandFailed for
    it (no hang), the supervisor restarts the executor under its own child id, and the next
    command goes through the new one."""
    for wid in "12":
        harness.tracker.add_item(wid, "blocked")
    engine = harness.engine()
    engine.start()
    assert engine.inbox.wait_idle(30)
    real = ExecutorActor.on_receive
    crashed: list[bool] = []

    def on_receive(self: ExecutorActor, message: Any) -> Any:
        if not crashed:
            crashed.append(True)
            raise RuntimeError("injected: the executor dies mid-command")
        return real(self, message)

    monkeypatch.setattr(ExecutorActor, "on_receive", on_receive)
    engine.enqueue(UserTransitionedStatus.model_validate({"work_item_id": "1", "to": "done"}))
    wait_until(lambda: "CommandFailed" in journal_types(engine), engine)
    assert engine.supervisor.wait_until(lambda: engine.supervisor.generation("executor") == 2, 30)
    engine.enqueue(UserTransitionedStatus.model_validate({"work_item_id": "2", "to": "done"}))
    wait_until(lambda: harness.tracker.work_items["2"].status == "done", engine)
    assert crashed == [True]


def test_a_crashed_queue_is_restarted_and_no_queued_event_is_lost(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    for wid in "123":
        harness.tracker.add_item(wid, "blocked")
    engine = harness.engine()
    engine.start()
    assert engine.inbox.wait_idle(30)
    crashed: list[bool] = []
    crash_queue_once(monkeypatch, crashed, "injected: the queue dies")
    for wid in "123":
        engine.enqueue(UserTransitionedStatus.model_validate({"work_item_id": wid, "to": "done"}))
    wait_until(lambda: set(_statuses(engine).values()) == {"done"}, engine)
    assert crashed == [True]
    assert engine.supervisor.generation("event_queue") == 2


def test_a_crashing_session_becomes_agent_failed_not_a_restart(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    harness.tracker.add_item("1")
    engine = harness.engine()

    original = AgentSession.on_receive

    def crash_on_started(self: AgentSession, message: Any) -> Any:
        if type(message).__name__ == "_RunEnded":
            raise RuntimeError("injected: the session dies")
        return original(self, message)

    monkeypatch.setattr(AgentSession, "on_receive", crash_on_started)
    engine.start()
    run = harness.runtime.wait_run()
    run.complete()
    wait_until(lambda: _run_status(engine, run.session_id) == "failed", engine)
    failed = [
        e.event
        for e in Journal(engine.config.journal_path).entries()
        if isinstance(e.event, AgentFailed)
    ]
    assert len(failed) == 1
    assert "session crashed" in failed[0].reason
    sup = engine.supervisor
    child = f"session:{run.session_id}"
    assert sup.wait_until(lambda: child not in sup.child_ids(), timeout=30)  # and not restarted


def test_a_restart_with_the_same_journal_replans_nothing_already_planned(harness: Harness) -> None:
    harness.tracker.add_spec("specs/a.md", "b1")
    harness.script(
        auto=lambda p: (
            __import__("tests.fakes.runtime", fromlist=["x"]).default_result(p)
            if p.role == "planner"
            else None
        )
    )
    first = harness.engine()
    first.start()
    wait_until(lambda: first.get_state().last_planned_shas.get("specs/a.md") == "b1", first)
    first.stop()
    planner_runs = [r for r in harness.runtime.runs.values() if r.params.role == "planner"]
    assert len(planner_runs) == 1
    created = harness.tracker.calls["create_work_item"]

    second = harness.engine()
    second.start()
    assert second.inbox.wait_idle(30)
    assert second.get_state().last_planned_shas == {"specs/a.md": "b1"}
    # A dispatch would have queued its AgentRequested while its event was processed, so after
    # wait_idle the state holds every planner run there is: the one restored from the journal.
    planners = [r for r in second.get_state().agent_runs.values() if r.role == "planner"]
    assert [r.session_id for r in planners] == [planner_runs[0].session_id]
    assert [r for r in harness.runtime.runs.values() if r.params.role == "planner"] == planner_runs
    assert harness.tracker.calls["create_work_item"] == created


KILLED = """
import sys, threading
from actors.config import EngineConfig, PollerSettings
from actors.engine import create_engine
from tests.fakes.provider import fake_provider
from tests.fakes.runtime import FakeRuntime, Script, fake_runtimes

tracker, provider = fake_provider()
tracker.add_item("1")
runtime = FakeRuntime(Script(block_start=lambda p: True))
off = PollerSettings(poll_interval=0)
engine = create_engine(EngineConfig(
    provider=provider, create_runtime_adapters=fake_runtimes(runtime), journal_path=sys.argv[1],
    work_item_poller=off, revision_poller=off, spec_poller=off,
))
requested = threading.Event()
engine.subscribe(lambda s: requested.set() if s.agent_runs else None)
engine.start()
requested.wait(60)
print("RUNNING", flush=True)
threading.Event().wait(600)
"""


def test_a_run_active_when_the_process_was_killed_is_failed_on_restart(
    harness: Harness, tmp_path: Path
) -> None:
    journal_path = str(tmp_path / "journal.sqlite3")
    child = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(KILLED), journal_path],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert child.stdout is not None
        # the child logs to stdout too, from other threads: its word that the run is active
        # may share a line with a log line
        assert any("RUNNING" in line for line in iter(child.stdout.readline, ""))
    finally:
        child.kill()  # SIGKILL: nothing of the shutdown runs
        child.wait(60)
        if child.stdout is not None:
            child.stdout.close()
    harness.tracker.add_item("1", "in-progress")
    engine = harness.engine(journal_path=journal_path)
    engine.start()
    # the killed process's run is failed (a new one may already be requested for the item)
    wait_until(
        lambda: any(r.status == "failed" for r in engine.get_state().agent_runs.values()), engine
    )
    [run] = [r for r in engine.get_state().agent_runs.values() if r.status == "failed"]
    assert "interrupted" in (run.failure_reason or "")
    # the item goes back to pending and a new run starts for it
    wait_until(lambda: len(harness.runtime.runs) == 1, engine)
    wait_until(lambda: harness.tracker.work_items["1"].status == "in-progress", engine)
    # put back to pending once: the first poll read the item in-progress before the failure
    # put it back, and that stale reading does not undo the write in the state (and have it
    # made again). (The killed process's own in-progress write may be resumed first.)
    transitions = [args for method, args in harness.tracker.log if method == "transition_status"]
    assert transitions.count(("1", "pending")) == 1, transitions
    assert transitions[-2:] == [("1", "pending"), ("1", "in-progress")]


GIVE_UP = """
import sys
from actors.config import EngineConfig, PollerSettings
from actors.engine import create_engine
from actors.process import run_engine
from actors.settings import SupervisorSettings
from tests.fakes.provider import fake_provider
from tests.fakes.runtime import FakeRuntime, fake_runtimes

tracker, provider = fake_provider()
def broken():
    raise RuntimeError("the provider library is broken")
provider.work_item_reader.list_work_items = broken
config = EngineConfig(
    provider=provider,
    create_runtime_adapters=fake_runtimes(FakeRuntime()),
    work_item_poller=PollerSettings(poll_interval=0.05),
    supervisor=SupervisorSettings(max_restarts=2, backoff_initial=0, jitter=0),
)
sys.exit(run_engine(lambda: create_engine(config)))
"""

BAD_CONFIG = """
import sys
from adapters.cli.settings import load_config
from actors.process import run_engine

def build():
    load_config(sys.argv[1])
    raise AssertionError("a bad config must not load")
sys.exit(run_engine(build))
"""


def _python(code: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code), *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_past_the_restart_intensity_the_process_exits_75() -> None:
    result = _python(GIVE_UP)
    assert result.returncode == 75, result.stderr[-2000:]
    assert "restart intensity exceeded" in result.stdout + result.stderr


def test_a_bad_configuration_exits_78_naming_the_key(tmp_path: Path) -> None:
    config = tmp_path / "supervisor.toml"
    config.write_text('[workflow]\nmax_attempts = "three"\n[provider]\nkind = "gitlub"\n')
    result = _python(BAD_CONFIG, str(config))
    assert result.returncode == 78
    assert "workflow.max_attempts" in result.stderr
    assert "provider.kind" in result.stderr
    assert "'local', 'github', 'gitlab', 'linear' or 'jira'" in result.stderr


def test_a_crashing_poller_is_restarted_after_its_backoff_and_the_others_keep_running(
    harness: Harness,
) -> None:
    harness.tracker.add_item("1", "done")
    harness.tracker.fail_next("list_work_items", RuntimeError("injected: a provider bug"))
    engine = harness.engine(work_item_poller=PollerSettings(poll_interval=0.05))
    engine.start()
    sup = engine.supervisor
    assert sup.wait_until(lambda: sup.generation("poller:work_items") == 2, timeout=30)
    assert sup.generation("poller:revisions") == 1
    assert sup.generation("poller:specs") == 1
    assert sup.generation("engine") == 1
    # the restarted poller polls again on its timer and the item arrives
    wait_until(lambda: "1" in engine.get_state().work_items, engine)

"""Seed 002, end to end through the real actors: processing loop, startup, shutdown, agent run
handles, wiring and configuration. Fakes stand in for the provider and the runtime."""

from __future__ import annotations

import os
import threading
from typing import Any

import pytest

from actors.config import EngineConfig
from actors.engine import create_engine
from actors.journal import Journal
from domain.errors import ConfigError, JournalError
from domain.events import (
    AgentFailed,
    CommandRejected,
    ReviewPosted,
    StatusTransitioned,
    UserRequestedImplementorRun,
    UserTransitionedStatus,
    WorkItemChanged,
)
from domain.models import Revision, RevisionFile
from domain.policy import AllowAll, DenyCommands
from tests.actors.conftest import Harness, wait_until
from tests.fakes.provider import fake_provider
from tests.fakes.runtime import FakeRuntime, fake_runtimes


def journal(engine: Any) -> Journal:
    """A fresh connection to the engine's journal (readable after the engine closed its own)."""
    return Journal(engine.config.journal_path)


def journal_types(engine: Any) -> list[str]:
    return [entry.event.type for entry in journal(engine).entries()]


# ---------------------------------------------------------------------------- processing loop


@pytest.mark.spec("S002-01")
@pytest.mark.spec("S002-02")
def test_an_event_is_fully_processed_before_the_next_and_results_come_after(
    harness: Harness,
) -> None:
    harness.tracker.add_item("1", "blocked")
    harness.tracker.add_item("2", "blocked")
    engine = harness.engine()
    gate = threading.Event()
    order: list[str] = []
    writer = engine.provider.work_item_writer
    real = writer.transition_status

    def gated(wid: Any, to: Any) -> None:
        order.append(f"write {wid}")
        if wid == "1":
            gate.wait(30)
        real(wid, to)

    writer.transition_status = gated
    applied: list[str] = []  # the order the loop applies events in: its processing order
    apply = engine.store.apply

    def recording_apply(event: Any) -> Any:
        applied.append(f"{event.type} {getattr(event, 'work_item_id', '')}")
        return apply(event)

    engine.store.apply = recording_apply  # type: ignore[method-assign]
    engine.start()
    assert engine.inbox.wait_idle(30)
    applied.clear()
    engine.enqueue(UserTransitionedStatus.model_validate({"work_item_id": "1", "to": "done"}))
    wait_until(lambda: order == ["write 1"], engine)
    second = engine.inbox.put(
        UserTransitionedStatus.model_validate({"work_item_id": "2", "to": "done"})
    )
    # queued and journaled, but not taken while the first event's commands still run
    assert second is not None
    assert engine.journal.processed_seq() < second
    assert order == ["write 1"]
    gate.set()
    wait_until(lambda: engine.get_state().work_items["2"].status == "done", engine)
    assert engine.inbox.wait_idle(30)  # the last cycle's results are journaled too
    assert order == ["write 1", "write 2"]
    tail = [
        t for t in journal_types(engine) if t in ("UserTransitionedStatus", "StatusTransitioned")
    ]
    # a result is processed in a later cycle, behind what was already queued: never inside
    # the cycle of the event whose command produced it
    assert applied == [
        "UserTransitionedStatus 1",
        "UserTransitionedStatus 2",
        "StatusTransitioned 1",
        "StatusTransitioned 2",
    ]
    # both user events were processed before either result: results come in later cycles
    assert tail == [
        "UserTransitionedStatus",
        "UserTransitionedStatus",
        "StatusTransitioned",
        "StatusTransitioned",
    ]


@pytest.mark.spec("S002-03")
def test_all_commands_of_one_event_get_the_same_snapshot(harness: Harness) -> None:
    seen: list[tuple[str, int]] = []

    class Spy(AllowAll):
        def check(self, command: Any, state: Any) -> Any:
            seen.append((command.type, id(state)))
            return super().check(command, state)

    harness.tracker.add_item("1", "in-review")
    harness.tracker.revisions["r1"] = Revision.model_validate(
        {
            "id": "r1",
            "title": "t",
            "work_item_id": "1",
            "branch": "b",
            "head_sha": "h1",
            "pipeline": {"status": "success"},
            "reviewed_sha": "h1",
        }
    )
    engine = harness.engine(policy=Spy())
    engine.start()
    wait_until(lambda: "r1" in engine.get_state().revisions, engine)
    seen.clear()
    engine.enqueue(
        ReviewPosted.model_validate({"revision_id": "r1", "head_sha": "h1", "verdict": "approve"})
    )
    wait_until(lambda: harness.tracker.calls["merge"] == 1, engine)
    first_two = seen[:2]
    assert [t for t, _ in first_two] == ["TransitionStatus", "MergeRevision"]
    assert first_two[0][1] == first_two[1][1]


@pytest.mark.spec("S002-04")
def test_a_user_run_request_goes_through_policy(harness: Harness) -> None:
    harness.tracker.add_item("1", "blocked")
    engine = harness.engine(policy=DenyCommands(["StartAgent"], "no agents today"))
    engine.start()
    engine.enqueue(UserRequestedImplementorRun.model_validate({"work_item_id": "1"}))
    wait_until(lambda: "CommandRejected" in journal_types(engine), engine)
    rejected = [e.event for e in journal(engine).entries() if isinstance(e.event, CommandRejected)]
    assert "no agents today" in rejected[0].reason
    assert harness.runtime.runs == {}


@pytest.mark.spec("S002-04")
def test_a_user_run_request_goes_through_the_concurrency_guards(harness: Harness) -> None:
    harness.tracker.add_item("1", "blocked")
    engine = harness.engine()
    engine.start()
    engine.pause()
    request = UserRequestedImplementorRun.model_validate({"work_item_id": "1"})
    engine.enqueue(request)
    engine.enqueue(request)
    engine.resume()
    wait_until(lambda: "CommandRejected" in journal_types(engine), engine)
    rejected = [e.event for e in journal(engine).entries() if isinstance(e.event, CommandRejected)]
    assert "already active for work item 1" in rejected[0].reason
    assert len(harness.runtime.wait_runs(1)) == 1
    assert len(engine.sessions.active()) == 1


# ---------------------------------------------------------------------------- startup


@pytest.mark.spec("S002-05")
@pytest.mark.spec("S002-07")
def test_start_returns_after_the_first_poll_of_all_three_pollers(harness: Harness) -> None:
    harness.tracker.add_item("1", "done")
    harness.tracker.revisions["r1"] = Revision.model_validate(
        {
            "id": "r1",
            "title": "t",
            "work_item_id": "1",
            "branch": "b",
            "head_sha": "h",
            "state": "merged",
        }
    )
    harness.tracker.add_spec("specs/a.md", "b1")
    engine = harness.engine()
    engine.start()
    # no waiting: when start() returns, the first poll of each poller is done and what it
    # detected is in the store
    assert [p.cycles for p in engine.pollers] == [1, 1, 1]
    state = engine.get_state()
    assert set(state.work_items) == {"1"}
    assert set(state.revisions) == {"r1"}
    assert set(state.specs) == {"specs/a.md"}


@pytest.mark.spec("S002-06")
def test_an_in_progress_item_without_a_run_goes_back_to_pending_through_the_loop(
    harness: Harness,
) -> None:
    harness.tracker.add_item("1", "in-progress")
    harness.script(block_start=lambda p: True)
    engine = harness.engine()
    engine.start()
    wait_until(lambda: ("transition_status", ("1", "pending")) in harness.tracker.log, engine)
    assert engine.inbox.wait_idle(30)  # every cycle's results are journaled
    types = journal_types(engine)
    assert types.index("WorkItemChanged") < types.index("StatusTransitioned")


# ---------------------------------------------------------------------------- shutdown


@pytest.mark.spec("S002-08")
@pytest.mark.spec("S002-11")
def test_stop_cancels_active_runs_first_and_processes_their_terminal_events(
    harness: Harness,
) -> None:
    harness.tracker.add_item("1")
    engine = harness.engine()
    pollers_alive_at_cancel: list[bool] = []
    harness.runtime.on_cancel = lambda sid: pollers_alive_at_cancel.append(
        all(engine.supervisor.ref(f"poller:{p.name}") is not None for p in engine.pollers)
    )
    engine.start()
    run = harness.runtime.wait_run()
    engine.stop()
    assert pollers_alive_at_cancel == [True]
    failed = [e for e in journal(engine).entries() if isinstance(e.event, AgentFailed)]
    assert [e.event.kind for e in failed] == ["cancelled"]
    assert engine.get_state().agent_runs[run.session_id].status == "cancelled"
    # the drain processed it fully: the item was put back to pending on the provider
    assert harness.tracker.work_items["1"].status == "pending"


@pytest.mark.spec("S002-09")
def test_stop_abandons_runs_that_do_not_end_within_the_shutdown_timeout(
    harness: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    harness.tracker.add_item("1")
    harness.script(ignore_cancel=lambda p: True)
    # the session's own cancel grace is far beyond the shutdown timeout: only the shutdown
    # timeout can end the wait
    engine = harness.engine(shutdown_timeout=0.5, cancel_grace=120)
    engine.start()
    run = harness.runtime.wait_run()
    engine.stop()
    assert engine.stopped
    assert engine.wait(0) == 0
    abandoned = [
        r.msg
        for r in caplog.records
        if isinstance(r.msg, dict) and r.msg.get("event", "").endswith("abandoned")
    ]
    assert [a["runs"] for a in abandoned] == [[run.session_id]], "abandoned, not awaited"
    assert engine.supervisor is not None
    assert engine.supervisor.ref("engine") is None, "the processing loop terminated"


@pytest.mark.spec("S002-10")
def test_events_are_rejected_once_shutdown_begins_except_terminal_ones(harness: Harness) -> None:
    harness.tracker.add_item("1")
    harness.script(ignore_cancel=lambda p: True)
    engine = harness.engine(shutdown_timeout=30, cancel_grace=30)
    engine.start()
    run = harness.runtime.wait_run()
    stopper = threading.Thread(target=engine.stop)
    stopper.start()
    wait_until(lambda: engine.inbox.closed and bool(harness.runtime.cancels), engine)
    assert (
        engine.enqueue(
            WorkItemChanged.model_validate({"work_item": harness.tracker.work_items["1"]})
        )
        is False
    )
    run.fail("cancelled", "finally")  # its terminal event is still accepted and processed
    stopper.join(60)
    assert not stopper.is_alive()
    assert engine.get_state().agent_runs[run.session_id].status == "cancelled"
    assert (
        engine.enqueue(UserRequestedImplementorRun.model_validate({"work_item_id": "1"})) is False
    )


# ---------------------------------------------------------------------------- agent run handles


@pytest.mark.spec("S002-12")
@pytest.mark.spec("S002-13")
def test_the_agent_stream_is_there_while_the_run_is_and_gone_after(harness: Harness) -> None:
    harness.tracker.add_item("1")
    engine = harness.engine()
    engine.start()
    run = harness.runtime.wait_run()
    wait_until(lambda: engine.get_agent_stream(run.session_id) is not None, engine)
    stream = engine.get_agent_stream(run.session_id)
    run.say("hello ")
    run.say("world")
    run.complete()
    assert "".join(stream) == "hello world"
    wait_until(lambda: engine.get_agent_stream(run.session_id) is None, engine)


@pytest.mark.spec("S002-14")
def test_there_is_no_agent_stream_before_the_runtime_returns_a_handle(harness: Harness) -> None:
    harness.tracker.add_item("1")
    harness.script(block_start=lambda p: True)
    engine = harness.engine()
    engine.start()
    wait_until(lambda: bool(engine.get_state().agent_runs), engine)
    [sid] = engine.get_state().agent_runs
    harness.runtime.wait_starting(sid)  # the session is inside start_agent, which holds
    assert engine.get_state().agent_runs[sid].status == "requested"
    assert engine.get_agent_stream(sid) is None
    harness.runtime.release_start.set()
    harness.runtime.wait_run()
    wait_until(lambda: engine.get_agent_stream(sid) is not None, engine)


def test_an_unknown_session_has_no_stream(harness: Harness) -> None:
    engine = harness.engine()
    engine.start()
    assert engine.get_agent_stream("nope") is None


# ---------------------------------------------------------------------------- wiring


@pytest.mark.spec("S002-15")
@pytest.mark.spec("S002-22")
def test_readers_go_to_pollers_and_writers_to_the_executor(harness: Harness) -> None:
    engine = harness.engine()
    p = engine.provider
    assert [poller.reader for poller in engine.pollers] == [
        p.work_item_reader,
        p.revision_reader,
        p.spec_reader,
    ]
    assert engine.executor.work_item_writer is p.work_item_writer
    assert engine.executor.revision_writer is p.revision_writer
    writers = {id(p.work_item_writer), id(p.revision_writer)}
    readers = {id(p.work_item_reader), id(p.revision_reader), id(p.spec_reader)}
    for poller in engine.pollers:
        assert id(poller.reader) not in writers
    assert not {id(v) for v in vars(engine.executor).values()} & readers


@pytest.mark.spec("S002-16")
def test_engine_store_is_the_subscribable_state_store(harness: Harness) -> None:
    engine = harness.engine()
    seen: list[object] = []
    unsubscribe = engine.store.subscribe(seen.append)
    harness.tracker.add_item("1", "done")
    engine.start()
    wait_until(lambda: bool(seen), engine)
    assert seen[-1] is engine.store.get_state()
    assert engine.store.get_state() is engine.get_state()
    unsubscribe()


@pytest.mark.spec("S002-17")
@pytest.mark.spec("S002-18")
def test_detail_queries_delegate_to_the_readers_without_caching(harness: Harness) -> None:
    harness.tracker.add_item("1", body="first")
    harness.tracker.files["r1"] = [RevisionFile(path="a.py", status="added", patch="+x")]
    engine = harness.engine()
    assert engine.get_work_item_body("1") == "first"
    harness.tracker.bodies["1"] = "second"
    assert engine.get_work_item_body("1") == "second"
    assert engine.get_revision_files("r1")[0].path == "a.py"
    harness.tracker.files["r1"] = []
    assert list(engine.get_revision_files("r1")) == []
    assert harness.tracker.calls["get_work_item_body"] == 2
    assert harness.tracker.calls["get_revision_files"] == 2


# ---------------------------------------------------------------------------- configuration


@pytest.mark.spec("S002-19")
@pytest.mark.parametrize(
    "missing",
    ["work_item_reader", "work_item_writer", "revision_reader", "revision_writer", "spec_reader"],
)
def test_create_engine_names_a_missing_provider_interface(harness: Harness, missing: str) -> None:
    _, provider = fake_provider()
    interfaces = {
        k: getattr(provider, k)
        for k in (
            "work_item_reader",
            "work_item_writer",
            "revision_reader",
            "revision_writer",
            "spec_reader",
        )
    }
    interfaces.pop(missing)
    with pytest.raises(ConfigError, match=rf"provider\.{missing}: missing"):
        create_engine(
            EngineConfig(
                provider=None, create_runtime_adapters=fake_runtimes(harness.runtime)
            ).model_copy(update={"provider": interfaces})
        )


def test_create_engine_names_an_interface_that_does_not_implement_its_port(
    harness: Harness,
) -> None:
    _, provider = fake_provider()
    interfaces = dict(vars(provider))
    interfaces["spec_reader"] = object()
    with pytest.raises(
        ConfigError, match=r"provider\.spec_reader: object does not implement SpecProviderReader"
    ):
        create_engine(
            EngineConfig(create_runtime_adapters=fake_runtimes(harness.runtime)).model_copy(
                update={"provider": interfaces}
            )
        )


@pytest.mark.spec("S002-20")
def test_create_engine_requires_the_runtime_adapter_factory() -> None:
    _, provider = fake_provider()
    with pytest.raises(ConfigError, match="create_runtime_adapters: missing"):
        create_engine(EngineConfig(provider=provider))


def test_create_engine_names_a_role_the_factory_left_out() -> None:
    _, provider = fake_provider()
    runtime = FakeRuntime()
    with pytest.raises(ConfigError, match="no adapter for the reviewer role"):
        create_engine(
            EngineConfig(
                provider=provider,
                create_runtime_adapters=lambda deps: {"planner": runtime, "implementor": runtime},
            )
        )


@pytest.mark.spec("S002-21")
def test_the_runtime_factory_gets_the_stores_get_state_and_the_readers(harness: Harness) -> None:
    engine = harness.engine()
    deps = harness.runtime.deps
    assert deps.get_state == engine.store.get_state
    assert deps.work_item_reader is engine.provider.work_item_reader
    assert deps.revision_reader is engine.provider.revision_reader
    assert deps.get_review_history == engine.provider.revision_reader.get_review_history


@pytest.mark.spec("S002-23")
def test_without_a_policy_every_command_is_allowed(harness: Harness) -> None:
    engine = harness.engine()
    assert isinstance(engine.executor.policy, AllowAll)


@pytest.mark.spec("S002-24")
def test_refresh_polls_all_three_pollers_at_once(harness: Harness) -> None:
    engine = harness.engine()
    engine.start()
    assert [p.cycles for p in engine.pollers] == [1, 1, 1]
    engine.refresh()
    wait_until(lambda: [p.cycles for p in engine.pollers] == [2, 2, 2], engine)


def test_status_transitioned_results_are_journaled(harness: Harness) -> None:
    harness.tracker.add_item("1", "blocked")
    engine = harness.engine()
    engine.start()
    engine.enqueue(UserTransitionedStatus.model_validate({"work_item_id": "1", "to": "pending"}))
    wait_until(
        lambda: any(isinstance(e.event, StatusTransitioned) for e in journal(engine).entries()),
        engine,
    )


def test_start_lets_the_runtime_reap_leftovers_but_keep_open_revision_branches(
    harness: Harness,
) -> None:
    for rid, state in (("r1", "open"), ("r2", "merged")):
        harness.tracker.revisions[rid] = Revision.model_validate(
            {
                "id": rid,
                "title": "t",
                "work_item_id": "1",
                "branch": f"cpe/{rid}",
                "head_sha": "h",
                "state": state,
            }
        )
    engine = harness.engine()
    engine.start()
    assert harness.runtime.reaped == 1
    assert harness.runtime.kept == frozenset({"cpe/r1"})


def test_a_second_engine_on_the_same_journal_is_refused_until_the_first_stops(
    harness: Harness,
) -> None:
    first = harness.engine()
    first.start()
    second = harness.engine()
    with pytest.raises(JournalError, match=rf"in use by another cpe \(pid {os.getpid()}\)"):
        second.start()
    first.stop()
    third = harness.engine()
    third.start()  # the lock went with the first engine's stop
    assert third.inbox.wait_idle(30)

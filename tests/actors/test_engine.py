"""Seed 002, end to end through the real actors: processing loop, startup, shutdown, agent run
handles, wiring and configuration. Fakes stand in for the provider and the runtime."""

from __future__ import annotations

import os
import threading
from collections import Counter
from datetime import UTC, datetime
from typing import Any

import pytest

from actors.config import EngineConfig, PollerSettings
from actors.engine import create_engine
from actors.journal import Journal
from actors.settings import BreakerSettings, DailyBudget, SupervisorSettings
from domain.errors import ConfigError, JournalError, JournalIOError
from domain.events import (
    AgentFailed,
    CommandRejected,
    ReviewPosted,
    StatusTransitioned,
    UserRequestedImplementorRun,
    UserTransitionedStatus,
    WorkItemChanged,
)
from domain.handlers.options import HandlerOptions
from domain.models import Revision, RevisionFile
from domain.policy import AllowAll, DenyCommands
from domain.results import ImplementorResult
from tests.actors.conftest import Harness, fill_the_disk, wait_until, write_until_refused
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
    assert engine.executor.writes.work_item_writer is p.work_item_writer
    assert engine.executor.writes.revision_writer is p.revision_writer
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
    port = {
        "work_item_reader": "WorkProviderReader",
        "work_item_writer": "WorkProviderWriter",
        "revision_reader": "RevisionProviderReader",
        "revision_writer": "RevisionProviderWriter",
        "spec_reader": "SpecProviderReader",
    }[missing]
    with pytest.raises(ConfigError, match=rf"^provider\.{missing}: missing; expected a {port}$"):
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
    with pytest.raises(
        ConfigError,
        match=r"^create_runtime_adapters: missing; expected a factory \(RuntimeAdapterDeps\) -> "
        r"\{role: RuntimeAdapter\}$",
    ):
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


class NotARuntime:
    pass


@pytest.mark.parametrize(
    ("provider", "factory", "message"),
    [
        (
            None,
            lambda deps: {},
            "provider: missing; expected the interfaces work_item_reader, work_item_writer, "
            "revision_reader, revision_writer, spec_reader",
        ),
        (
            "fake",
            lambda deps: [FakeRuntime()],
            "create_runtime_adapters returned list; expected a mapping {role: RuntimeAdapter}",
        ),
        (
            "fake",
            lambda deps: {"planner": FakeRuntime(), "implementor": FakeRuntime()},
            "create_runtime_adapters: no adapter for the reviewer role; "
            "expected a RuntimeAdapter for planner, implementor and reviewer",
        ),
        (
            "fake",
            lambda deps: dict.fromkeys(("planner", "implementor", "reviewer"), NotARuntime()),
            "create_runtime_adapters: the planner adapter (NotARuntime) does not implement "
            "RuntimeAdapter",
        ),
    ],
)
def test_a_bad_provider_or_runtime_factory_is_refused_saying_what_was_expected(
    provider: Any, factory: Any, message: str
) -> None:
    """The one line a person reads when an embedding of the engine is wired wrong."""
    if provider == "fake":
        _, provider = fake_provider()
    config = EngineConfig(create_runtime_adapters=factory).model_copy(update={"provider": provider})
    with pytest.raises(ConfigError) as caught:
        create_engine(config)
    assert str(caught.value) == message


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


# ---------------------------------------------------------------------------- reload


ONE_EACH = {"planner": 1, "implementor": 1, "reviewer": 1}


def _reload(engine: Any, handlers: HandlerOptions, **settings: Any) -> None:
    """``Engine.reconfigure`` as a reload calls it, with the settings not under test kept."""
    c = engine.config
    engine.reconfigure(
        handlers=handlers,
        poll_intervals=settings.pop("poll_intervals", {}),
        breaker=settings.pop("breaker", c.breaker),
        max_agent_duration=settings.pop("max_agent_duration", c.max_agent_duration),
        shutdown_timeout=settings.pop("shutdown_timeout", c.shutdown_timeout),
        **settings,
    )


def test_a_reload_that_raises_a_cap_starts_the_runs_it_held_back_at_once(
    harness: Harness,
) -> None:
    """The new caps hold from the next event on, and the reload queues one: an item waiting
    for a free slot starts now, not at the next poll (the pollers here have no timer)."""
    for wid in "12":
        harness.tracker.add_item(wid, "pending")
    engine = harness.engine(handlers=HandlerOptions(auto_merge=True, max_concurrent=ONE_EACH))
    engine.start()
    harness.runtime.wait_runs(1)
    wait_until(lambda: "CommandRejected" in journal_types(engine), engine)
    assert engine.inbox.wait_idle(30)
    assert len(harness.runtime.runs) == 1, "the cap holds the second item back"
    before = datetime.now(UTC)
    _reload(engine, HandlerOptions(auto_merge=True, max_concurrent={**ONE_EACH, "implementor": 2}))
    assert len(harness.runtime.wait_runs(2)) == 2
    [due] = [e.event for e in journal(engine).entries() if e.event.type == "DispatchDue"]
    assert due.at is not None
    assert before <= due.at <= datetime.now(UTC), "journaled with when it happened, in UTC"
    assert {r.params.work_item_id for r in harness.runtime.runs.values()} == {"1", "2"}


def test_a_reload_hands_each_setting_to_what_uses_it(harness: Harness) -> None:
    """Workflow options to the handlers and the observer, caps, breaker, backoff and daily
    budget to the executor, the duration limit to new runs, intervals to the pollers named
    (the others keep theirs); a reload without a daily budget keeps the last one."""
    engine = harness.engine()
    handlers = HandlerOptions(
        max_attempts=5,
        retry_backoff_initial=7,
        retry_backoff_max=70,
        max_concurrent={"planner": 1, "implementor": 4, "reviewer": 3},
    )
    breaker = BreakerSettings(failures=9)
    budget = DailyBudget(per_day_usd=12)
    engine.reconfigure(
        handlers=handlers,
        poll_intervals={"work_items": 3.0},
        breaker=breaker,
        max_agent_duration=123,
        shutdown_timeout=45,
        daily_budget=budget,
    )
    assert (
        engine.config.handlers,
        engine.config.breaker,
        engine.config.max_agent_duration,
        engine.config.shutdown_timeout,
    ) == (handlers, breaker, 123, 45)
    assert [h.options for h in engine.loop.handlers] == [handlers] * len(engine.loop.handlers)
    assert engine.loop.handlers == engine.handlers
    assert engine.observer.options == handlers
    assert engine.session_starter.max_duration == 123
    executor = engine.executor
    assert executor.max_concurrent == {"planner": 1, "implementor": 4, "reviewer": 3}
    assert (executor.breaker, executor.daily_budget) == (breaker, budget)
    assert executor.retry_backoff == (7, 70)
    assert {p.name: p.interval for p in engine.pollers} == {
        "work_items": 3.0,
        "revisions": 0,
        "specs": 0,
    }
    _reload(engine, handlers)
    assert executor.daily_budget == budget


# ---------------------------------------------------------------------------- stopping on its own


def test_supervision_that_gives_up_stops_the_engine_with_75_and_it_takes_no_more_events(
    harness: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    """75 (EX_TEMPFAIL): the process supervisor restarts cpe. A disk that refuses the journal
    after that (a late write) does not turn it into 74: the engine has stopped already."""
    harness.tracker.add_item("1", "blocked")
    engine = harness.engine(
        work_item_poller=PollerSettings(poll_interval=0.02),
        supervisor=SupervisorSettings(max_restarts=2, backoff_initial=0, jitter=0),
    )
    engine.start()
    bug = RuntimeError("injected: a provider bug")
    harness.tracker.fail_next("list_work_items", *[bug] * 10)
    assert engine.wait(30) == 75
    assert not engine.enqueue(UserTransitionedStatus(work_item_id="1", to="pending"))
    [gave_up] = [
        r.msg
        for r in caplog.records
        if isinstance(r.msg, dict) and r.msg.get("event") == "supervision gave up; stopping"
    ]
    assert gave_up["error"] == repr(bug)
    fill_the_disk(engine.journal)
    with pytest.raises(JournalIOError):
        write_until_refused(
            lambda: engine.journal.append(StatusTransitioned(work_item_id="1", to="done"))
        )
    assert (engine.wait(0), engine.fatal_error) == (75, None)
    engine.journal.close()


def test_supervision_that_gives_up_on_a_full_disk_says_what_it_could_not_commit(
    harness: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    """Giving up commits what the journal deferred (a cycle's end): when the disk refuses,
    that is one line, and the engine stops as on any refused write (74: fix the disk first)."""
    harness.tracker.add_item("1", "blocked", title="a long title " * 500)
    engine = harness.engine(
        work_item_poller=PollerSettings(poll_interval=0.02),
        supervisor=SupervisorSettings(max_restarts=2, backoff_initial=0, jitter=0),
    )
    engine.start()
    assert engine.inbox.wait_idle(30)
    fill_the_disk(engine.journal)
    item = engine.get_state().work_items["1"]
    cycle = engine.journal.append_and_mark(
        [WorkItemChanged(work_item=item)], engine.journal.last_seq(), defer=True
    )
    harness.tracker.fail_next("list_work_items", *[RuntimeError("a provider bug")] * 10)
    assert engine.wait(30) == 74
    # Said by whoever meets the full disk: giving up (its commit of the deferred records) or,
    # when another thread's write met it a moment before and stopped the engine, the close.
    said = {
        "cannot commit the journal's deferred records",
        "deferred journal writes lost at close",
    }
    lines = [
        r.msg for r in caplog.records if isinstance(r.msg, dict) and r.msg.get("event") in said
    ]
    assert lines, "the deferred records' loss was not said"
    assert all("database or disk is full" in line["error"] for line in lines)
    assert cycle[0] > journal(engine).last_seq(), "the deferred cycle was not committed"
    engine.journal.close()


class SeedRuntime:
    """A runtime adapter of the seed's interface only: start_agent and cancel_agent (no reap)."""

    def __init__(self, runtime: FakeRuntime) -> None:
        self._runtime = runtime

    async def start_agent(self, params: Any) -> Any:
        return await self._runtime.start_agent(params)

    def cancel_agent(self, session_id: Any) -> None:
        self._runtime.cancel_agent(session_id)


def test_a_runtime_adapter_with_only_the_seeds_two_methods_runs_the_work(
    harness: Harness,
) -> None:
    harness.tracker.add_item("1", "pending", title="Greeting")
    harness.script(auto=lambda p: None)  # the default result of each role, at once
    seed = SeedRuntime(harness.runtime)
    engine = harness.engine(
        create_runtime_adapters=lambda deps: dict.fromkeys(
            ("planner", "implementor", "reviewer"), seed
        )
    )
    engine.start()
    wait_until(lambda: engine.get_state().work_items["1"].status == "done", engine)
    assert harness.runtime.reaped == 0  # nothing to reap with: the engine did not ask


# ---------------------------------------------------------------------------- runs that end at once


@pytest.mark.parametrize("outcome", ["validation-failure", "blocked"])
def test_runs_that_end_the_instant_they_start_never_pass_an_items_attempts(
    harness: Harness, outcome: str
) -> None:
    """A run can end before the engine has processed its item's move to in-progress (a CLI
    that cannot start, an agent that gives up at once): a start decided on a state that has not
    taken in the last run's end is refused, and the end's processing decides again. Before,
    one item was started again and again on the stale state: 14 runs of 3 attempts."""
    for n in range(12):
        harness.tracker.add_item(str(n), "pending", title=f"item {n}")
    harness.script(auto=lambda p: ImplementorResult(outcome=outcome, summary="at once"))
    limit = 3
    engine = harness.engine(
        handlers=HandlerOptions(auto_merge=True, max_attempts=limit, max_concurrent={
            "implementor": 4, "reviewer": 1, "planner": 1}, retry_backoff_initial=0.01,
            retry_backoff_max=0.01),
    )  # fmt: skip
    engine.start()

    def settled() -> bool:
        state = engine.get_state()
        return not any(run.is_active for run in state.agent_runs.values()) and all(
            item.status == "blocked" for item in state.work_items.values()
        )

    wait_until(settled, engine, timeout=120)
    assert engine.inbox.wait_idle(60)
    state = engine.get_state()
    runs = Counter(run.work_item_id for run in state.agent_runs.values())
    assert max(runs.values()) <= limit, runs
    assert all(count <= limit for count in state.attempts.values()), state.attempts

"""`run_engine` in this process, as `cpe run` drives it: the exit codes a process supervisor
acts on, the one line on stderr, SIGTERM/SIGINT for a graceful stop, a second SIGINT, and SIGHUP
for a reload. The signals are real ones, raised in this process; the child-process versions of
these tests are tests/e2e/test_cpe_signals.py and tests/adapters/cli/test_errors.py."""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from actors.config import PollerSettings
from actors.engine import Engine
from actors.journal import Journal
from actors.journal_file import InstanceLock
from actors.process import (
    EXIT_CONFIG,
    EXIT_DATAERR,
    EXIT_FORCED,
    EXIT_IOERR,
    EXIT_OK,
    EXIT_TEMPFAIL,
    _Stopper,
    journal_exit,
    run_engine,
)
from actors.settings import SupervisorSettings
from domain.errors import ConfigError, JournalError, JournalIOError
from domain.events import UserTransitionedStatus, WorkItemChanged
from tests.actors.conftest import Harness, fill_the_disk, write_until_refused
from tests.support.journal import journal_with_one_bad_row

SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


@pytest.fixture(autouse=True)
def _signals() -> Iterator[None]:
    """Until ``run_engine`` puts cpe's handlers in place (and after the test) a signal fails
    the test instead of killing or interrupting pytest; the process's own handlers are back
    at the end, whatever ``run_engine`` left."""
    saved = {signum: signal.getsignal(signum) for signum in SIGNALS}

    def stray(signum: int, _: object) -> None:
        raise AssertionError(f"{signal.Signals(signum).name} reached no handler of cpe")

    for signum in SIGNALS:
        signal.signal(signum, stray)
    yield
    for signum, handler in saved.items():
        signal.signal(signum, handler)


@pytest.fixture(autouse=True)
def forced_exits(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The codes cpe would have ended the process with at once (``os._exit``): recorded, so
    that the test goes on and sees how the stop ends."""
    exits: list[int] = []
    monkeypatch.setattr(os, "_exit", exits.append)
    return exits


@pytest.fixture
def logged(caplog: pytest.LogCaptureFixture) -> Callable[[str], list[dict[str, Any]]]:
    """The fields of every log line with this event, in order; the thread's name and the
    exception logged with it added."""

    def lines(event: str) -> list[dict[str, Any]]:
        return [
            {**r.msg, "threadName": r.threadName, "raised": r.exc_info[1] if r.exc_info else None}
            for r in caplog.records
            if isinstance(r.msg, dict) and r.msg.get("event") == event
        ]

    return lines


def test_a_stop_signal_stops_the_started_engine_gracefully_and_exits_0(
    harness: Harness, logged: Callable[[str], list[dict[str, Any]]]
) -> None:
    """SIGTERM (systemd's stop): STOPPING=1 once, then the graceful stop in its own thread."""
    ready: list[Engine] = []
    stopping: list[str] = []

    def on_ready(engine: Engine) -> None:
        ready.append(engine)
        signal.raise_signal(signal.SIGTERM)

    code = run_engine(harness.engine, on_ready=on_ready, on_stopping=lambda: stopping.append("x"))
    assert code == EXIT_OK
    [engine] = harness.engines
    assert ready == [engine]
    assert engine.stopped
    assert stopping == ["x"]
    [received] = logged("signal received; stopping")
    assert received["signal"] == "SIGTERM"
    [shutdown] = logged("shutdown initiated")
    assert shutdown["reason"] == "signal SIGTERM"
    assert shutdown["threadName"] == "cpe-stop"  # not the signal handler's (main) thread


def test_sigint_stops_gracefully_too_and_a_second_one_exits_130_at_once(
    harness: Harness, forced_exits: list[int], logged: Callable[[str], list[dict[str, Any]]]
) -> None:
    """Ctrl-C; a second one while the stop runs (or after it finished) does not wait for it."""

    def on_ready(engine: Engine) -> None:
        signal.raise_signal(signal.SIGINT)
        assert forced_exits == []
        signal.raise_signal(signal.SIGINT)
        assert forced_exits == [EXIT_FORCED]

    assert run_engine(harness.engine, on_ready=on_ready) == EXIT_OK  # here, still running
    [shutdown] = logged("shutdown initiated")
    assert shutdown["reason"] == "signal SIGINT"
    [forced] = logged("second interrupt: exiting without waiting")
    assert forced["signal"] == "SIGINT"
    signal.raise_signal(signal.SIGINT)  # the stop is over; the handler stays: never -2
    assert forced_exits == [EXIT_FORCED, EXIT_FORCED]


def test_a_second_sigterm_while_stopping_changes_nothing(
    harness: Harness, forced_exits: list[int], logged: Callable[[str], list[dict[str, Any]]]
) -> None:
    stopping: list[str] = []

    def on_ready(engine: Engine) -> None:
        signal.raise_signal(signal.SIGTERM)
        signal.raise_signal(signal.SIGTERM)

    code = run_engine(harness.engine, on_ready=on_ready, on_stopping=lambda: stopping.append("x"))
    assert code == EXIT_OK
    assert forced_exits == []
    assert stopping == ["x"]
    assert len(logged("signal received; stopping")) == 1
    assert len(logged("shutdown initiated")) == 1


def test_a_stop_signal_while_the_engine_is_built_stops_it_before_anything_starts(
    harness: Harness, logged: Callable[[str], list[dict[str, Any]]]
) -> None:
    harness.tracker.add_item("1", "pending")
    ready: list[Engine] = []
    stopping: list[str] = []

    def build() -> Engine:
        signal.raise_signal(signal.SIGTERM)
        return harness.engine()

    code = run_engine(build, on_ready=ready.append, on_stopping=lambda: stopping.append("x"))
    assert code == EXIT_OK
    [engine] = harness.engines
    assert engine.stopped
    assert ready == []
    assert stopping == []
    assert harness.tracker.calls["list_work_items"] == 0, "never polled"
    assert harness.runtime.runs == {}
    assert logged("signal received; stopping")[0]["signal"] == "SIGTERM"


def test_a_stop_signal_that_came_before_run_engine_stops_before_anything_starts(
    harness: Harness, logged: Callable[[str], list[dict[str, Any]]]
) -> None:
    """`cpe run` catches SIGTERM from its first moment and hands it over as ``stop_requested``."""
    asked = threading.Event()
    asked.set()
    ready: list[Engine] = []
    assert run_engine(harness.engine, on_ready=ready.append, stop_requested=asked) == EXIT_OK
    [engine] = harness.engines
    assert engine.stopped
    assert ready == []
    assert harness.tracker.calls["list_work_items"] == 0
    assert len(logged("signal received while starting; stopping")) == 1


def test_a_stop_requested_flag_left_unset_lets_the_engine_run(harness: Harness) -> None:
    ready: list[Engine] = []

    def on_ready(engine: Engine) -> None:
        ready.append(engine)
        signal.raise_signal(signal.SIGTERM)

    assert run_engine(harness.engine, on_ready=on_ready, stop_requested=threading.Event()) == 0
    assert ready == harness.engines


def test_a_stop_signal_during_the_start_stops_the_engine_once_the_start_returns(
    harness: Harness, monkeypatch: pytest.MonkeyPatch, logged: Callable[[str], list[dict[str, Any]]]
) -> None:
    """The signal comes while ``start`` runs (here: while the runtimes reap leftovers): the
    start is let finish, then the graceful stop runs; READY=1 is never sent."""
    monkeypatch.setattr(harness.runtime, "reap", lambda keep: signal.raise_signal(signal.SIGTERM))
    ready: list[Engine] = []
    stopping: list[str] = []
    code = run_engine(
        harness.engine, on_ready=ready.append, on_stopping=lambda: stopping.append("x")
    )
    assert code == EXIT_OK
    assert ready == []
    assert stopping == ["x"]
    [shutdown] = logged("shutdown initiated")
    assert shutdown["reason"] == "a signal during the start"


def test_the_tick_runs_while_the_engine_runs_and_never_once_a_stop_was_asked(
    harness: Harness,
) -> None:
    """The tick feeds systemd's watchdog: not during a stop (the engine is busy stopping and
    may not answer). The stop here cancels a run, which takes many ticks of a millisecond."""
    harness.tracker.add_item("1", "pending")
    ticks: list[tuple[Engine, bool]] = []
    asked, third = threading.Event(), threading.Event()

    def stop_anyway() -> None:  # without ticks the test would never end
        if not third.wait(10):
            os.kill(os.getpid(), signal.SIGTERM)

    fallback = threading.Thread(target=stop_anyway)

    def on_ready(engine: Engine) -> None:
        harness.runtime.wait_run()
        fallback.start()

    def on_tick(engine: Engine) -> None:
        ticks.append((engine, asked.is_set()))
        if len(ticks) == 3:
            third.set()
            asked.set()
            signal.raise_signal(signal.SIGTERM)

    code = run_engine(harness.engine, on_ready=on_ready, on_tick=on_tick, tick_seconds=0.001)
    fallback.join(30)
    assert code == EXIT_OK
    [engine] = harness.engines
    assert ticks == [(engine, False)] * 3
    assert harness.runtime.cancels, "the run was cancelled by the stop"


# ---------------------------------------------------------------------------- exit codes


@pytest.mark.parametrize(
    ("error", "code", "line"),
    [
        (
            ConfigError("must be an integer", key_path="workflow.max_attempts"),
            EXIT_CONFIG,
            "cpe: configuration error: workflow.max_attempts: must be an integer",
        ),
        (
            JournalError("j.sqlite3: damaged"),
            EXIT_DATAERR,
            "cpe: journal error: j.sqlite3: damaged",
        ),
        (
            JournalIOError("state: cannot be written"),
            EXIT_IOERR,
            "cpe: journal error: state: cannot be written",
        ),
    ],
    ids=["config", "journal damaged", "journal disk"],
)
def test_an_engine_that_cannot_be_built_is_one_line_on_stderr_and_its_exit_code(
    error: Exception, code: int, line: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """78 (do not restart me), 65 (a restart will not fix it), 74 (fix the disk first)."""

    def build() -> Engine:
        raise error

    assert run_engine(build) == code
    out, err = capsys.readouterr()
    assert (out, err) == ("", line + "\n")


def test_the_exit_code_of_a_journal_error_says_whether_the_disk_refused_it() -> None:
    assert journal_exit(JournalIOError("full")) == EXIT_IOERR
    assert journal_exit(JournalError("damaged")) == EXIT_DATAERR


def test_a_journal_that_cannot_be_restored_is_one_line_and_exit_65_and_frees_the_state(
    harness: Harness, capsys: pytest.CaptureFixture[str]
) -> None:
    path = harness.tmp_path / "journal.sqlite3"
    journal_with_one_bad_row(path, '{"type": "EventFromTheFuture"}')
    ready: list[Engine] = []
    assert run_engine(harness.engine, on_ready=ready.append) == EXIT_DATAERR
    out, err = capsys.readouterr()
    assert out == ""
    assert err == (
        f"cpe: journal error: {path}: event 1 cannot be read: unknown type "
        "'EventFromTheFuture' (damaged, or written by a newer cpe)\n"
    )
    assert ready == []
    lock = InstanceLock(str(path))
    lock.acquire()  # the failed engine let go of its state
    lock.release()


def test_supervision_that_gives_up_exits_75_without_a_line_of_its_own(
    harness: Harness, capsys: pytest.CaptureFixture[str]
) -> None:
    """75 (EX_TEMPFAIL): restart me. The log says why; stderr has no ``cpe:`` line."""

    def build() -> Engine:
        return harness.engine(
            work_item_poller=PollerSettings(poll_interval=0.02),
            supervisor=SupervisorSettings(max_restarts=2, backoff_initial=0, jitter=0),
        )

    def on_ready(engine: Engine) -> None:  # the provider breaks once the engine runs
        harness.tracker.fail_next("list_work_items", *[RuntimeError("a provider bug")] * 10)

    assert run_engine(build, on_ready=on_ready) == EXIT_TEMPFAIL
    assert capsys.readouterr() == ("", "")
    harness.engines[0].journal.close()


def test_a_disk_that_refuses_the_journal_stops_the_engine_with_one_line_and_exit_74(
    harness: Harness,
    capsys: pytest.CaptureFixture[str],
    logged: Callable[[str], list[dict[str, Any]]],
) -> None:
    """Nothing the engine does could be recorded: it stops (not a crash loop, 75), naming the
    journal and what to do. sqlite's page limit stands in for a full disk."""
    harness.tracker.add_item("1", "blocked")
    path = harness.tmp_path / "journal.sqlite3"
    refused: list[JournalIOError] = []

    def on_ready(engine: Engine) -> None:
        fill_the_disk(engine.journal)
        with pytest.raises(JournalIOError) as caught:
            write_until_refused(
                lambda: engine.enqueue(UserTransitionedStatus(work_item_id="1", to="blocked"))
            )
        refused.append(caught.value)

    assert run_engine(harness.engine, on_ready=on_ready) == EXIT_IOERR
    out, err = capsys.readouterr()
    assert out == ""
    assert err.count("\n") == 1
    assert err.startswith(f"cpe: journal error: {path}: ")
    assert err.endswith(
        " (a full or read-only disk?); nothing more could be recorded, so cpe stopped: free "
        "space or fix the state directory, then start it again\n"
    )
    [engine] = harness.engines
    assert engine.exit_code == EXIT_IOERR
    [line] = logged("the journal cannot be written; stopping")
    assert "database or disk is full" in line["error"]
    [shutdown] = logged("shutdown initiated")
    assert shutdown["reason"] == "the journal cannot be written"
    assert shutdown["threadName"] == "cpe-stop-io"


# ---------------------------------------------------------------------------- SIGHUP


def test_sighup_reloads_in_a_thread_of_its_own_once_the_engine_runs(
    harness: Harness, logged: Callable[[str], list[dict[str, Any]]]
) -> None:
    """A reload, never a death (the default action would orphan the agents); the signal
    handler does not wait for it."""
    reloads: list[str] = []
    reloaded = threading.Event()

    def on_reload() -> None:
        reloads.append(threading.current_thread().name)
        reloaded.set()

    def on_ready(engine: Engine) -> None:
        signal.raise_signal(signal.SIGHUP)
        assert reloaded.wait(30)
        signal.raise_signal(signal.SIGTERM)

    assert run_engine(harness.engine, on_ready=on_ready, on_reload=on_reload) == EXIT_OK
    assert reloads == ["cpe-reload"]
    [line] = logged("signal received; reloading the configuration")
    assert line["signal"] == "SIGHUP"


def test_sighup_while_starting_is_made_once_started_and_once_stopping_is_ignored(
    harness: Harness, logged: Callable[[str], list[dict[str, Any]]]
) -> None:
    """A person who saw "cpe started" (said as the start begins) and reloaded at once is not
    ignored: the reload is made when the start is done. After the stop it is ignored."""
    reloads: list[str] = []
    reloaded = threading.Event()

    def build() -> Engine:
        signal.raise_signal(signal.SIGHUP)
        return harness.engine()

    def on_reload() -> None:
        reloads.append(threading.current_thread().name)
        reloaded.set()

    def on_ready(engine: Engine) -> None:
        assert reloaded.wait(30)
        signal.raise_signal(signal.SIGTERM)

    code = run_engine(build, on_ready=on_ready, on_reload=on_reload)
    assert code == EXIT_OK
    signal.raise_signal(signal.SIGHUP)  # stopped: the handler stays, and ignores it
    assert len(logged("SIGHUP while cpe starts: the reload follows the start")) == 1
    assert len(logged("SIGHUP ignored: cpe is stopping")) == 1
    assert reloads == ["cpe-reload"]


def test_sighup_without_a_reload_does_nothing(
    harness: Harness, logged: Callable[[str], list[dict[str, Any]]]
) -> None:
    def on_ready(engine: Engine) -> None:
        signal.raise_signal(signal.SIGHUP)
        signal.raise_signal(signal.SIGTERM)

    assert run_engine(harness.engine, on_ready=on_ready) == EXIT_OK
    assert logged("signal received; reloading the configuration") == []
    assert logged("SIGHUP ignored: cpe is stopping") == []


def test_one_reload_at_a_time_and_a_failed_one_leaves_the_next_possible(
    harness: Harness, logged: Callable[[str], list[dict[str, Any]]]
) -> None:
    """A SIGHUP while a reload runs is dropped; a reload that fails is logged, and cpe runs on
    the last good configuration until the next SIGHUP."""
    calls: list[threading.Thread] = []
    entered, release, second = threading.Event(), threading.Event(), threading.Event()

    def on_reload() -> None:
        calls.append(threading.current_thread())
        if len(calls) == 1:
            entered.set()
            release.wait(30)
            raise ValueError("a broken supervisor.toml")
        second.set()

    def on_ready(engine: Engine) -> None:
        signal.raise_signal(signal.SIGHUP)
        assert entered.wait(30)
        signal.raise_signal(signal.SIGHUP)  # while the first runs: dropped
        release.set()
        calls[0].join(30)
        signal.raise_signal(signal.SIGHUP)
        assert second.wait(30)
        signal.raise_signal(signal.SIGTERM)

    assert run_engine(harness.engine, on_ready=on_ready, on_reload=on_reload) == EXIT_OK
    assert len(calls) == 2
    assert len(logged("signal received; reloading the configuration")) == 2
    [failed] = logged("configuration reload failed; running on the last good one")
    assert str(failed["raised"]) == "a broken supervisor.toml"
    assert failed["threadName"] == "cpe-reload"


# ---------------------------------------------------------------------------- the stopper


def test_a_stop_asked_twice_stops_the_engine_once_and_none_before_it_is_built(
    harness: Harness, logged: Callable[[str], list[dict[str, Any]]]
) -> None:
    """The signal handler and the main thread may both ask; the first one's reason is the
    stop's."""
    stopping: list[str] = []
    stopper = _Stopper(lambda: stopping.append("x"))
    stopper.stop("nothing built yet")
    assert stopping == []
    engine = stopper.engine = harness.engine()
    engine.start()
    stopper.stop("first")
    stopper.stop("second")
    assert engine.wait(30) == EXIT_OK
    assert stopping == ["x"]
    assert [line["reason"] for line in logged("shutdown initiated")] == ["first"]


def test_a_stopper_without_a_stopping_callback_still_stops(harness: Harness) -> None:
    stopper = _Stopper(None)
    engine = stopper.engine = harness.engine()
    engine.start()
    stopper.stop("requested")
    assert engine.wait(30) == EXIT_OK


def test_a_disk_that_refuses_the_journal_at_the_start_is_one_line_and_exit_74(
    harness: Harness, capsys: pytest.CaptureFixture[str]
) -> None:
    """The start's restore stores a snapshot after a long replay; a full disk refuses it."""
    path = harness.tmp_path / "journal.sqlite3"
    journal = Journal(path)
    for wid in "12":
        item = harness.tracker.add_item(wid, "blocked", title="a long title " * 500)
        journal.mark_processed(journal.append(WorkItemChanged(work_item=item)))
    journal.close()
    ready: list[Engine] = []

    def build() -> Engine:
        engine = harness.engine()
        engine.journal.snapshot_every = 2  # a replay of two events is a long one here
        fill_the_disk(engine.journal)
        return engine

    assert run_engine(build, on_ready=ready.append) == EXIT_IOERR
    out, err = capsys.readouterr()
    assert out == ""
    assert err == f"cpe: journal error: {path}: cannot store a snapshot: database or disk is full\n"
    assert ready == []


def test_a_stop_signal_while_the_first_poll_hangs_ends_the_start_without_waiting_for_it(
    harness: Harness, logged: Callable[[str], list[dict[str, Any]]]
) -> None:
    """A provider that does not answer the first poll (GitLab failing, retried) must not hold a
    Ctrl-C for the whole start: the start stops waiting at once, then the graceful stop runs.
    The tracker here answers only once the stop has begun (``on_stopping``): before the fix the
    start waited for it up to ``shutdown_timeout`` (an hour here)."""
    answer = threading.Event()
    call = harness.tracker._call

    def hanging(method: str, *args: object) -> None:
        if method == "list_work_items" and not answer.is_set():
            os.kill(os.getpid(), signal.SIGTERM)  # a Ctrl-C while the first poll waits
            answer.wait(120)
        call(method, *args)

    harness.tracker._call = hanging  # type: ignore[method-assign]
    code = run_engine(lambda: harness.engine(shutdown_timeout=3600), on_stopping=answer.set)
    assert code == EXIT_OK
    [engine] = harness.engines
    assert engine.stopped
    [shutdown] = logged("shutdown initiated")
    assert shutdown["reason"] == "a signal during the start"
    assert logged("start interrupted by a stop: the first poll's events not awaited")

"""`cpe run` under a process supervisor: SIGTERM/SIGINT while an agent is at work, a second
SIGINT, and the systemd notify messages (READY=1, WATCHDOG=1, STOPPING=1). A real process on a
real repository: the real `claude` CLI against the scripted model, or the fake `codex` CLI where
a fault (an agent that ignores SIGTERM) is needed."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from actors.journal import Journal
from actors.process import ABANDONED
from adapters.runtime.process.launcher import read_pid
from domain.state import apply_event
from tests.e2e.running import (
    NotifySocket,
    add_work_item,
    agent_branches,
    agent_runs,
    make_cpe_repo,
    start_cpe,
    start_cpe_with_a_hanging_implementor,
    wait_for,
    worktrees,
)
from tests.fakes.executable import write_executable

SHUTDOWN_TIMEOUT = 60  # generous for a loaded machine; a cancel takes about a second here
FAKE_CODEX = Path(__file__).resolve().parents[1] / "fakes" / "codex_cli.py"


@pytest.fixture
def notify_socket() -> Iterator[NotifySocket]:
    sock = NotifySocket()
    yield sock
    sock.close()


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_stop_signal_while_a_run_is_active_cancels_it_and_exits_0(
    signum: signal.Signals,
    tmp_path: Path,
    notify_socket: NotifySocket,
    processes: list[subprocess.Popen[str]],
) -> None:
    repo = make_cpe_repo(tmp_path / "repo", shutdown_timeout=SHUTDOWN_TIMEOUT)
    add_work_item(repo)
    home = tmp_path / "home"
    home.mkdir()
    env = {"NOTIFY_SOCKET": notify_socket.path}
    with start_cpe_with_a_hanging_implementor(repo, home, processes, env) as (cpe, server):
        assert notify_socket.wait_for("READY=1"), "no READY=1"
        assert server.wait_until(lambda s: s.hanging >= 1, timeout=120), "no implementor started"
        [pidfile] = (repo / ".cpe" / "runs").glob("*/cli.pid")
        agent = read_pid(pidfile)
        assert agent is not None
        assert psutil.pid_exists(agent)
        assert len(worktrees(repo)) == 1
        # the watchdog is fed while the engine answers (a tick every 5 s)
        assert notify_socket.wait_for("WATCHDOG=1", timeout=60), "no WATCHDOG=1"

        cpe.send_signal(signum)
        assert cpe.wait(SHUTDOWN_TIMEOUT) == 0  # within the shutdown timeout, exit 0
    assert "STOPPING=1" in notify_socket.received or notify_socket.wait_for("STOPPING=1", 5)
    assert [run.status for run in agent_runs(repo)] == ["cancelled"]
    assert worktrees(repo) == [], "the cancelled run's worktree was removed"
    assert agent_branches(repo) == [], "and its branch"
    assert not _alive(agent), "the agent process is gone"


def test_a_second_sigint_while_stopping_exits_at_once_with_130(
    tmp_path: Path, notify_socket: NotifySocket, processes: list[subprocess.Popen[str]]
) -> None:
    """The first SIGINT starts the graceful stop; an agent that ignores SIGTERM holds it up for
    its kill grace; a second SIGINT ends the process at once (exit 130).

    The fake codex runs in the run's sandbox, so it says it is up in its own ``/tmp``, which is
    ``.cpe/sandbox/<session>/tmp`` outside; and its group is found by the runner's pid file."""
    codex = _fake_codex(tmp_path / "bin", mode="ignore_sigterm", pid_file=Path("/tmp/codex.pid"))
    extra = f"""
[runtime.roles]
implementor = "codex-cli"
[runtime.codex_cli]
cli_path = "{codex}"
"""
    repo = make_cpe_repo(tmp_path / "repo", shutdown_timeout=SHUTDOWN_TIMEOUT, extra=extra)
    add_work_item(repo)
    home = tmp_path / "home"
    home.mkdir()
    group: int | None = None
    try:
        with (home / "cpe.log").open("a") as log:
            cpe = start_cpe(repo, home, log, {"NOTIFY_SOCKET": notify_socket.path})
            processes.append(cpe)
            assert notify_socket.wait_for("READY=1"), "no READY=1"
            up = repo / ".cpe" / "sandbox"
            assert wait_for(lambda: any(up.glob("*/tmp/codex.pid")), 120), "no agent started"
            [pidfile] = (repo / ".cpe" / "runs").glob("*/runner.pid")
            group = read_pid(pidfile)

            cpe.send_signal(signal.SIGINT)
            assert notify_socket.wait_for("STOPPING=1"), "the first SIGINT did not start a stop"
            cpe.send_signal(signal.SIGINT)
            assert cpe.wait(30) == 130
        # A stop a person asked for, however abrupt, is an interruption: no attempt charged,
        # at this exit or at the next start.
        journal = Journal(repo / ".cpe" / "journal.sqlite3")
        try:
            restored = journal.restore()  # what the next start finds, unprocessed events too
            state = restored.state
            for entry in restored.unprocessed:
                state = apply_event(state, entry.event)
            [run] = state.agent_runs.values()
            assert (run.status, run.failure_reason) == ("cancelled", ABANDONED)
            assert dict(state.attempts) == {}
        finally:
            journal.close()
    finally:
        if group is not None:  # cpe was not allowed to wait for its agent
            with contextlib.suppress(ProcessLookupError):
                os.killpg(group, signal.SIGKILL)


def _fake_codex(directory: Path, *, mode: str, pid_file: Path) -> Path:
    """An executable ``codex`` that runs the fake in ``mode``: cpe gives agents an allowlisted
    environment, so the fake's settings are written into the wrapper itself."""
    return write_executable(
        directory / "codex",
        f"#!{sys.executable}\n"
        "import os, sys\n"
        f"os.environ['FAKE_CODEX_MODE'] = {mode!r}\n"
        f"os.environ['FAKE_CODEX_PID_FILE'] = {str(pid_file)!r}\n"
        f"os.execv(sys.executable, [sys.executable, {str(FAKE_CODEX)!r}, *sys.argv[1:]])\n",
    )


def _wait_for_file(path: Path, timeout: float = 120) -> bool:
    return wait_for(lambda: path.exists() and path.read_text().strip() != "", timeout)


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _catches(pid: int, signum: int) -> bool:
    """Whether process ``pid`` has a handler for ``signum`` (its ``SigCgt`` mask says so)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    mask = next(line for line in status.splitlines() if line.startswith("SigCgt:"))
    return bool(int(mask.split()[1], 16) & (1 << (signum - 1)))


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_stop_signal_during_startup_exits_0_after_a_clean_stop(
    tmp_path: Path, processes: list[subprocess.Popen[str]], signum: int
) -> None:
    """The signal arrives the moment ``cpe run`` can catch it: while it imports, loads its
    configuration and builds the engine. It stops cleanly instead of dying of the signal."""
    repo = make_cpe_repo(tmp_path / "repo")
    home = tmp_path / "home"
    home.mkdir()
    with (home / "cpe.log").open("a") as log:
        cpe = start_cpe(repo, home, log, {})
        processes.append(cpe)
        # SIGTERM's handler is cpe's own from its first moment (Python has one for SIGINT)
        assert wait_for(lambda: _catches(cpe.pid, signal.SIGTERM) or cpe.poll() is not None, 60)
        cpe.send_signal(signum)
        code = cpe.wait(120)
    text = (home / "cpe.log").read_text()
    assert code == 0, text
    assert "Traceback" not in text


def test_a_second_sigint_just_after_the_stop_finished_never_kills_by_the_signal(
    tmp_path: Path, processes: list[subprocess.Popen[str]]
) -> None:
    """Once stopped, cpe exits with its own code: a second Ctrl-C then is 130 if it lands
    before the exit, never death by SIGINT (-2) in Python's finalization."""
    repo = make_cpe_repo(tmp_path / "repo")
    home = tmp_path / "home"
    home.mkdir()
    with (home / "cpe.log").open("a") as log:
        cpe = start_cpe(repo, home, log, {})
        processes.append(cpe)
        assert wait_for(lambda: "engine starting" in (home / "cpe.log").read_text(), 60)
        cpe.send_signal(signal.SIGINT)
        assert wait_for(lambda: "shutdown complete" in (home / "cpe.log").read_text(), 60)
        with contextlib.suppress(ProcessLookupError):
            cpe.send_signal(signal.SIGINT)
        assert cpe.wait(60) in (0, 130)

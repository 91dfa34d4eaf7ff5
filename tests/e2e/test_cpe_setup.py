"""`cpe run` while a worktree's setup command runs (`[runtime] setup_command`, a long
`yarn install`): Ctrl-C stops it at once, and a `kill -9` leaves it for the next start's reaper."""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path
from typing import TextIO

import psutil

from adapters.runtime.process.launcher import read_pid
from adapters.runtime.workspace.setup_command import PID_DIR
from adapters.scripted_model import ScriptedModelServer, load_scenario
from tests.e2e.running import add_work_item, make_cpe_repo, start_cpe, wait_for, worktrees

SLOW_SETUP = '[runtime]\nmax_agent_duration = 300\nsetup_command = "sleep 600"\n'


def _setup_pid(repo: Path) -> int | None:
    found = list((repo / ".worktrees" / PID_DIR).glob("*.pid"))
    return read_pid(found[0]) if found else None


def _gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def _repo(tmp_path: Path) -> Path:
    config = (
        "[engine]\nshutdown_timeout = 60\n[provider.local]\npipeline_command = []\n"
        "[pollers]\nwork_items_interval = 0.3\nrevisions_interval = 0.3\nspecs_interval = 0.3\n"
    )
    repo = make_cpe_repo(tmp_path / "repo")
    (repo / "supervisor.toml").write_text(config + SLOW_SETUP)
    add_work_item(repo)
    (tmp_path / "home").mkdir()
    return repo


def _start_until_the_setup_runs(
    repo: Path,
    home: Path,
    log: TextIO,
    server: ScriptedModelServer,
    processes: list[subprocess.Popen[str]],
) -> tuple[subprocess.Popen[str], int]:
    """``cpe run`` on ``repo``, once its implementor's setup command runs; and its pid."""
    cpe = start_cpe(repo, home, log, server.client_env())
    processes.append(cpe)
    assert wait_for(lambda: _setup_pid(repo) is not None, 120), "no setup command ran"
    setup = _setup_pid(repo)
    assert setup is not None
    return cpe, setup


def test_ctrl_c_while_the_setup_command_runs_stops_it_and_exits_0(
    tmp_path: Path, processes: list[subprocess.Popen[str]]
) -> None:
    repo, home = _repo(tmp_path), tmp_path / "home"
    with (
        ScriptedModelServer([load_scenario("implement")]) as server,
        (home / "cpe.log").open("a") as log,
    ):
        cpe, setup = _start_until_the_setup_runs(repo, home, log, server, processes)
        cpe.send_signal(signal.SIGINT)
        # far sooner than the setup's 600 s: it is stopped, not waited for
        assert cpe.wait(120) == 0
    text = (home / "cpe.log").read_text()
    assert "stopping the setup command" in text
    assert _gone(setup)
    assert worktrees(repo) == []


def test_a_setup_command_left_by_a_kill_9_is_killed_by_the_next_start(
    tmp_path: Path, processes: list[subprocess.Popen[str]]
) -> None:
    repo, home = _repo(tmp_path), tmp_path / "home"
    with (
        ScriptedModelServer([load_scenario("implement")]) as server,
        (home / "cpe.log").open("a") as log,
    ):
        cpe, setup = _start_until_the_setup_runs(repo, home, log, server, processes)
        cpe.send_signal(signal.SIGKILL)
        cpe.wait(30)
        assert not _gone(setup), "the setup command outlived cpe"
        restarted = start_cpe(repo, home, log, server.client_env())
        processes.append(restarted)
        assert wait_for(lambda: _gone(setup), 120), "the reaper left the setup command"
        restarted.send_signal(signal.SIGTERM)
        assert restarted.wait(120) == 0
    assert "killing a setup command an earlier run left" in (home / "cpe.log").read_text()

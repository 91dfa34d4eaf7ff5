"""`cpe run` as a user runs it: a real process on a real repository, the real claude CLI, the
scripted model on loopback. A kill -9 in the middle of an implementor run, then a restart."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TextIO

import psutil
import pytest

from adapters.local.provider import LocalProvider
from adapters.runtime.launcher import read_pid
from adapters.runtime.scripted_model import Match, ScriptedModelServer, load_scenario
from tests.repos import make_repo

CPE = Path(sys.executable).parent / "cpe"

CONFIG = """
[engine]
shutdown_timeout = 30
[provider.local]
pipeline_command = []
[pollers]
work_items_interval = 0.3
revisions_interval = 0.3
specs_interval = 0.3
[runtime]
max_agent_duration = 120
[supervisor]
backoff_initial = 0.1
"""


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    files = {"supervisor.toml": CONFIG, ".gitignore": ".worktrees/\n.cpe/\n", "README.md": "demo\n"}
    return make_repo(tmp_path / "repo", files, with_agents=True)


def start_cpe(
    repo: Path, server: ScriptedModelServer, home: Path, log: TextIO
) -> subprocess.Popen[str]:
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(home),
        "LANG": "C.UTF-8",
        **server.client_env(),
    }
    return subprocess.Popen(
        [str(CPE), "run", "--repo", str(repo)],
        cwd=home,  # not the repository: paths must not depend on the working directory
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        text=True,
    )


def revisions(repo: Path) -> list[object]:
    provider = LocalProvider(repo, repo / ".cpe", "main")
    try:
        return list(provider.revision_reader.list_revisions())
    finally:
        provider.close()


@pytest.fixture
def processes() -> Iterator[list[subprocess.Popen[str]]]:
    started: list[subprocess.Popen[str]] = []
    yield started
    for process in started:
        if process.poll() is None:
            process.kill()
            process.wait(30)


def test_kill_9_during_an_implementor_run_then_restart_completes_with_one_revision(
    repo: Path, tmp_path: Path, processes: list[subprocess.Popen[str]]
) -> None:
    with contextlib.ExitStack() as stack:
        _kill_9_then_restart(repo, tmp_path, processes, stack)


def _kill_9_then_restart(
    repo: Path, tmp_path: Path, processes: list[subprocess.Popen[str]], stack: contextlib.ExitStack
) -> None:
    provider = LocalProvider(repo, repo / ".cpe", "main")
    provider.work_item_writer.create_work_item("Greeting", "Add greet(name) with a test.")
    provider.close()
    home = tmp_path / "home"
    home.mkdir()
    log = stack.enter_context((home / "cpe.log").open("a"))  # read it when this test fails

    hang = [load_scenario("hang", match=Match(role="implementor"))]
    with ScriptedModelServer(hang) as first:
        cpe = start_cpe(repo, first, home, log)
        processes.append(cpe)
        assert first.wait_until(lambda s: s.hanging >= 1, timeout=120), "no implementor started"
        [pidfile] = (repo / ".cpe" / "runs").glob("*/cli.pid")
        orphan = read_pid(pidfile)
        assert orphan is not None
        assert psutil.pid_exists(orphan)
        cpe.send_signal(signal.SIGKILL)
        cpe.wait(30)
        assert (repo / ".worktrees").exists()  # the killed run left its worktree behind

        with ScriptedModelServer([load_scenario("implement")]) as second:
            restarted = start_cpe(repo, second, home, log)
            processes.append(restarted)
            deadline_ok = _wait_for_revision(repo)
            restarted.send_signal(signal.SIGTERM)
            assert restarted.wait(120) == 0
    assert deadline_ok
    revs = revisions(repo)
    assert len(revs) == 1
    assert (repo / ".cpe" / "journal.sqlite3").exists()  # state lives in the repository
    assert not psutil.pid_exists(orphan) or psutil.Process(orphan).status() == "zombie"
    assert not any((repo / ".worktrees").rglob("greeting.py"))


def _wait_for_revision(repo: Path, timeout: float = 120) -> bool:
    """The revision is written by another process: re-check its database until it shows."""
    pause = threading.Event()  # never set: a bounded pause between checks of another process
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if revisions(repo):
            return True
        pause.wait(0.2)
    return False

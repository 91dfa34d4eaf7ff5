"""``cpe status`` says whether the engine runs: a real ``cpe run`` (the real ``claude`` CLI
against the scripted model), then the same after a clean stop and after a ``kill -9``."""

from __future__ import annotations

import os
import re
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from adapters.runtime.process.launcher import live_group
from tests.adapters.cli.test_cli import cpe
from tests.e2e.running import (
    NotifySocket,
    add_work_item,
    make_cpe_repo,
    start_cpe,
    start_cpe_with_a_hanging_implementor,
    wait_for,
)

AT = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC"
LEFT_ACTIVE = "agent runs left active when the engine stopped (the next start ends them)"


@pytest.fixture
def notify_socket() -> Iterator[NotifySocket]:
    sock = NotifySocket()
    yield sock
    sock.close()


def status(repo: Path) -> dict[str, list[str]]:
    """``cpe status`` as {section title: its lines}; the engine's line is the first title."""
    result = cpe("status", "--repo", str(repo))
    assert result.returncode == 0, result.stderr
    blocks = [block.splitlines() for block in result.stdout.strip().split("\n\n")]
    return {block[0]: [line.strip() for line in block[1:]] for block in blocks}


def engine_line(shown: dict[str, list[str]]) -> str:
    return next(iter(shown))


def test_status_names_the_running_engine_and_after_a_kill_says_it_crashed_with_runs_fixed(
    tmp_path: Path, processes: list[subprocess.Popen[str]]
) -> None:
    repo = make_cpe_repo(tmp_path / "repo")
    add_work_item(repo)
    home = tmp_path / "home"
    home.mkdir()
    with start_cpe_with_a_hanging_implementor(repo, home, processes) as (engine, server):
        assert server.wait_until(lambda s: s.hanging >= 1, timeout=120), "no implementor started"

        def run_shown_running() -> bool:
            active = status(repo).get("active agent runs (duration so far)", [])
            return any(" implementor " in line and " running " in line for line in active)

        assert wait_for(run_shown_running), "the implementor run is not shown running"
        live = status(repo)
        assert re.fullmatch(rf"engine running \(pid {engine.pid}, since {AT}\)", engine_line(live))

        engine.send_signal(signal.SIGKILL)
        assert engine.wait(30) == -signal.SIGKILL
        for pidfile in (repo / ".cpe" / "runs").glob("*/*.pid"):  # its agent, orphaned
            group = live_group(pidfile)
            if group is not None:
                os.killpg(group, signal.SIGKILL)

        first, second = status(repo), status(repo)
    crashed = engine_line(first)
    assert re.fullmatch(rf"engine not running \(last stop after {AT}, crashed\)", crashed)
    [left] = first[LEFT_ACTIVE]
    assert " implementor " in left
    assert re.search(r" running when the engine stopped \(\d+\.\ds\)", left), left
    assert second[LEFT_ACTIVE] == [left], "its duration grew after the engine had gone"


def test_status_after_a_clean_stop_says_when_it_stopped_and_why(
    tmp_path: Path, notify_socket: NotifySocket, processes: list[subprocess.Popen[str]]
) -> None:
    repo = make_cpe_repo(tmp_path / "repo")
    home = tmp_path / "home"
    home.mkdir()
    before = status(repo)
    assert engine_line(before) == "engine not running (never started on this state)"
    with (home / "cpe.log").open("a") as log:
        engine = start_cpe(repo, home, log, {"NOTIFY_SOCKET": notify_socket.path})
        processes.append(engine)
        assert notify_socket.wait_for("READY=1"), "no READY=1"
        live = engine_line(status(repo))
        assert re.fullmatch(rf"engine running \(pid {engine.pid}, since {AT}\)", live)
        engine.send_signal(signal.SIGTERM)
        assert engine.wait(60) == 0
    stopped = engine_line(status(repo))
    assert re.fullmatch(rf"engine not running \(last stop {AT}, stopped: signal SIGTERM\)", stopped)

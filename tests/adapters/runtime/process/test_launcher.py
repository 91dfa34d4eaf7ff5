"""The launcher the Claude SDK executes for every run, and the run's script it reads."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from adapters.cli.runtimes import runtime_factory
from adapters.cli.settings import CpeConfig
from adapters.runtime.process import launcher
from adapters.runtime.process.launcher import LAUNCHER, write_launch_script
from domain.errors import ConfigError
from tests.support.git import make_repo


def test_the_launcher_is_executable_as_committed() -> None:
    assert LAUNCHER.stat().st_mode & 0o111 == 0o111


def test_the_launcher_runs_the_run_script_without_executing_it(tmp_path: Path) -> None:
    pidfile = tmp_path / "cli.pid"
    script = tmp_path / "claude.sh"
    env = write_launch_script(script, "/bin/sh", {"A": "1"}, pidfile)
    assert script.stat().st_mode & 0o777 == 0o600  # it holds the model credential; never run
    shown = 'echo "A=$A SECRET=$SECRET $*"'
    done = subprocess.run(
        [str(LAUNCHER), "-c", shown, "sh", "--output-format", "stream-json"],
        env={"PATH": "/usr/bin:/bin", "SECRET": "x", **env},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    # the CLI gets the run's environment only, and the SDK's arguments unchanged
    assert done.stdout == "A=1 SECRET= --output-format stream-json\n"
    assert pidfile.read_text().strip().isdigit()


def test_the_launcher_without_a_run_script_says_what_is_missing() -> None:
    done = subprocess.run(
        [str(LAUNCHER)], env={}, capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode != 0
    assert "CPE_LAUNCH_SCRIPT" in done.stderr


def test_a_launcher_that_is_not_executable_stops_cpe_at_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    copy = tmp_path / "launcher.sh"
    copy.write_text(LAUNCHER.read_text())  # mode 0644: as an install that dropped the mode
    monkeypatch.setattr(launcher, "LAUNCHER", copy)
    repo = make_repo(tmp_path / "repo")
    roles = CpeConfig().runtime.roles.model_dump()
    with pytest.raises(ConfigError, match=r"launcher .* is not executable"):
        runtime_factory(
            CpeConfig(), repo, "main", repo / ".cpe", roles, agent_env=None, isolated_home=True
        )

"""The `cpe` command as a user runs it (a subprocess)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def cpe(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "adapters.cli", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=120,
        check=False,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)},
    )


def test_check_bash_exits_1_with_the_reason_for_a_denied_command(tmp_path: Path) -> None:
    result = cpe("check-bash", "--worktree", str(tmp_path), "--", "git push origin main")
    assert result.returncode == 1
    assert "denied: git push" in result.stdout


def test_check_bash_exits_0_for_an_allowed_command(tmp_path: Path) -> None:
    result = cpe("check-bash", "--worktree", str(tmp_path), "--", "python -m pytest -q")
    assert (result.returncode, result.stdout) == (0, "allowed\n")


def test_check_bash_applies_the_bash_guard_section_of_a_config(tmp_path: Path) -> None:
    config = tmp_path / "supervisor.toml"
    config.write_text('[bash_guard]\ndeny_commands = ["make deploy"]\n')
    result = cpe("check-bash", "--config", str(config), "--", "make deploy")
    assert result.returncode == 1
    assert "make deploy" in result.stdout


def test_check_bash_names_a_bad_bash_guard_key(tmp_path: Path) -> None:
    config = tmp_path / "supervisor.toml"
    config.write_text('[bash_guard]\ndeny_comands = ["x"]\n')
    result = cpe("check-bash", "--config", str(config), "--", "ls")
    assert result.returncode == 78
    assert "deny_comands" in result.stderr

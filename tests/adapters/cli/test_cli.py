"""The `cpe` command as a user runs it (a subprocess)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


MODEL_KEY = "sk-ant-test-never-sent"  # no test reaches a real model


def cpe(
    *args: str, cwd: Path = ROOT, env: Mapping[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``cpe ARGS`` as a user runs it, in a clean environment (no token, no NOTIFY_SOCKET)
    plus ``env``. The timeout also ends a ``cpe run`` that unexpectedly started."""
    return subprocess.run(
        [sys.executable, "-m", "adapters.cli", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=120,
        check=False,
        # a model key, so that cpe run gets past its preflight; {"ANTHROPIC_API_KEY": ""} takes
        # it away
        env={
            "PATH": "/usr/bin:/bin",
            "PYTHONPATH": str(ROOT),
            "ANTHROPIC_API_KEY": MODEL_KEY,
            **(env or {}),
        },
    )


def one_line_error(result: subprocess.CompletedProcess[str], code: int = 78) -> str:
    """The single ``cpe: ...`` line a failing command printed; asserts the exit code and
    that there is exactly one line (no traceback, no log noise)."""
    assert result.returncode == code, (result.returncode, result.stdout, result.stderr)
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("cpe: "), lines[0]
    return lines[0]


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
    line = one_line_error(result)
    assert "bash_guard.deny_comands: unknown key" in line
    assert "expected one of" in line
    assert "deny_commands" in line

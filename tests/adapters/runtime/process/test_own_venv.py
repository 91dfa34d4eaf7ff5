"""An agent's environment never carries cpe's own virtual environment: the ``python3`` an agent
runs is the project's, whatever cpe was started with on its PATH."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from adapters.runtime.process.agent_env import build_agent_env, run_env

CPE_BIN = Path(sys.prefix) / "bin"  # the tests run in cpe's virtual environment (the README's)
WAIT = 60.0


@pytest.fixture(autouse=True)
def in_cpes_venv(monkeypatch: pytest.MonkeyPatch) -> None:
    """cpe started from an activated venv: its bin first on PATH, VIRTUAL_ENV naming it."""
    assert sys.prefix != sys.base_prefix, "these tests run in cpe's virtual environment"
    monkeypatch.setenv("PATH", f"{CPE_BIN}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("VIRTUAL_ENV", sys.prefix)


def resolved(path: str) -> list[Path]:
    return [Path(entry).resolve() for entry in path.split(os.pathsep) if entry]


def test_an_agent_run_env_has_cpes_venv_off_its_path_and_runs_another_python(
    tmp_path: Path,
) -> None:
    env = run_env([], {}, tmp_path / "home", euid=1000)
    assert CPE_BIN.resolve() not in resolved(env["PATH"])
    assert "VIRTUAL_ENV" not in env
    shown = subprocess.run(
        ["python3", "-c", "import sys; print(sys.prefix)"],
        env=env,
        capture_output=True,
        text=True,
        timeout=WAIT,
        check=True,
    ).stdout.strip()
    assert Path(shown).resolve() != Path(sys.prefix).resolve()


def test_the_rest_of_path_is_kept_in_its_order() -> None:
    before = os.environ["PATH"].split(os.pathsep, 1)[1]  # as it was before the fixture
    others = [
        e for e in before.split(os.pathsep) if not e or Path(e).resolve() != CPE_BIN.resolve()
    ]
    assert build_agent_env(os.environ)["PATH"] == os.pathsep.join(others)


def test_virtual_env_naming_cpes_venv_is_dropped_even_when_allowed() -> None:
    env = build_agent_env(os.environ, allow=["PATH", "VIRTUAL_ENV"])
    assert "VIRTUAL_ENV" not in env


def test_another_virtual_env_and_its_bin_are_the_users_and_pass(tmp_path: Path) -> None:
    project_bin = tmp_path / "project-venv" / "bin"
    project_bin.mkdir(parents=True)
    base = {"PATH": f"{CPE_BIN}{os.pathsep}{project_bin}", "VIRTUAL_ENV": str(project_bin.parent)}
    env = build_agent_env(base, allow=["PATH", "VIRTUAL_ENV"])
    assert env == {"PATH": str(project_bin), "VIRTUAL_ENV": str(project_bin.parent)}


def test_a_path_of_nothing_but_cpes_venv_becomes_the_default_search_path() -> None:
    assert build_agent_env({"PATH": str(CPE_BIN)})["PATH"] == os.defpath


def test_what_the_runtime_passes_on_purpose_is_kept_as_is() -> None:
    """``extra`` (the configured ``agent_env``) is trusted: it may name cpe's venv."""
    env = build_agent_env(os.environ, extra={"PATH": str(CPE_BIN)})
    assert env["PATH"] == str(CPE_BIN)

"""`cpe init` and `cpe run` say so, in one line, when the local pipeline would run cpe's own
Python (its packages, not the project's); cpe's venv merely on PATH is no reason: the pipeline
never gets it (tests/adapters/providers/local/test_local_pipeline_own_venv.py)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from tests.adapters.cli.test_cli import cpe
from tests.support.git import make_repo

CPE_BIN = Path(sys.prefix) / "bin"  # `cpe` below runs in the tests' venv: cpe's own
CPES_PYTHON = f'pipeline_command = ["{sys.executable}", "-m", "pytest", "-q"]\n'
PLAIN_PYTHON = 'pipeline_command = ["python3", "-m", "pytest", "-q"]\n'
WARNING = (
    f"the pipeline command runs {sys.executable}, from cpe's own virtual environment: your "
    "tests would import cpe's packages, not your project's; name your project's interpreter in "
    "pipeline_command ([provider.local] in supervisor.toml)"
)
# cpe started from an activated venv of its own
IN_CPES_VENV = {"PATH": f"{CPE_BIN}{os.pathsep}/usr/bin:/bin", "VIRTUAL_ENV": sys.prefix}


@pytest.fixture(autouse=True)
def in_a_venv() -> None:
    assert sys.prefix != sys.base_prefix, "these tests run in cpe's virtual environment"


def repo_with(tmp_path: Path, pipeline: str) -> Path:
    config = f"[provider.local]\n{pipeline}"
    return make_repo(tmp_path / "repo", {"supervisor.toml": config, "README.md": "x\n"})


@pytest.mark.parametrize(
    "pipeline",
    [CPES_PYTHON, f'pipeline_command = ["sh", "-c", "cd . && {sys.executable} -m pytest"]\n'],
    ids=["argv", "sh-c"],
)
def test_init_warns_when_the_pipeline_command_names_cpes_python(
    tmp_path: Path, pipeline: str
) -> None:
    result = cpe("init", cwd=repo_with(tmp_path, pipeline), env=IN_CPES_VENV)
    assert result.returncode == 0, result.stderr
    assert result.stderr.splitlines() == [f"cpe: warning: {WARNING}"]


@pytest.mark.parametrize("pipeline", [PLAIN_PYTHON, ""], ids=["python3", "the-default"])
def test_init_does_not_warn_when_the_pipeline_finds_its_python_on_path(
    tmp_path: Path, pipeline: str
) -> None:
    """The default ``python -m pytest`` included, with cpe's venv first on cpe's PATH."""
    result = cpe("init", cwd=repo_with(tmp_path, pipeline), env=IN_CPES_VENV)
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""


def test_run_warns_first_when_the_pipeline_command_names_cpes_python(tmp_path: Path) -> None:
    """Before anything else can stop the start (here: no model credential)."""
    repo = repo_with(tmp_path, CPES_PYTHON)
    env = {**IN_CPES_VENV, "ANTHROPIC_API_KEY": "", "HOME": str(tmp_path / "home")}
    result = cpe("run", "--log-format", "json", cwd=repo, env=env)
    assert result.returncode == 78
    first, *rest = result.stderr.splitlines()
    assert json.loads(first) | {"timestamp": "t"} == {
        "event": WARNING,
        "level": "warning",
        "logger": "cpe.cli",
        "timestamp": "t",
    }
    assert len(rest) == 1, result.stderr
    assert "no model credential" in rest[0]


def test_run_does_not_warn_when_the_pipeline_finds_its_python_on_path(tmp_path: Path) -> None:
    repo = repo_with(tmp_path, PLAIN_PYTHON)
    env = {**IN_CPES_VENV, "ANTHROPIC_API_KEY": "", "HOME": str(tmp_path / "home")}
    result = cpe("run", "--log-format", "human", cwd=repo, env=env)
    assert result.returncode == 78
    (line,) = result.stderr.splitlines()
    assert "no model credential" in line


def test_init_warns_when_the_pipeline_command_names_a_program_the_pipeline_cannot_find(
    tmp_path: Path,
) -> None:
    """``python`` on a system that has only ``python3`` (Debian without python-is-python3, once
    cpe's own venv is off the PATH): every pipeline would fail and the default branch read red."""
    missing = 'pipeline_command = ["no-such-python-here", "-m", "pytest", "-q"]\n'
    result = cpe("init", cwd=repo_with(tmp_path, missing), env=IN_CPES_VENV)
    assert result.returncode == 0, result.stderr
    [line] = result.stderr.splitlines()
    assert line.startswith(
        "cpe: warning: the pipeline command's program 'no-such-python-here' is not on the PATH "
        "the pipeline gets"
    ), line
    assert 'e.g. ["python3", "-m", "pytest", "-q"]' in line

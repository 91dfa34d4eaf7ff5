"""The local pipeline never runs cpe's own Python by way of PATH: a user who put cpe's virtual
environment on their PATH (the old README said to) gets their project's ``python`` in the
pipeline, not cpe's with cpe's packages; a directory of their own on PATH stays."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from adapters.providers.git import GitRepo
from adapters.providers.local import LocalPipeline
from tests.support.git import Repo, isolate_git

WAIT = 60.0  # generous: a loaded 2-core machine is slow, never this slow

CPE_BIN = Path(sys.prefix) / "bin"  # the tests run in cpe's virtual environment (the README's)
SHOW = "command -v python3; python3 -c 'import sys; print(\"prefix=\" + sys.prefix)'; "
SHOW += 'echo "VIRTUAL_ENV=${VIRTUAL_ENV-unset}"'


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Repo:
    assert sys.prefix != sys.base_prefix, "these tests run in cpe's virtual environment"
    isolate_git(monkeypatch)
    return Repo.create(tmp_path / "repo", {"README.md": "x\n"})


def run(repo: Repo, command: str | list[str], log: Path) -> list[str]:
    result = LocalPipeline(command, WAIT).run(GitRepo(repo.root), repo.head(), log_path=log)
    assert result.status == "success", result.reason
    return log.read_text().splitlines()[1:]  # after the "$ command" header


def test_cpes_venv_first_on_path_does_not_give_the_pipeline_cpes_python(
    repo: Repo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", f"{CPE_BIN}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("VIRTUAL_ENV", sys.prefix)  # `source .venv/bin/activate` sets both
    found, prefix, virtual_env = run(repo, SHOW, tmp_path / "run.log")
    assert Path(found).parent.resolve() != CPE_BIN.resolve()
    assert prefix.startswith("prefix=")
    assert Path(prefix.removeprefix("prefix=")).resolve() != Path(sys.prefix).resolve()
    assert virtual_env == "VIRTUAL_ENV=unset"


def test_cpes_venv_on_path_by_another_spelling_is_taken_off_too(
    repo: Repo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A symlink to cpe's venv, or a path with ``..`` in it: the same directory."""
    link = tmp_path / "cpe-tools"
    link.symlink_to(CPE_BIN, target_is_directory=True)
    dotted = f"{CPE_BIN}/../bin"
    monkeypatch.setenv("PATH", os.pathsep.join([str(link), dotted, os.environ["PATH"]]))
    found, prefix, _ = run(repo, SHOW, tmp_path / "run.log")
    assert Path(found).parent.resolve() != CPE_BIN.resolve()
    assert Path(prefix.removeprefix("prefix=")).resolve() != Path(sys.prefix).resolve()


def test_the_users_own_python_on_path_stays_the_pipelines_python(
    repo: Repo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Only cpe's environment is taken off: the project's venv (activated) is the user's."""
    project_bin = tmp_path / "project-venv" / "bin"
    project_bin.mkdir(parents=True)
    (project_bin / "python3").write_text("#!/bin/sh\necho the-projects-python\n")
    (project_bin / "python3").chmod(0o755)
    path = os.pathsep.join([str(CPE_BIN), str(project_bin), os.environ["PATH"]])
    monkeypatch.setenv("PATH", path)
    monkeypatch.setenv("VIRTUAL_ENV", str(project_bin.parent))
    lines = run(repo, SHOW, tmp_path / "run.log")
    assert lines == [
        str(project_bin / "python3"),
        "the-projects-python",
        f"VIRTUAL_ENV={project_bin.parent}",
    ]


def test_a_pipeline_command_that_names_cpes_interpreter_runs_it_as_written(
    repo: Repo, tmp_path: Path
) -> None:
    """Naming an interpreter is deliberate: cpe runs it (``cpe init``/``cpe run`` warn)."""
    command = [sys.executable, "-c", "import sys; print(sys.prefix)"]
    (prefix,) = run(repo, command, tmp_path / "run.log")
    assert prefix == sys.prefix

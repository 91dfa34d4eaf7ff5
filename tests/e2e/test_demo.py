"""`cpe demo` as a newcomer runs it: a subprocess that must exit 0, leaving the sample
repository in the state it claims."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from actors.journal import Journal
from tests.real_clis import real_codex

CPE = Path(sys.executable).parent / "cpe"


def run_demo(tmp_path: Path, *options: str, path: str | None = None) -> tuple[Path, str]:
    """``cpe demo`` in a subprocess; it must exit 0 and say OK. Returns the sample repo and
    what the demo printed."""
    result = subprocess.run(
        [str(CPE), "demo", "--dir", str(tmp_path), *options],
        capture_output=True,
        text=True,
        timeout=580,
        check=False,
        cwd=tmp_path,
        env={"PATH": path or os.environ["PATH"], "HOME": str(tmp_path), "LANG": "C.UTF-8"},
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "cpe demo: OK" in result.stdout
    return tmp_path / "sample", result.stdout


@pytest.mark.timeout(600)
def test_cpe_demo_exits_0_and_the_sample_repository_is_done(tmp_path: Path) -> None:
    repo, _ = run_demo(tmp_path)
    assert_loop_done(repo)


@pytest.mark.timeout(600)
@pytest.mark.spec("S003-15")
@pytest.mark.parametrize(
    "roles",
    [
        {"planner": "claude-sdk", "implementor": "codex-cli", "reviewer": "claude-cli"},
        {"planner": "codex-cli", "implementor": "codex-cli", "reviewer": "codex-cli"},
    ],
    ids=["mixed", "all-codex"],
)
def test_the_demo_loop_runs_on_other_runtimes(tmp_path: Path, roles: dict[str, str]) -> None:
    """Teams mix agents: the real codex (its default model, code mode) and the real claude CLI
    in -p mode take roles in the same loop; the engine does not change."""
    options = [arg for role, kind in roles.items() for arg in ("--runtime", f"{role}={kind}")]
    codex_bin = real_codex().parent
    repo, stdout = run_demo(tmp_path, *options, path=f"{codex_bin}{os.pathsep}{os.environ['PATH']}")
    assert_loop_done(repo)
    families: dict[str, set[str]] = {}
    for metadata in (repo / ".cpe" / "runs").glob("*/runner_metadata.json"):
        meta = json.loads(metadata.read_text())
        families.setdefault(metadata.parent.name.split("-")[0], set()).add(meta["agent_family"])
        assert meta["termination"] == "completed"
    assert families == {role: {kind.replace("-", "_")} for role, kind in roles.items()}
    # the timeline names the runtime of every run
    timeline = stdout.split("\nagent runs\n", 1)[1]
    for line in timeline.splitlines():
        if line.startswith("  ") and "-" in line.split()[0]:
            role, runtime = line.split()[1:3]
            assert runtime == roles[role], line


def test_a_codex_demo_without_codex_says_how_to_install_it(tmp_path: Path) -> None:
    result = subprocess.run(
        [str(CPE), "demo", "--dir", str(tmp_path), "--runtime", "implementor=codex-cli"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "LANG": "C.UTF-8"},
    )
    assert result.returncode == 2
    assert "codex CLI is not on PATH" in result.stdout
    assert not (tmp_path / "sample").exists()


def assert_loop_done(repo: Path) -> None:
    journal = Journal(repo / ".cpe" / "journal.sqlite3")
    try:
        state = journal.replay()
    finally:
        journal.close()
    assert sorted(i.status for i in state.work_items.values()) == ["done", "done"]
    assert sorted(r.state for r in state.revisions.values()) == ["merged", "merged"]
    verdicts = [r.outcome for r in state.agent_runs.values() if r.role == "reviewer"]
    assert verdicts.count("needs-changes") == 1  # one round of refinement on the first item
    # both features are on the default branch and its tests pass
    log = subprocess.run(
        ["git", "-C", str(repo), "log", "--oneline", "main"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout
    assert log.count("\n") >= 3
    tests = subprocess.run(
        ["python3", "-m", "unittest", "discover", "-s", "tests", "-t", "."],
        cwd=repo,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert tests.returncode == 0, tests.stderr
    assert not any((repo / ".worktrees").glob("*/*"))  # no worktree left

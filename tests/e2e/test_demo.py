"""`cpe demo` as a newcomer runs it: a subprocess that must exit 0, leaving the sample
repository in the state it claims."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from actors.journal import Journal

CPE = Path(sys.executable).parent / "cpe"


@pytest.mark.timeout(600)
def test_cpe_demo_exits_0_and_the_sample_repository_is_done(tmp_path: Path) -> None:
    result = subprocess.run(
        [str(CPE), "demo", "--dir", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=580,
        check=False,
        cwd=tmp_path,
        env={"PATH": os.environ["PATH"], "HOME": str(tmp_path), "LANG": "C.UTF-8"},
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "cpe demo: OK" in result.stdout
    repo = tmp_path / "sample"
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

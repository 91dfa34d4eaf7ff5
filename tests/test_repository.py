"""The repository's own promises: the README's two commands, CI, the default configuration."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _first_code_block() -> list[str]:
    lines = (ROOT / "README.md").read_text().splitlines()
    start = lines.index("```")
    end = lines.index("```", start + 1)
    return [line for line in lines[start + 1 : end] if line.strip()]


def test_readme_starts_with_the_main_job_and_the_test_command() -> None:
    readme = (ROOT / "README.md").read_text().splitlines()
    assert readme[0].startswith("# ")
    first_block = _first_code_block()
    assert len(first_block) == 2
    main_job, tests = first_block
    assert "cpe" in main_job
    assert "pytest" in tests


def test_ci_runs_the_readmes_test_command_and_is_executable() -> None:
    ci = ROOT / ".ci" / "run"
    assert os.access(ci, os.X_OK)
    text = ci.read_text()
    assert "README.md" in text
    assert "set -euo pipefail" in text


def test_default_supervisor_toml_parses() -> None:
    config = tomllib.loads((ROOT / "supervisor.toml").read_text())
    assert config["provider"]["kind"] == "local"
    assert set(config["runtime"]["roles"]) == {"planner", "implementor", "reviewer"}


def test_cpe_command_prints_the_workflow_table() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "adapters.cli", "workflow"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
        check=True,
    )
    assert "| in-review | review-approved | approved |" in result.stdout

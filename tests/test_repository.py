"""The repository's own promises: the README's two commands, CI, the default configuration."""

from __future__ import annotations

import os
import re
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
    # Everything local: no kind given (local for both), no role kept apart.
    assert set(config["provider"]) == {"local"}
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


def _slug(heading: str) -> str:
    """GitHub's anchor for a markdown heading."""
    kept = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return kept.replace(" ", "-")


def _without_code(text: str) -> str:
    return re.sub(r"(?ms)^```.*?^```", "", text)


def test_every_link_in_the_readme_and_the_docs_resolves_inside_the_repository() -> None:
    """A person who clones the repository can follow every relative link (and its anchor)."""
    broken = []
    checked = 0
    for page in [ROOT / "README.md", ROOT / "CHANGELOG.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for match in re.finditer(r"!?\[[^\]]*\]\(([^)\s]+)\)", _without_code(page.read_text())):
            target = match.group(1)
            if re.match(r"[a-z]+:", target):
                continue  # https:, mailto:
            checked += 1
            path, _, anchor = target.partition("#")
            dest = (page.parent / path).resolve() if path else page.resolve()
            if not dest.exists() or ROOT not in [dest, *dest.parents]:
                broken.append(f"{page.name}: {target}: no such file in the repository")
            elif anchor and dest.suffix == ".md":
                headings = re.findall(r"(?m)^#+ (.*)$", _without_code(dest.read_text()))
                if anchor not in {_slug(h) for h in headings}:
                    broken.append(f"{page.name}: {target}: no heading #{anchor}")
    assert checked > 20
    assert broken == []


def test_every_criterion_the_tests_cite_is_explained_in_the_docs() -> None:
    """The tests cite criterion ids (S001-07 …): docs/contract.md says what each one means."""
    cited = set()
    for test in (ROOT / "tests").rglob("*.py"):
        cited |= set(re.findall(r"\bS00[0-4]-\d\d\b", test.read_text(errors="replace")))
    explained = set(re.findall(r"\bS00[0-4]-\d\d\b", (ROOT / "docs" / "contract.md").read_text()))
    assert len(cited) > 100
    assert cited - explained == set()

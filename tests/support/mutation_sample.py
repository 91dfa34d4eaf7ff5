"""The mutation score of ``actors/``, estimated from a random sample of its mutants
(``make mutants-actors``; docs/mutation.md says why a sample and how to read the figure).

Every mutant of ``actors/`` costs seconds (its tests drive real actors, threads and SQLite), and
there are about 4,200 of them: a whole run takes most of a day on a 2-core machine. A seeded
uniform sample of a few hundred gives the score within a few points (the 95 % interval is
printed) in half an hour, the same sample again after a change.

The run works on a copy of the checkout (``mutants-actors/``, ignored by git), whose
``[tool.mutmut]`` mutates ``actors/`` with the tests that reach it in-process (``SELECTION``):
``cpe`` run as a child process imports the unmutated package, so end-to-end tests cannot kill a
mutant. Steps: copy, let mutmut generate the mutants and map tests to functions, draw the
sample, run it, print the tally and write the survivors with their diffs to
``mutants-actors/survivors.txt``.

    python -m tests.support.mutation_sample [--sample 400] [--seed 1] [--children 4]
"""

from __future__ import annotations

import argparse
import collections
import json
import math
import random
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
WORK = ROOT / "mutants-actors"

# The tests that reach actors/ in the pytest process.
SELECTION = [
    "tests/actors/",
    "tests/adapters/cli/test_errors.py",
    "tests/adapters/cli/test_status.py",
    "tests/adapters/cli/test_work.py",
    "tests/adapters/cli/test_commands.py",
    "tests/adapters/cli/test_cli.py",
    "tests/adapters/dashboard/test_dashboard.py",
    "tests/adapters/providers/github/test_github_limits.py",
    "tests/adapters/providers/github/test_github_merging.py",
]
CONFIG = f"""[tool.mutmut]
source_paths = ["actors/"]
pytest_add_cli_args_test_selection = {json.dumps(SELECTION)}
pytest_add_cli_args = ["--ignore=tests/domain/test_purity.py", "-p", "no:randomly"]
also_copy = ["domain/", "adapters/", "tests/", ".claude/", "supervisor.toml", "deploy/", "docs/",
             "bench/", "README.md", "CHANGELOG.md", "Makefile"]
"""
SKIP = {".git", ".venv", "mutants", "mutants-actors", "node_modules", ".mypy_cache"}
SKIP |= {".pytest_cache", ".ruff_cache", ".hypothesis", "__pycache__", ".cpe", ".worktrees"}
# mutmut's exit codes (mutmut/stats.py)
STATUS = {1: "killed", 3: "killed", 0: "survived", 5: "no tests", 33: "no tests", 36: "timeout"}
STATUS |= {-24: "timeout", 24: "timeout", 152: "timeout", 255: "timeout", 37: "type check"}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sample", type=int, default=400, help="how many mutants (default 400)")
    parser.add_argument("--seed", type=int, default=1, help="the sample's seed (default 1)")
    parser.add_argument("--children", type=int, default=4, help="mutants at once (default 4)")
    args = parser.parse_args()
    mutmut = Path(sys.executable).with_name("mutmut")
    if not mutmut.exists():
        sys.exit("mutmut is not installed: pip install -e '.[mutation]'")
    _copy()
    # A run filtered to a name no mutant has generates the mutants and maps the tests to the
    # functions they reach, then stops: the names to draw from are then known.
    subprocess.run([mutmut, "run", "no-such-mutant"], cwd=WORK, capture_output=True, check=False)
    names = sorted(_results())
    if not names:
        sys.exit(f"mutmut generated no mutants in {WORK}/mutants (run it there to see why)")
    sample = sorted(random.Random(args.seed).sample(names, min(args.sample, len(names))))
    print(f"{len(names)} mutants of actors/; running a sample of {len(sample)} (seed {args.seed})")
    subprocess.run(
        [mutmut, "run", "--max-children", str(args.children), *sample], cwd=WORK, check=False
    )
    return _report(sample, mutmut)


def _copy() -> None:
    if WORK.exists():
        shutil.rmtree(WORK)
    shutil.copytree(ROOT, WORK, ignore=lambda d, names: [n for n in names if n in SKIP])
    modules = ROOT / "tests" / "tools" / "node_modules"
    if modules.exists():  # the codex CLI some selected tests start
        (WORK / "tests" / "tools" / "node_modules").symlink_to(modules)
    pyproject = WORK / "pyproject.toml"
    text = pyproject.read_text()
    text = re.sub(r"(?ms)^\[tool\.mutmut\]\n.*?(?=^\[|\Z)", "", text)
    pyproject.write_text(text.rstrip() + "\n\n" + CONFIG)


def _results() -> dict[str, int | None]:
    results: dict[str, int | None] = {}
    for meta in sorted((WORK / "mutants" / "actors").glob("*.py.meta")):
        results.update(json.loads(meta.read_text())["exit_code_by_key"])
    return results


def _report(sample: list[str], mutmut: Path) -> int:
    results = _results()
    status = {n: STATUS.get(results[n], "not checked") for n in sample}  # type: ignore[arg-type]
    tally = collections.Counter(status.values())
    checked = sum(n for s, n in tally.items() if s != "not checked")
    killed = tally["killed"] + tally["timeout"] + tally["type check"]
    print(dict(tally))
    if checked:
        p = killed / checked
        half = 1.96 * math.sqrt(p * (1 - p) / checked)
        print(f"score {p:.1%} ± {half:.1%} (95 %), {killed} of {checked} sampled mutants killed")
    by_module: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    for name, s in status.items():
        by_module[name.split(".")[1]][s] += 1
    for module, counts in sorted(by_module.items()):
        print(f"  {module:<12} " + ", ".join(f"{s} {n}" for s, n in sorted(counts.items())))
    lines = []
    for name, s in status.items():
        if s in ("survived", "no tests"):
            shown = subprocess.run(
                [mutmut, "show", name], cwd=WORK, capture_output=True, text=True, check=False
            )
            diff = [ln for ln in shown.stdout.splitlines() if ln[:2] in ("- ", "+ ")]
            lines += [f"=== {s}: {name}", *diff]
    (WORK / "survivors.txt").write_text("\n".join(lines) + "\n")
    print(f"the survivors and their diffs: {WORK / 'survivors.txt'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

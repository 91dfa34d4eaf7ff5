"""Benchmark: WorktreeManager create+remove against plain ``git worktree add`` + ``remove``.

Builds a repository with ``--files`` files (10,000 by default), then alternates, ``--cycles``
times, one plain cycle (``git worktree add <path> -B <branch> main`` then ``git worktree
remove``, and the same with ``remove --force``) and one managed cycle
(``WorktreeManager.create`` then ``remove``: branch-name validation, stale check, exclude
file, ``git branch -D``, tidy-up), so drift in disk or CPU load hits all alike. Prints
per-cycle medians and the ratios; the aim is at most 1.2x.

    .venv/bin/python bench/bench_worktrees.py --files 10000 --cycles 10
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from adapters.runtime.workspace.worktrees import WorktreeManager


def git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)


def make_repo(root: Path, files: int) -> Path:
    repo = root / "repo"
    repo.mkdir()
    git(repo, "init", "--quiet", "--initial-branch=main")
    per_dir = 100
    for i in range(files):
        directory = repo / f"pkg{i // per_dir:03d}"
        directory.mkdir(exist_ok=True)
        (directory / f"module_{i % per_dir:03d}.py").write_text(
            f'"""Module {i}."""\n\nVALUE = {i}\n\n\ndef f(x: int) -> int:\n    return x + VALUE\n'
        )
    git(repo, "add", "-A")
    git(repo, "commit", "--quiet", "-m", f"{files} files")
    return repo


def timed(action: Callable[[], None]) -> float:
    start = time.perf_counter()
    action()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=10_000)
    parser.add_argument("--cycles", type=int, default=10)
    args = parser.parse_args()
    # The machine's git config (hooks, fsmonitor, autocrlf) must not tilt either side.
    os.environ["GIT_CONFIG_GLOBAL"] = os.devnull
    os.environ["GIT_CONFIG_NOSYSTEM"] = "1"
    os.environ.setdefault("GIT_AUTHOR_NAME", "bench")
    os.environ.setdefault("GIT_AUTHOR_EMAIL", "bench@example.invalid")
    os.environ.setdefault("GIT_COMMITTER_NAME", "bench")
    os.environ.setdefault("GIT_COMMITTER_EMAIL", "bench@example.invalid")

    with tempfile.TemporaryDirectory(prefix="cpe-bench-") as scratch:
        built = time.perf_counter()
        repo = make_repo(Path(scratch), args.files)
        print(f"repository: {args.files} files, built in {time.perf_counter() - built:.1f}s")
        plain_path = repo / ".worktrees" / "plain"
        manager = WorktreeManager(repo, "main")

        def plain() -> None:
            git(repo, "worktree", "add", "--quiet", str(plain_path), "-B", "bench/plain", "main")
            git(repo, "worktree", "remove", str(plain_path))

        def plain_force() -> None:
            git(repo, "worktree", "add", "--quiet", str(plain_path), "-B", "bench/plain", "main")
            git(repo, "worktree", "remove", "--force", str(plain_path))

        def managed() -> None:
            manager.remove(manager.create("cpe/bench"))

        cycles = {"plain": plain, "plain_force": plain_force, "managed": managed}
        for cycle in cycles.values():
            cycle()  # warm the page cache and git's object access for every variant
        times: dict[str, list[float]] = {name: [] for name in cycles}
        for _ in range(args.cycles):
            for name, cycle in cycles.items():
                times[name].append(timed(cycle))

    median = {name: statistics.median(values) for name, values in times.items()}
    print(f"cycles: {args.cycles} (create + remove each), medians:")
    print(f"  git worktree add + remove          {median['plain'] * 1000:8.1f} ms")
    print(f"  git worktree add + remove --force  {median['plain_force'] * 1000:8.1f} ms")
    print(f"  WorktreeManager create + remove    {median['managed'] * 1000:8.1f} ms")
    # Plain "remove" first scans the tree for changes; the manager removes with --force (an
    # agent's worktree is dirty by design), so the --force baseline is the like-for-like one.
    for baseline in ("plain", "plain_force"):
        ratio = median["managed"] / median[baseline]
        total = sum(times["managed"]) / sum(times[baseline])
        print(f"ratio vs {baseline:<11}: {ratio:.3f}x (median), {total:.3f}x (total)")


if __name__ == "__main__":
    main()

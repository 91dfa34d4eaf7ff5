"""Benchmark: what cpe's whole loop costs in GitLab requests, on the fake GitLab (loopback only).

A real ``cpe run`` on GitLab from spec to merges (the end-to-end tests' loop,
``tests/e2e/gitlab_loop.py``: the demo's sample and book, the real ``claude`` CLI, the scripted
model, a runner reporting commit statuses), at the provider's own write pacing, as often as
``--loops`` says, on GitLab Free (``--tier premium`` for Premium): its requests, those counted
against the rate limit (on GitLab every answered request, a ``304 Not Modified`` too), its
writes, the 304s among its reads, and its seconds. Each loop is checked as the end-to-end test
checks it.

    .venv/bin/python bench/bench_gitlab_loop.py --loops 3
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.e2e.forge_loop import Counts, isolate_git_for_a_benchmark
from tests.e2e.gitlab_loop import REAL_PACING, TOKEN, USERNAME, GitLabLoop, seed_with_the_sample
from tests.fakes.gitlab import FakeGitLab


def measure_loop(tier: str) -> tuple[Counts, float]:
    """One whole loop on the fake GitLab, checked as the end-to-end test checks it."""
    isolate_git_for_a_benchmark()
    with tempfile.TemporaryDirectory(prefix="cpe-bench-gitlab-loop-") as scratch:
        base = Path(scratch)
        with FakeGitLab(base / "gitlab", tokens={TOKEN: USERNAME}, tier=tier) as fake:
            seed_with_the_sample(fake, base)
            loop = GitLabLoop(base, fake, extra=REAL_PACING)
            seconds = loop.timed_run()
            return loop.counts(), seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--loops", type=int, default=3)
    parser.add_argument("--tier", choices=("free", "premium"), default="free")
    args = parser.parse_args()
    print(
        f"| the whole loop on GitLab {args.tier.title()} | requests | counted | writes "
        "| 304s | seconds |"
    )
    print("| --- | --- | --- | --- | --- | --- |")
    for run in range(args.loops):
        counts, seconds = measure_loop(args.tier)
        print(
            f"| run {run + 1} | {counts.requests} | {counts.counted} | {counts.writes} "
            f"| {counts.not_modified} | {seconds:.0f} |"
        )


if __name__ == "__main__":
    main()

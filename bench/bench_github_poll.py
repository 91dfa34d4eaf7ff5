"""Benchmark: what a poll of the GitHub provider costs, on the fake GitHub (loopback only).

Fills the fake with ``--issues`` open issues and ``--pulls`` open pull requests (each with a
green check run and a green commit status), then runs poll cycles as cpe's two pollers would
(``list_work_items`` then ``list_revisions``) and counts, per cycle, the requests made and the
requests that count against the rate limit (a ``304 Not Modified`` does not). Three kinds of
cycle: idle; after one issue changed (a label); after one pull request got a new commit. The
same is measured at a tenth of the size, to show what grows with the number of items.

    .venv/bin/python bench/bench_github_poll.py --issues 1000 --pulls 100 --cycles 20
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from adapters.github import GitHubProvider, GitHubSettings
from tests.fakes.github import FakeGitHub

TOKEN_ENV = "CPE_BENCH_GITHUB_TOKEN"


def populate(fake: FakeGitHub, issues: int, pulls: int) -> list[int]:
    fake.seed({"README.md": "# bench\n", "src/app.py": "x = 1\n"})
    for i in range(issues):
        fake.add_issue(f"Issue {i}", f"Body {i}", labels=("status:pending", "bench"))
    numbers = []
    for i in range(pulls):
        number = fake.add_pull(f"cpe/{i + 1}-bench", {f"src/m{i}.py": f"v = {i}\n"}, f"PR {i}",
                               f"Closes #{i + 1}")  # fmt: skip
        head = fake.pulls[number].head_sha
        fake.add_check_run(head, "tests")
        fake.add_status(head, "lint", "success")
        numbers.append(number)
    return numbers


class Meter:
    def __init__(self, fake: FakeGitHub, provider: GitHubProvider) -> None:
        self.fake, self.provider = fake, provider

    def cycle(self) -> tuple[int, int, float]:
        """One poll cycle: (requests made, requests counted, seconds)."""
        self.fake.clear_requests()
        start = time.perf_counter()
        self.provider.work_item_reader.list_work_items()
        self.provider.revision_reader.list_revisions()
        elapsed = time.perf_counter() - start
        made = len(self.fake.requests)
        return made, sum(1 for r in self.fake.requests if r.counted), elapsed


def measure(issues: int, pulls: int, cycles: int) -> dict[str, tuple[float, float, int, float]]:
    with (
        tempfile.TemporaryDirectory(prefix="cpe-bench-gh-") as tmp,
        FakeGitHub(Path(tmp) / "github") as fake,
    ):
        numbers = populate(fake, issues, pulls)
        settings = GitHubSettings(
            repository=f"{fake.owner}/{fake.repo}",
            base_url=fake.base_url + "/",
            token_env=TOKEN_ENV,
        )
        with GitHubProvider(settings, environ={TOKEN_ENV: "test-token"}) as provider:
            meter = Meter(fake, provider)
            results: dict[str, tuple[float, float, int, float]] = {}
            results["first poll"] = summarise([meter.cycle()])
            # Past the grace period in which a head without CI is asked about every cycle.
            for _ in range(settings.pipeline_grace_cycles):
                meter.cycle()
            results["idle"] = summarise([meter.cycle() for _ in range(cycles)])
            issue_changes, pull_changes = [], []
            for i in range(cycles):
                fake.edit_issue(1 + i % issues, labels=["status:in-progress", "bench"])
                issue_changes.append(meter.cycle())
                meter.cycle()
            for i in range(cycles):
                branch = fake.pulls[numbers[i % len(numbers)]].head_ref
                fake.push(branch, {"src/extra.py": f"n = {i}\n"}, f"push {i}")
                pull_changes.append(meter.cycle())
                meter.cycle()
            results["one issue changed"] = summarise(issue_changes)
            results["one PR pushed"] = summarise(pull_changes)
            return results


def summarise(samples: list[tuple[int, int, float]]) -> tuple[float, float, int, float]:
    made = [m for m, _, _ in samples]
    counted = [c for _, c, _ in samples]
    return (
        statistics.mean(made),
        statistics.mean(counted),
        max(counted),
        statistics.median(s for _, _, s in samples) * 1000,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--issues", type=int, default=1000)
    parser.add_argument("--pulls", type=int, default=100)
    parser.add_argument("--cycles", type=int, default=20)
    args = parser.parse_args()
    os.environ.setdefault("GIT_CONFIG_NOSYSTEM", "1")
    sizes = [(args.issues // 10, args.pulls // 10), (args.issues, args.pulls)]
    print("| issues | PRs | cycle | requests made | counted (mean) | counted (max) | ms (median) |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for issues, pulls in sizes:
        for kind, (made, counted, worst, ms) in measure(issues, pulls, args.cycles).items():
            print(
                f"| {issues:,} | {pulls} | {kind} | {made:.1f} | {counted:.2f} | {worst} | "
                f"{ms:.0f} |"
            )


if __name__ == "__main__":
    main()

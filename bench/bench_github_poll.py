"""Benchmark: what cpe's loop costs in GitHub requests, on the fake GitHub (loopback only).

**Polls.** Fills the fake with ``--issues`` open issues and ``--pulls`` open pull requests (each
with a green check run and a green commit status), then runs poll cycles as cpe's three pollers
would (``list_work_items``, ``list_revisions``, ``baseline``) and counts, per cycle, the
requests made and those that count against the rate limit (a ``304 Not Modified`` does not).
Kinds of cycle: the first; idle; idle while someone pushes to a branch no pull request is from
(as on a busy repository: every pull request embeds the repository, whose ``pushed_at`` moves
with any push, so the pull request list changes); after a push to the default branch (whose
new head's CI the baseline reads); after one issue changed (a label); after one pull request
got a new commit. The same at a tenth of the size shows what grows with the number
of items.

**Writes.** On a fresh fake, the requests of one work item's way through: creating it, opening
its pull request from a patch of ``--files`` text files and one binary file, an update, a
review, a merge, and the merge of a pull request merged already (its answer lost).

**The whole loop.** A real ``cpe run`` on GitHub from spec to merges (the end-to-end tests'
loop: the demo's sample and book, the real ``claude`` CLI, the scripted model, a fake CI), as
often as ``--loops`` says: its requests, those counted, and its writes (``--loops 0`` skips it).

    .venv/bin/python bench/bench_github_poll.py --issues 1000 --pulls 100 --cycles 20
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

from adapters.providers.github import GitHubProvider, GitHubSettings
from domain.results import AgentReview
from tests.e2e.forge_loop import isolate_git_for_a_benchmark
from tests.e2e.github_loop import LOGIN, REAL_PACING, Counts, GitHubLoop, seed_with_the_sample
from tests.e2e.github_loop import TOKEN as LOOP_TOKEN
from tests.fakes.github import FakeGitHub

TOKEN_ENV = "CPE_BENCH_GITHUB_TOKEN"
WRITES = ("POST", "PATCH", "PUT", "DELETE")
Sample = tuple[int, int, float]  # requests made, counted, seconds


def populate(fake: FakeGitHub, issues: int, pulls: int) -> list[int]:
    fake.seed({"README.md": "# bench\n", "src/app.py": "x = 1\n"})
    fake.add_check_run(fake.default_head(), "tests")
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


def provider_for(fake: FakeGitHub) -> tuple[GitHubProvider, GitHubSettings]:
    settings = GitHubSettings(
        repository=f"{fake.owner}/{fake.repo}",
        base_url=fake.base_url + "/",
        token_env=TOKEN_ENV,
        default_branch=fake.default_branch,
    )
    return GitHubProvider(settings, environ={TOKEN_ENV: "test-token"}), settings


def counted(fake: FakeGitHub, action: Callable[[], object]) -> Sample:
    """Requests ``action`` made, those counted, and the seconds it took."""
    fake.clear_requests()
    start = time.perf_counter()
    action()
    elapsed = time.perf_counter() - start
    return len(fake.requests), sum(1 for r in fake.requests if r.counted), elapsed


def measure_polls(
    issues: int, pulls: int, cycles: int
) -> dict[str, tuple[float, float, int, float]]:
    with (
        tempfile.TemporaryDirectory(prefix="cpe-bench-gh-") as tmp,
        FakeGitHub(Path(tmp) / "github") as fake,
    ):
        numbers = populate(fake, issues, pulls)
        provider, settings = provider_for(fake)
        with provider:

            def cycle() -> Sample:
                def poll() -> None:
                    provider.work_item_reader.list_work_items()
                    provider.revision_reader.list_revisions()
                    provider.revision_reader.baseline()

                return counted(fake, poll)

            results = {"first poll": summarise([cycle()])}
            # Past the grace period in which a head without CI is asked about every cycle.
            for _ in range(settings.pipeline_grace_cycles):
                cycle()
            results["idle"] = summarise([cycle() for _ in range(cycles)])
            elsewhere, pushed = [], []
            fake.git.set_ref("refs/heads/elsewhere", fake.default_head())
            for i in range(cycles):
                fake.push("elsewhere", {f"docs/e{i}.md": f"{i}\n"}, f"push {i}")
                elsewhere.append(cycle())
            results["idle, pushes to another branch"] = summarise(elsewhere)
            for i in range(cycles):
                fake.commit_to_default({f"docs/n{i}.md": f"{i}\n"}, f"push {i}")
                pushed.append(cycle())
            fake.add_check_run(fake.default_head(), "tests")
            cycle()
            results["default branch pushed"] = summarise(pushed)
            issue_changes, pull_changes = [], []
            for i in range(cycles):
                fake.edit_issue(1 + i % issues, labels=["status:in-progress", "bench"])
                issue_changes.append(cycle())
                cycle()
            for i in range(cycles):
                branch = fake.pulls[numbers[i % len(numbers)]].head_ref
                fake.push(branch, {"src/extra.py": f"n = {i}\n"}, f"push {i}")
                pull_changes.append(cycle())
                cycle()
            results["one issue changed"] = summarise(issue_changes)
            results["one PR pushed"] = summarise(pull_changes)
            return results


def summarise(samples: list[Sample]) -> tuple[float, float, int, float]:
    return (
        statistics.mean(m for m, _, _ in samples),
        statistics.mean(c for _, c, _ in samples),
        max(c for _, c, _ in samples),
        statistics.median(s for _, _, s in samples) * 1000,
    )


def make_patch(fake: FakeGitHub, work: Path, files: int, binary: bool, tag: str) -> str:
    """A patch against the default branch: ``files`` new text files (and one binary)."""

    def git(*args: str) -> str:
        return subprocess.run(
            ["git", *args], cwd=work, check=True, capture_output=True, text=True
        ).stdout

    subprocess.run(["git", "clone", "-q", str(fake.git.path), str(work)], check=True)
    for i in range(files):
        (work / "gen").mkdir(exist_ok=True)
        (work / "gen" / f"{tag}{i:03}.py").write_text(f"VALUE_{i} = {i}\n")
    if binary:
        (work / "gen" / f"{tag}.bin").write_bytes(bytes(range(256)) * 4)
    git("add", "--all")
    return git("diff", "--cached", "--binary", "--full-index", "origin/main")


def measure_writes(files: int) -> list[tuple[str, int, int, int]]:
    """(step, requests made, counted, writes) for one work item's way through."""
    with (
        tempfile.TemporaryDirectory(prefix="cpe-bench-gh-") as tmp,
        FakeGitHub(Path(tmp) / "github", tokens={"test-token": "cpe-bot", "r": "alice"}) as fake,
    ):
        fake.seed({"README.md": "# bench\n", "src/app.py": "x = 1\n"})
        steps: list[tuple[str, int, int, int]] = []

        def step(name: str) -> None:
            writes = sum(1 for r in fake.requests if r.method in WRITES)
            steps.append((name, len(fake.requests), sum(r.counted for r in fake.requests), writes))
            fake.clear_requests()

        fake.clear_requests()
        provider, _ = provider_for(fake)
        step("start (the status labels)")
        with provider:
            wi, rw = provider.work_item_writer, provider.revision_writer
            item = wi.create_work_item("Bench", "b")
            step("create a work item")
            wi.transition_status(item, "in-progress")
            step("change its status")
            patch = make_patch(fake, Path(tmp) / "a", files, True, "a")
            fake.clear_requests()
            revision = rw.create_from_patch(item, "cpe/1-bench", "Bench", "", patch)
            step(f"open its revision ({files} text files + 1 binary)")
            update = make_patch(fake, Path(tmp) / "b", files, False, "b")
            fake.clear_requests()
            rw.update_from_patch(revision.id, update)
            step(f"update the revision ({files} more text files)")
            head = fake.pulls[int(revision.id)].head_sha
            rw.post_review(revision.id, head, AgentReview(verdict="approve", summary="Fine."))
            step("post a review")
            rw.merge(revision.id)
            step("merge")
            rw.merge(revision.id)
            step("merge again (merged already: an answer lost)")
        return steps


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--issues", type=int, default=1000)
    parser.add_argument("--pulls", type=int, default=100)
    parser.add_argument("--cycles", type=int, default=20)
    parser.add_argument("--files", type=int, default=20, help="text files in the bench patch")
    parser.add_argument("--loops", type=int, default=3, help="runs of the whole loop")
    args = parser.parse_args()
    os.environ.setdefault("GIT_CONFIG_NOSYSTEM", "1")
    sizes = [(args.issues // 10, args.pulls // 10), (args.issues, args.pulls)]
    print("| issues | PRs | cycle | requests made | counted (mean) | counted (max) | ms (median) |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for issues, pulls in sizes:
        for kind, (made, cost, worst, ms) in measure_polls(issues, pulls, args.cycles).items():
            print(
                f"| {issues:,} | {pulls} | {kind} | {made:.1f} | {cost:.2f} | {worst} | {ms:.0f} |"
            )
    print()
    print("| step | requests made | counted | writes |")
    print("| --- | --- | --- | --- |")
    for name, made, cost, writes in measure_writes(args.files):
        print(f"| {name} | {made} | {cost} | {writes} |")
    if args.loops:
        print()
        print("| the whole loop | requests | counted | writes | seconds |")
        print("| --- | --- | --- | --- | --- |")
        for run in range(args.loops):
            counts, seconds = measure_loop()
            print(
                f"| run {run + 1} | {counts.requests} | {counts.counted} | {counts.writes} "
                f"| {seconds:.0f} |"
            )


def measure_loop() -> tuple[Counts, float]:
    """One whole loop on the fake GitHub, checked as the end-to-end test checks it."""
    isolate_git_for_a_benchmark()
    with tempfile.TemporaryDirectory(prefix="cpe-bench-loop-") as scratch:
        base = Path(scratch)
        with FakeGitHub(base / "github", tokens={LOOP_TOKEN: LOGIN}) as fake:
            seed_with_the_sample(fake, base)
            loop = GitHubLoop(base, fake, pacing=REAL_PACING)
            seconds = loop.timed_run()
            return loop.counts(), seconds


if __name__ == "__main__":
    main()

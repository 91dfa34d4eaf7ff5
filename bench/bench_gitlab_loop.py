"""Benchmark: what cpe's whole loop costs in GitLab requests, on the fake GitLab (loopback only).

A real ``cpe run`` on GitLab from spec to merges (the end-to-end tests' loop,
``tests/e2e/gitlab_loop.py``: the demo's sample and book, the real ``claude`` CLI, the scripted
model, a runner reporting commit statuses), at the provider's own write pacing, as often as
``--loops`` says, on GitLab Free (``--tier premium`` for Premium): its requests, those counted
against the rate limit (on GitLab every answered request, a ``304 Not Modified`` too), its
writes, the 304s among its reads, and its seconds. Each loop is checked as the end-to-end test
checks it.

**Poll cycles.** Before the loop, the requests of one poll cycle as cpe's three pollers make it
(work items, revisions, the default branch's pipeline) on a project of ``--issues`` open issues
and ``--mrs`` open merge requests, each with a green pipeline: the first poll, idle cycles, and
cycles after someone changes something (``--cycles`` of each; ``--cycles 0`` skips them).

    .venv/bin/python bench/bench_gitlab_loop.py --loops 3
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from adapters.providers.gitlab import GitLabProvider, GitLabSettings
from tests.e2e.forge_loop import Counts, isolate_git_for_a_benchmark
from tests.e2e.gitlab_loop import REAL_PACING, TOKEN, USERNAME, GitLabLoop, seed_with_the_sample
from tests.fakes.gitlab import FakeGitLab

BENCH_TOKEN = "bench-token"
BENCH_TOKEN_ENV = "CPE_BENCH_GITLAB_TOKEN"
Sample = tuple[int, int]  # requests made, 304s among them


def populate(fake: FakeGitLab, issues: int, mrs: int) -> list[int]:
    fake.seed({"README.md": "# bench\n", "src/app.py": "x = 1\n"})
    fake.report_status(fake.default_head(), "tests", "success")
    for i in range(issues):
        fake.open_issue(f"Issue {i}", f"Body {i}", labels=("status::pending", "bench"))
    iids = []
    for i in range(mrs):
        iid = fake.open_mr(f"cpe/{i + 1}-bench", {f"src/m{i}.py": f"v = {i}\n"}, f"MR {i}",
                           f"Closes #{i + 1}")  # fmt: skip
        fake.report_status(fake.mr_or_fail(iid).head_sha, "tests", "success")
        iids.append(iid)
    return iids


def counted(fake: FakeGitLab, action: Callable[[], object]) -> Sample:
    fake.clear_requests()
    action()
    return len(fake.requests), sum(1 for r in fake.requests if r.status == 304)


def measure_polls(issues: int, mrs: int, cycles: int) -> dict[str, tuple[float, float, int]]:
    """Mean requests, mean 304s and the most requests of one cycle, by kind of cycle."""
    isolate_git_for_a_benchmark()
    with (
        tempfile.TemporaryDirectory(prefix="cpe-bench-gl-") as tmp,
        FakeGitLab(Path(tmp) / "gitlab", tokens={BENCH_TOKEN: USERNAME}) as fake,
    ):
        iids = populate(fake, issues, mrs)
        settings = GitLabSettings(
            project=fake.project_path,
            base_url=fake.base_url,
            token_env=BENCH_TOKEN_ENV,
            default_branch=fake.default_branch,
        )
        with GitLabProvider(settings, environ={BENCH_TOKEN_ENV: BENCH_TOKEN}) as provider:
            reader, revisions = provider.work_item_reader, provider.revision_reader
            assert reader is not None
            assert revisions is not None

            def cycle() -> Sample:
                def poll() -> None:
                    reader.list_work_items()
                    revisions.list_revisions()
                    revisions.baseline()

                return counted(fake, poll)

            results = {"first poll": summarise([cycle()])}
            for _ in range(settings.pipeline_grace_cycles):
                cycle()
            results["idle"] = summarise([cycle() for _ in range(cycles)])
            pushed: list[Sample] = []
            issue_changes: list[Sample] = []
            mr_pushes: list[Sample] = []
            for i in range(cycles):
                fake.commit_to_default({f"docs/n{i}.md": f"{i}\n"}, f"push {i}")
                pushed.append(cycle())
            results["the default branch pushed"] = summarise(pushed)
            for i in range(cycles):
                fake.label(1 + i % issues, "bench-touched")
                issue_changes.append(cycle())
                cycle()
            results["one issue changed"] = summarise(issue_changes)
            for i in range(cycles):
                branch = fake.mr_or_fail(iids[i % len(iids)]).source_branch
                fake.push(branch, {"src/extra.py": f"n = {i}\n"}, f"push {i}")
                mr_pushes.append(cycle())
                cycle()
            results["one MR pushed"] = summarise(mr_pushes)
            return results


def summarise(samples: list[Sample]) -> tuple[float, float, int]:
    return (
        statistics.mean(m for m, _ in samples),
        statistics.mean(n for _, n in samples),
        max(m for m, _ in samples),
    )


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
    parser.add_argument("--issues", type=int, default=1000)
    parser.add_argument("--mrs", type=int, default=100)
    parser.add_argument("--cycles", type=int, default=20)
    args = parser.parse_args()
    if args.cycles:
        print("| issues | MRs | cycle | requests (mean) | of them 304 (mean) | requests (max) |")
        print("| --- | --- | --- | --- | --- | --- |")
        for issues, mrs in [(args.issues // 10, args.mrs // 10), (args.issues, args.mrs)]:
            for kind, (made, unchanged, worst) in measure_polls(issues, mrs, args.cycles).items():
                print(f"| {issues:,} | {mrs} | {kind} | {made:.1f} | {unchanged:.1f} | {worst} |")
        print()
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

"""Benchmark: dispatch latency with webhooks and with polling only, on the fake GitHub.

A real ``cpe run`` on the fake GitHub (loopback; the real ``claude`` CLI and a scripted model
whose implementor hangs, so every dispatched item keeps its agent), once per mode:

- ``webhooks``: the fake's repository hook posts each change to cpe's ``/hooks/github``; the
  pollers keep their default 30 s interval as the fallback;
- ``poll-30`` and ``poll-5``: no hook, the pollers every 30 s (the default) or 5 s.

Each sample is a person's act, then the times until cpe saw it:

- **label**: a maintainer labels a stranger's issue ``cpe:admit`` → the engine's event (the
  work-item poller's ``change detected`` for it, from cpe's log), → ``agent dispatched``, →
  the agent's start (its first request to the model);
- **check**: a check run finishes on the default branch's head → the engine's event (the
  baseline poller's ``change detected``).

Between two samples the benchmark waits a random part of the interval (with webhooks: of a
second), so a polled change lands anywhere in the poll cycle, as a person's does. Prints
p50/p95 (nearest rank) per mode.

    .venv/bin/python bench/bench_webhooks.py                      # a few samples: ~4 minutes
    .venv/bin/python bench/bench_webhooks.py --samples 20 --polled-samples 10
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import random
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from adapters.scripted_model import ScriptedModelServer
from tests.e2e.forge_loop import isolate_git_for_a_benchmark
from tests.e2e.github_loop import TOKEN, TOKEN_ENV, clone_for_cpe, tracked_files
from tests.e2e.running import make_cpe_repo, start_cpe_with_a_hanging_implementor
from tests.fakes.github import FakeGitHub
from tests.support.git import git

SECRET_ENV = "CPE_BENCH_GITHUB_HOOK_SECRET"
SECRET = "bench hook secret"
STRANGER, MAINTAINER = "mallory", "maria"
CHECK = "ci"


@dataclass(frozen=True)
class Mode:
    name: str
    interval: float  # the pollers'
    webhooks: bool


MODES = {
    "webhooks": Mode("webhooks", 30, True),
    "poll-30": Mode("poll-30", 30, False),
    "poll-5": Mode("poll-5", 5, False),
}


@dataclass
class Result:
    label_event: list[float] = field(default_factory=list)
    label_dispatch: list[float] = field(default_factory=list)
    label_agent: list[float] = field(default_factory=list)
    check_event: list[float] = field(default_factory=list)


class Log:
    """cpe's JSON log, read again as it grows."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def records(self) -> Iterator[dict[str, object]]:
        for line in self.path.read_text().splitlines():
            with contextlib.suppress(ValueError):
                yield json.loads(line)

    def first(self, since: float, **fields: str) -> float | None:
        """When the first record after ``since`` (epoch seconds) with ``fields`` was logged."""
        for record in self.records():
            if all(record.get(k) == v for k, v in fields.items()):
                at = datetime.fromisoformat(str(record["timestamp"]).replace("Z", "+00:00"))
                if at.timestamp() >= since:
                    return at.timestamp()
        return None

    def dashboard(self) -> str:
        for record in self.records():
            if record.get("event") == "dashboard listening":
                return str(record["url"]).rstrip("/")
        raise LookupError("cpe logged no dashboard address")


def until(condition: Callable[[], float | None], timeout: float, what: str) -> float:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = condition()
        if found is not None:
            return found
        time.sleep(0.01)
    raise TimeoutError(f"no {what} within {timeout:.0f} s")


def configure(repo: Path, mode: Mode, samples: int) -> None:
    config = (repo / "supervisor.toml").read_text()
    config = re.sub(r"(?m)^(\w+_interval) = .*$", rf"\1 = {mode.interval}", config)
    concurrency = f"max_concurrent = {{ planner = 1, implementor = {samples + 1}, reviewer = 2 }}"
    config = config.replace("[workflow]\n", f"[workflow]\n{concurrency}\n", 1)
    if mode.webhooks:
        config += f'\n[webhooks]\ngithub_secret_env = "{SECRET_ENV}"\n'
    (repo / "supervisor.toml").write_text(config)


def seeded(base: Path) -> FakeGitHub:
    fake = FakeGitHub(base / "github", tokens={TOKEN: "cpe-bot"})
    project = make_cpe_repo(base / "project")
    (project / "supervisor.toml").unlink()
    git(project, "add", "-A")
    git(project, "commit", "-qm", "the project")
    fake.seed(tracked_files(project), "the project")
    fake.add_check_run(fake.default_head(), CHECK)
    fake.add_collaborator(MAINTAINER, "maintain")
    return fake


def measure(mode: Mode, samples: int, checks: int, keep: Path | None = None) -> Result:
    result = Result()
    with (
        tempfile.TemporaryDirectory(prefix="cpe-bench-hooks-") as scratch,
        seeded(Path(scratch)) as fake,
    ):
        base = Path(scratch)
        issues = [
            fake.add_issue(f"Item {n}", "Add greet(name).", user=STRANGER) for n in range(samples)
        ]
        repo = clone_for_cpe(fake, base, auto_merge=False)
        configure(repo, mode, samples)
        home = base / "home"
        home.mkdir()
        processes: list[subprocess.Popen[str]] = []
        env = {TOKEN_ENV: TOKEN, SECRET_ENV: SECRET}
        try:
            with start_cpe_with_a_hanging_implementor(repo, home, processes, env) as (_, model):
                log = Log(home / "cpe.log")
                started = time.time() - 1
                until(lambda: log.first(started, event="dashboard listening"), 120, "dashboard")
                url = log.dashboard()
                until(lambda: log.first(started, poller="ignored_items"), 120, "first poll")
                if mode.webhooks:
                    fake.hooks.add(f"{url}/hooks/github", SECRET)
                pause = 1.0 if mode.webhooks else mode.interval  # a phase of the poll cycle
                for number, issue in enumerate(issues):
                    time.sleep(random.uniform(0, pause))
                    sample(fake, log, model, issue, number=number, mode=mode, result=result)
                for n in range(checks):
                    time.sleep(random.uniform(0, pause))
                    at = time.time()
                    fake.add_check_run(
                        fake.default_head(), CHECK, conclusion=("failure", "success")[n % 2]
                    )
                    seen = until(
                        lambda at=at: log.first(at, poller="baseline", event="change detected"),
                        mode.interval * 3 + 60,
                        "baseline event",
                    )
                    result.check_event.append(seen - at)
        finally:
            for process in processes:
                if process.poll() is None:
                    process.terminate()
                    process.wait(120)
            if keep is not None:
                keep.mkdir(parents=True, exist_ok=True)
                (keep / f"{mode.name}.log").write_text((home / "cpe.log").read_text())
    return result


def sample(
    fake: FakeGitHub,
    log: Log,
    model: ScriptedModelServer,
    issue: int,
    *,
    number: int,
    mode: Mode,
    result: Result,
) -> None:
    limit = mode.interval * 3 + 60
    at = time.time()
    fake.label_issue(issue, "cpe:admit", actor=MAINTAINER)
    event = until(
        lambda: log.first(at, poller="work_items", id=str(issue), event="change detected"),
        limit,
        f"event for #{issue}",
    )
    dispatched = until(
        lambda: log.first(at, work_item_id=str(issue), event="agent dispatched"),
        limit,
        f"dispatch of #{issue}",
    )
    agent = until(
        lambda: time.time() if model.hanging > number else None, limit, f"agent of #{issue}"
    )
    result.label_event.append(event - at)
    result.label_dispatch.append(dispatched - at)
    result.label_agent.append(agent - at)


def quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


def shown(values: list[float]) -> str:
    if not values:
        return "-"
    return f"{quantile(values, 0.5):.2f} / {quantile(values, 0.95):.2f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--samples", type=int, default=8, help="labels with webhooks")
    parser.add_argument(
        "--polled-samples", type=int, default=3, help="labels in each polling-only mode"
    )
    parser.add_argument("--checks", type=int, default=3, help="finished checks per mode")
    parser.add_argument("--modes", default="webhooks,poll-5,poll-30", help=f"of {', '.join(MODES)}")
    parser.add_argument("--keep", type=Path, help="a directory to keep each mode's cpe log in")
    parser.add_argument("--each", action="store_true", help="print each sample's seconds too")
    args = parser.parse_args()
    isolate_git_for_a_benchmark()
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print()
    print(
        "| mode | labels | label → event | label → dispatched | label → agent's start "
        "| check → event |"
    )
    print("| --- | --- | --- | --- | --- | --- |")
    for name in args.modes.split(","):
        mode = MODES[name.strip()]
        samples = args.samples if mode.webhooks else args.polled_samples
        result = measure(mode, samples, args.checks, args.keep)
        if args.each:
            print(f"<!-- {mode.name}: {result} -->")
        print(
            f"| {mode.name} | {samples} | {shown(result.label_event)} "
            f"| {shown(result.label_dispatch)} | {shown(result.label_agent)} "
            f"| {shown(result.check_event)} |",
            flush=True,
        )
    print()
    print("seconds, p50 / p95 (nearest rank)")
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()

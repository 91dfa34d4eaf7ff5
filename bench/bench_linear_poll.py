"""Benchmark: what polling a Linear team costs in requests, on the fake Linear (loopback only).

The Linear provider (work items only) on a team of ``--issues`` open issues (each admitted: a
teammate filed it), as cpe's work item poller runs it: a start (the token, the team, the admit
label), the first poll (the open issues, a page of 50 at a time, and the team's members), idle
polls (nothing changed: one request each), and polls after someone changes one issue (moves it
to In Progress); ``--cycles`` of each. Also the complexity points each request cost, as the
fake judges them by Linear's documented rules (the most a single query may cost is 10,000).

    .venv/bin/python bench/bench_linear_poll.py --issues 10 1000
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from adapters.providers.linear import LinearProvider, LinearSettings
from tests.fakes.linear.fake import API_KEY, FakeLinear

TOKEN_ENV = "CPE_BENCH_LINEAR_TOKEN"
CPE_STATES = (("Approved", "started"), ("Needs Refinement", "unstarted"), ("Blocked", "backlog"))
Sample = tuple[int, int]  # requests, the most complexity points one of them cost


def counted(fake: FakeLinear, action: Callable[[], object]) -> Sample:
    fake.clear_requests()
    action()
    costs = [r.complexity or 0 for r in fake.requests]
    return len(fake.requests), max(costs, default=0)


def measure(issues: int, cycles: int) -> dict[str, tuple[float, int, int]]:
    """kind -> (mean requests, most requests, most points a request cost)."""
    samples: dict[str, list[Sample]] = {"start": [], "first poll": [], "idle": [], "one change": []}
    with FakeLinear() as fake:
        for name, kind in CPE_STATES:
            fake.add_state(name, kind)
        for i in range(issues):
            fake.open_issue(f"Issue {i}", f"Body {i}", labels=["bench"])
        settings = LinearSettings(team=fake.team_key, api_url=fake.url, token_env=TOKEN_ENV)
        made: list[LinearProvider] = []
        samples["start"].append(
            counted(
                fake,
                lambda: made.append(
                    LinearProvider(settings, environ={TOKEN_ENV: API_KEY}, sleep=lambda s: None)
                ),
            )
        )
        with made[0] as provider:
            reader = provider.work_item_reader
            assert reader is not None
            samples["first poll"].append(counted(fake, reader.list_work_items))
            for n in range(cycles):
                samples["idle"].append(counted(fake, reader.list_work_items))
                fake.move_to_state(f"ENG-{n % issues + 1}", "In Progress")
                samples["one change"].append(counted(fake, reader.list_work_items))
                fake.move_to_state(f"ENG-{n % issues + 1}", "Todo")
                reader.list_work_items()
    return {
        kind: (
            statistics.mean(s[0] for s in values),
            max(s[0] for s in values),
            max(s[1] for s in values),
        )
        for kind, values in samples.items()
        if values
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--issues", type=int, nargs="+", default=[10, 1000])
    parser.add_argument("--cycles", type=int, default=5)
    args = parser.parse_args()
    print("| open issues | when | requests (mean) | requests (max) | most points a request |")
    print("| --- | --- | --- | --- | --- |")
    for issues in args.issues:
        for kind, (mean, worst, points) in measure(issues, args.cycles).items():
            print(f"| {issues:,} | {kind} | {mean:.1f} | {worst} | {points:,} |")


if __name__ == "__main__":
    main()

"""Benchmark: what the Jira provider's start and polls cost in requests, on the fake Jira
(loopback only), on Cloud (REST v3, the ``nextPageToken`` search) and Data Center (REST v2,
``startAt``).

For a project of ``--issues`` open issues (filed by a teammate trusted by the project's
permission), the requests of: a start (the checks: token, project, link types, JQL, statuses),
the first poll (a full sync: every issue not done, a page of ``page_size`` at a time, and the
one permission lookup for their author), an idle poll (nothing changed: ``--cycles`` of them),
and a poll after one change (a person moves one issue); with the milliseconds each took. Issues
are made ``--spread`` seconds apart (a project's history); ``--spread 0`` makes them in one
burst, so that the minute of overlap of a poll holds more than a page of them.

    .venv/bin/python bench/bench_jira_poll.py --issues 10 1000
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from adapters.providers.jira import JiraProvider
from tests.fakes.jira import TEAMMATE, FakeJira
from tests.support.jira_provider import TOKEN_ENV, full_workflow, settings_for

Sample = tuple[int, float]  # requests, milliseconds


def counted(fake: FakeJira, action: Callable[[], object]) -> Sample:
    fake.clear_requests()
    started = time.perf_counter()
    action()
    return len(fake.requests), (time.perf_counter() - started) * 1000


def measure(deployment: str, issues: int, cycles: int, spread: float) -> dict[str, Sample]:
    with (
        tempfile.TemporaryDirectory(prefix="cpe-bench-jira-") as tmp,
        FakeJira(Path(tmp), deployment=deployment) as fake,  # type: ignore[arg-type]
    ):
        full_workflow(fake)
        keys = []
        for n in range(issues):
            keys.append(fake.open_issue(f"Issue {n}", f"Body {n}", by=TEAMMATE))
            fake.advance(spread)
        settings = settings_for(fake)
        made: list[JiraProvider] = []
        figures: dict[str, Sample] = {}
        figures["start"] = counted(
            fake, lambda: made.append(JiraProvider(settings, environ={TOKEN_ENV: "test-token"}))
        )
        with made[0] as provider:
            reader = provider.work_item_reader
            figures["first poll"] = counted(fake, reader.list_work_items)
            idle = [counted(fake, reader.list_work_items) for _ in range(cycles)]
            figures["idle poll"] = (
                max(r for r, _ in idle),
                statistics.median(ms for _, ms in idle),
            )
            fake.advance(600)
            fake.transition(keys[issues // 2], "In Progress")
            figures["poll after one change"] = counted(fake, reader.list_work_items)
            listed = reader.list_work_items()
            assert len(listed) == issues, len(listed)
            assert sum(1 for i in listed if i.status == "in-progress") == 1
        return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--issues", type=int, nargs="+", default=[10, 1000])
    parser.add_argument("--cycles", type=int, default=5)
    parser.add_argument(
        "--spread",
        type=float,
        default=600,
        help="seconds between two issues' creation (0: all in one burst, the fake's clock "
        "moving a second an event)",
    )
    args = parser.parse_args()
    print("| deployment | issues | start | first poll | idle poll | poll after one change |")
    print("|---|---:|---:|---:|---:|---:|")
    for deployment in ("cloud", "data_center"):
        for issues in args.issues:
            figures = measure(deployment, issues, args.cycles, args.spread)
            cells = " | ".join(
                f"{figures[k][0]} ({figures[k][1]:.0f} ms)"
                for k in ("start", "first poll", "idle poll", "poll after one change")
            )
            print(f"| {deployment} | {issues:,} | {cells} |", flush=True)


if __name__ == "__main__":
    main()

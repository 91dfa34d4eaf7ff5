"""Landing throughput and safety of the merge queue: N independent work items, implemented at
once (implementor concurrency 4) by the real ``claude`` CLI against the scripted model, each
approved and landed by a real ``cpe run`` on the local provider, whose pipeline takes a fixed
few seconds (``sleep S`` then a check that imports every module).

Independent items still make each revision stale for the next one: every landing moves the
default branch, so each later entry is brought up to date and tested again on top of it.

Reported, per run: the wall time from the first approval to the last merge, merges per minute,
pipeline runs spent per landed item (the revision's own and the queue's), the queue's own tests
per landing, and how many commits on the default branch fail the check (must be 0).

Run: ``python bench/bench_merge_queue.py [--items 8] [--pipeline-seconds 2]``.
"""

from __future__ import annotations

import argparse
import contextlib
import signal
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from actors.journal import Journal  # noqa: E402
from adapters.scripted_model import Match, ScriptedModelServer, load_scenario  # noqa: E402
from domain.events import RevisionMerged, StatusTransitioned  # noqa: E402
from tests.e2e.queue_loop import implementor, queue_repo, red_commits  # noqa: E402
from tests.e2e.running import start_cpe, wait_for, work_items  # noqa: E402
from tests.support.git import git_raw  # noqa: E402


def bench(items: int, pipeline_seconds: float, concurrency: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="cpe-bench-queue-") as tmp:
        base = Path(tmp)
        titles = tuple(f"Module {n}" for n in range(1, items + 1))
        repo = queue_repo(base / "repo", {"lib.py": "VALUE = 1\n"}, titles)
        config = repo / "supervisor.toml"
        text = config.read_text().replace(
            'pipeline_command = ["python3", "-B", "check.py"]',
            f'pipeline_command = ["sh", "-c", "sleep {pipeline_seconds:g} && python3 -B check.py"]',
        )
        text = text.replace(
            "[workflow]\n",
            "[workflow]\nmax_concurrent = "
            f"{{ planner = 1, implementor = {concurrency}, reviewer = {concurrency} }}\n",
        )
        config.write_text(text)
        git_raw(repo, "commit", "-qam", "the benchmark's pipeline and concurrency")
        start = git_raw(repo, "rev-parse", "main").strip()
        book = [
            implementor(str(n), {f"mod_{n}.py": f"from lib import VALUE\n\nN{n} = VALUE + {n}\n"})
            for n in range(1, items + 1)
        ] + [load_scenario("approve", match=Match(role="reviewer"))]
        home = base / "home"
        home.mkdir()
        began = time.monotonic()
        with contextlib.ExitStack() as stack:
            server = stack.enter_context(ScriptedModelServer(book))
            log = stack.enter_context((home / "cpe.log").open("a"))
            process = start_cpe(repo, home, log, server.client_env())
            try:
                done = wait_for(
                    lambda: all(i.status == "done" for i in work_items(repo)), 60 * items + 300
                )
            finally:
                process.send_signal(signal.SIGTERM)
                process.wait(120)
        total = time.monotonic() - began
        if not done:
            raise SystemExit(f"not every item landed:\n{(home / 'cpe.log').read_text()[-3000:]}")
        journal = Journal(repo / ".cpe" / "journal.sqlite3")
        try:
            events = [entry.event for entry in journal.entries()]
            state = journal.replay()
        finally:
            journal.close()
        approvals = [
            e.at for e in events if isinstance(e, StatusTransitioned) and e.to == "approved"
        ]
        merges = [e.at for e in events if isinstance(e, RevisionMerged)]
        first, last = min(a for a in approvals if a), max(m for m in merges if m)
        window = (last - first).total_seconds()
        with sqlite3.connect(repo / ".cpe" / "local-tracker.sqlite3") as db:
            runs = db.execute("SELECT COUNT(*) FROM pipeline_runs").fetchone()[0]
        red = red_commits(repo, start, base)
        landed = len(state.landed)
        return {
            "items": items,
            "total": total,
            "window": window,
            "per_minute": landed / (window / 60) if window > 0 else float("inf"),
            "pipelines_per_item": runs / landed,
            "queue_tests_per_item": sum(entry.tests for entry in state.landed) / landed,
            "red": len(red),
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=8)
    parser.add_argument("--pipeline-seconds", type=float, default=2.0)
    parser.add_argument("--concurrency", type=int, default=4)
    args = parser.parse_args()
    result = bench(args.items, args.pipeline_seconds, args.concurrency)
    print(
        f"{'items':>5} {'pipeline':>8} {'approval→last merge':>20} {'merges/min':>10} "
        f"{'pipelines/item':>14} {'queue tests/item':>16} {'red commits':>11} {'whole run':>9}"
    )
    print(
        f"{result['items']:>5} {args.pipeline_seconds:>7g}s {result['window']:>19.1f}s "
        f"{result['per_minute']:>10.1f} {result['pipelines_per_item']:>14.2f} "
        f"{result['queue_tests_per_item']:>16.2f} {result['red']:>11} {result['total']:>8.1f}s"
    )


if __name__ == "__main__":
    main()

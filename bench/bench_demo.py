"""``cpe demo`` end to end: its wall time, and the share of it spent outside agent runs.

Runs ``cpe demo --dir DIR`` as a newcomer does (a subprocess, the real ``claude`` CLI, the
scripted model on loopback) and reads the journal it leaves. *Inside agent runs* is the union
of every run's interval from its start (``AgentStarted``) to its terminal event: the CLI
starting, its model turns (instant here: the model is scripted) and its tools (the agents run
the sample's tests). *Outside* is the rest of the wall time: creating the sample repository,
starting and stopping the engine, polling, the executor's provider writes (revisions built from
patches, merges), the local pipeline, the waits between poll intervals, and the final check.

Run: ``python bench/bench_demo.py [RUNS]`` (default 3).
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from actors.journal import Journal  # noqa: E402

CPE = Path(sys.executable).parent / "cpe"


def _union(intervals: list[tuple[datetime, datetime]]) -> float:
    """Seconds covered by at least one interval."""
    total, end = 0.0, None
    for start, stop in sorted(intervals):
        if end is None or start > end:
            total += (stop - start).total_seconds()
            end = stop
        elif stop > end:
            total += (stop - end).total_seconds()
            end = stop
    return total


def run_once(directory: Path) -> dict[str, float]:
    began = time.perf_counter()
    result = subprocess.run(
        [str(CPE), "demo", "--dir", str(directory)],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
        env={"PATH": os.environ["PATH"], "HOME": str(directory), "LANG": "C.UTF-8"},
    )
    wall = time.perf_counter() - began
    if result.returncode != 0:
        raise SystemExit(f"cpe demo failed:\n{result.stdout[-3000:]}{result.stderr[-3000:]}")
    journal = Journal(directory / "sample" / ".cpe" / "journal.sqlite3")
    try:
        state = journal.replay()
    finally:
        journal.close()
    runs = [
        (r.started_at, r.ended_at)
        for r in state.agent_runs.values()
        if r.started_at is not None and r.ended_at is not None
    ]
    agents = _union(runs)
    return {"wall": wall, "agents": agents, "outside": wall - agents, "runs": len(runs)}


def main(repeats: int) -> None:
    results = []
    for _ in range(repeats):
        with tempfile.TemporaryDirectory(prefix="cpe-bench-demo-") as tmp:
            results.append(run_once(Path(tmp)))
    print(f"{'run':>4} {'wall s':>8} {'in agent runs s':>16} {'outside s':>10} {'outside':>8}")
    for i, r in enumerate(results, 1):
        share = r["outside"] / r["wall"]
        print(
            f"{i:>4} {r['wall']:>8.1f} {r['agents']:>16.1f} {r['outside']:>10.1f} {share:>8.0%}"
            f"   ({r['runs']:.0f} agent runs)"
        )
    wall = statistics.median(r["wall"] for r in results)
    outside = statistics.median(r["outside"] / r["wall"] for r in results)
    print(f"median: wall {wall:.1f} s, outside agent runs {outside:.0%}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 3)

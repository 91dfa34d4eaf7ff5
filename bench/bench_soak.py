"""Soak: the real engine running waves of agent runs for a while, on one runtime (the real CLI
against the scripted model; see ``engine_rig.py`` for what one wave is), reporting after every
wave the orchestrator's resident memory, open file descriptors and threads, so that a leak
shows as a slope.

After the last wave: the least-squares slope of each over the waves from the third on (the
first two pay for imports, caches and the first worktrees). The engine keeps every work item,
revision and run in its state and its journal, so a little growth per wave is its record of
the work, not a leak; descriptors and threads have no such reason to grow.

Run: ``python bench/bench_soak.py [--runtime KIND] [--seconds S] [--wave N]`` (default
claude-sdk, 180 s, waves of 8).
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from actors.logs import configure_logging  # noqa: E402
from bench.engine_rig import (  # noqa: E402
    MIB,
    RUNTIMES,
    Rig,
    codex_cli,
    own_fds,
    own_rss,
    scratch,
    scripted_model,
)


def slope(values: list[float]) -> float:
    """The least-squares slope of ``values`` against their index (per wave)."""
    n = len(values)
    if n < 2:
        return float("nan")
    mean_x, mean_y = (n - 1) / 2, sum(values) / n
    numerator = sum((x - mean_x) * (y - mean_y) for x, y in enumerate(values))
    return numerator / sum((x - mean_x) ** 2 for x in range(n))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runtime", choices=RUNTIMES, default="claude-sdk")
    parser.add_argument("--seconds", type=float, default=180, help="waves start until then")
    parser.add_argument("--wave", type=int, default=8, help="runs at once in each wave")
    args = parser.parse_args()
    if args.runtime == "codex-cli" and codex_cli() is None:
        sys.exit("codex-cli: no codex (npm ci --prefix tests/tools)")
    configure_logging("error", "json", sys.stderr)
    print(
        f"{args.runtime}, waves of {args.wave} for {args.seconds:g} s\n"
        f"{'wave':>4} {'elapsed':>8} {'done':>4} {'failed':>6} {'wall':>6} "
        f"{'RSS':>9} {'fds':>4} {'threads':>7}",
        flush=True,
    )
    rss: list[float] = []
    fds: list[float] = []
    threads: list[float] = []
    with scripted_model() as model, scratch() as tmp:
        rig = Rig.start(args.runtime, Path(tmp), model, max_concurrent=args.wave)
        began = time.monotonic()
        try:
            while time.monotonic() - began < args.seconds:
                wave = rig.wave(args.wave)
                rss.append(own_rss() / MIB)
                fds.append(own_fds())
                threads.append(threading.active_count())
                print(
                    f"{len(rss):>4} {time.monotonic() - began:>7.0f}s {wave.completed:>4} "
                    f"{wave.failed:>6} {wave.wall:>5.1f}s {rss[-1]:>5.1f} MiB "
                    f"{fds[-1]:>4.0f} {threads[-1]:>7.0f}",
                    flush=True,
                )
                for reason in sorted(set(wave.reasons)):
                    print(f"    failed: {reason[:200]}", flush=True)
        finally:
            rig.stop()
    runs = args.wave * max(0, len(rss) - 2)
    growth = slope(rss[2:]) * 1024
    print(
        f"slope from wave 3 on ({runs} runs): RSS {growth:+.0f} KiB/wave "
        f"({growth / args.wave:+.1f} KiB/run), fds {slope(fds[2:]):+.2f}/wave, "
        f"threads {slope(threads[2:]):+.2f}/wave"
    )


if __name__ == "__main__":
    main()

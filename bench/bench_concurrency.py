"""Many agent runs at once, through the real engine, on each runtime: the real ``claude`` CLI
(the Claude Agent SDK, and ``claude -p``) and the real ``codex exec``, against the scripted
model on loopback (see ``engine_rig.py`` for what one wave is).

For each runtime and each N: N implementor runs dispatched at once. Reported: the wall time
from the engine's poll to the last run's end (revisions created), runs completed, runs that
failed to start (and other failures), the peak resident memory of the whole process tree, that
peak less the orchestrator's own memory divided by N (memory per session), how much the
orchestrator itself grew over the wave, and the engine's ping answer time (p50, p99: the
watchdog's check) while the runs went on. A wave of one run first warms each engine up.

Run: ``python bench/bench_concurrency.py [N ...] [--runtime KIND ...]`` (default N: 1 8 24 50,
every runtime; codex-cli only when codex is installed, ``npm ci --prefix tests/tools``).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from actors.logs import configure_logging  # noqa: E402
from bench.engine_rig import (  # noqa: E402
    MIB,
    RUNTIMES,
    Model,
    Rig,
    Sampler,
    codex_cli,
    own_rss,
    scratch,
    scripted_model,
    tree_rss,
)

HEADER = (
    f"{'runtime':<11} {'N':>3} {'wall':>7} {'done':>4} {'start fail':>10} {'other fail':>10} "
    f"{'peak tree':>10} {'per run':>8} {'orch. growth':>12} {'ping p50':>9} {'ping p99':>9}"
)


def bench(kind: str, sizes: list[int], model: Model) -> None:
    with scratch() as tmp:
        rig = Rig.start(kind, Path(tmp), model, max_concurrent=max(sizes))
        try:
            rig.wave(1)  # warm-up: imports, first worktree, first CLI start
            for n in sizes:
                before, idle_tree = own_rss(), tree_rss()
                with Sampler(rig.engine) as sampler:
                    wave = rig.wave(n)
                growth = own_rss() - before
                per_run = (sampler.peak_tree - idle_tree) / n
                print(
                    f"{kind:<11} {n:>3} {wave.wall:>6.1f}s {wave.completed:>4} "
                    f"{wave.start_failures:>10} {wave.failed - wave.start_failures:>10} "
                    f"{sampler.peak_tree / MIB:>6.0f} MiB {per_run / MIB:>4.0f} MiB "
                    f"{growth / MIB:>8.1f} MiB {sampler.ping_ms(0.5):>6.1f} ms "
                    f"{sampler.ping_ms(0.99):>6.1f} ms",
                    flush=True,
                )
                for reason in sorted(set(wave.reasons)):
                    print(f"    failed: {reason[:200]}", flush=True)
                if sampler.missed_pings:
                    print(f"    {sampler.missed_pings} pings unanswered within 30 s", flush=True)
        finally:
            rig.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("sizes", nargs="*", type=int, default=[1, 8, 24, 50], metavar="N")
    parser.add_argument("--runtime", action="append", choices=RUNTIMES, dest="runtimes")
    args = parser.parse_args()
    configure_logging("error", "json", sys.stderr)
    runtimes = args.runtimes or list(RUNTIMES)
    if "codex-cli" in runtimes and codex_cli() is None:
        print("codex-cli: skipped, no codex (npm ci --prefix tests/tools)", file=sys.stderr)
        runtimes.remove("codex-cli")
    print(HEADER, flush=True)
    with scripted_model() as model:
        for kind in runtimes:
            bench(kind, args.sizes, model)


if __name__ == "__main__":
    main()

"""What the terminal console costs the engine: its control socket's board view, a watch's delay,
and the engine's throughput with consoles watching.

A real engine on the in-memory fakes (a journal on tmpfs where /dev/shm exists), N work items
(blocked, but for a fifth of them that ran: an implementor each, which said its item is
blocked, so the board has ended runs and their decisions), the dashboard's ``Source`` and the
real control socket serving its views, as ``cpe run`` serves them. Measured at each N:

- the board: ``state_view``'s build time in the engine's process, and a ``{"view": "board"}``
  round trip over the socket (connect, build, JSON, read), median and p95 of ``--views``, each
  after a change (the socket's views share a board built for the same moment), and the line's
  size;
- a watch's delay: watchers (1, then 5) in another process, as a console is; the engine
  processes a person's pause (``UserPausedDispatch``) every 0.4 s (a resume between two,
  longer apart than the watch's coalescing gap of 0.25 s), and the delay is from the pause
  submitted to the first board line each watcher reads that shows it (the clocks are the
  system's monotonic clock, shared by the processes); p50 and p95 over every watcher's every
  pause;
- the engine's throughput: ``--events`` pause/resume events queued at once and processed,
  with no console watching and with 5 (each event rings every watch; they share a board built
  for a moment, at most four times a second, or less often when a board takes long to build),
  median of three runs each, alternated.

Run: ``python bench/bench_console.py [N ...]`` (default 100 1000) ``[--views 30] [--pauses 50]
[--events 2000]``. The load average is printed first: this is a shared 2-core machine.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from actors.config import EngineConfig, PollerSettings  # noqa: E402
from actors.engine import Engine, create_engine  # noqa: E402
from actors.logs import configure_logging  # noqa: E402
from adapters.cli.services import dashboard_settings  # noqa: E402
from adapters.cli.settings import parse_config  # noqa: E402
from adapters.dashboard.feeds import SourceViews  # noqa: E402
from adapters.dashboard.source import Source  # noqa: E402
from adapters.dashboard.views import state_view  # noqa: E402
from adapters.host.control import Control, ControlServer, ControlSettings, connect  # noqa: E402
from domain.events import UserPausedDispatch, UserResumedDispatch  # noqa: E402
from domain.results import ImplementorResult  # noqa: E402
from tests.fakes.provider import fake_provider  # noqa: E402
from tests.fakes.runtime import FakeRuntime, fake_runtimes  # noqa: E402

RAN = 0.2  # of the items, those that ran (an implementor each, which said it is blocked)
SPACING = 0.4  # seconds at least between two events: longer than the watch's gap (0.25 s)

# The watchers, in a process of their own: W watches of the board; every line's time (the
# system's monotonic clock) and the pause it shows, printed once stdin closes.
_WATCHERS = r"""
import json, sys, threading, time
sys.path.insert(0, sys.argv[3])
from pathlib import Path
from adapters.host.control import connect
state_dir, count = Path(sys.argv[1]), int(sys.argv[2])
seen = [[] for _ in range(count)]
socks = []
def watch(n):
    sock = connect(state_dir, 10)
    socks.append(sock)
    sock.sendall(b'{"watch": "board"}\n')
    sock.settimeout(None)
    with sock.makefile("rb") as lines:
        for raw in lines:
            at = time.monotonic()
            reply = json.loads(raw)
            if "board" in reply:
                paused = reply["board"]["paused"]
                seen[n].append((at, paused["reason"] if paused else None))
            elif reply.get("ok"):
                seen[n].append((at, "ready"))
threads = [threading.Thread(target=watch, args=(n,), daemon=True) for n in range(count)]
for t in threads:
    t.start()
print("started", flush=True)
sys.stdin.read()
print(json.dumps(seen), flush=True)
"""


BLOCKED = ImplementorResult(outcome="blocked", summary="the bench's item cannot be done")


def engine_with(n: int, directory: Path) -> tuple[Engine, FakeRuntime]:
    tracker, provider = fake_provider()
    for i in range(n):
        ran = i < n * RAN
        tracker.add_item(str(i), "pending" if ran else "blocked", title=f"work item {i}")
    off = PollerSettings(poll_interval=0)
    runtime = FakeRuntime()
    engine = create_engine(
        EngineConfig(
            provider=provider,
            create_runtime_adapters=fake_runtimes(runtime),
            journal_path=str(directory / "journal.sqlite3"),
            work_item_poller=off,
            revision_poller=off,
            spec_poller=off,
            log_level="error",
        )
    )
    return engine, runtime


@contextmanager
def serving(n: int, directory: Path) -> Iterator[tuple[Engine, Source, Path]]:
    """An engine with N items, its runs settled, and its control socket serving the views."""
    state_dir = directory / f"state-{n}-{time.monotonic_ns()}"
    state_dir.mkdir()
    engine, runtime = engine_with(n, state_dir)
    config = parse_config({})
    control = Control(engine, ControlSettings(config.breaker, config.workflow.max_concurrent))
    source = Source(engine, dashboard_settings(config), state_dir, control=control, title="bench")
    engine.start()
    settle(engine, runtime)
    server = ControlServer(control, state_dir, SourceViews(source))
    thread = threading.Thread(target=server.serve, daemon=True)
    thread.start()
    while not (state_dir / "control.sock").exists():
        time.sleep(0.01)
    try:
        yield engine, source, state_dir
    finally:
        server.shutdown()
        thread.join(30)
        engine.stop()
        source.close()


def settle(engine: Engine, runtime: FakeRuntime, timeout: float = 300) -> None:
    """The runs of the items that ran ended one at a time (each says its item is blocked: an
    attempt spent, the item tried again until its attempts are spent), until none is left."""
    end = time.monotonic() + timeout
    ended: set[str] = set()
    while time.monotonic() < end:
        state = engine.get_state()
        active = [r for r in state.agent_runs.values() if r.is_active]
        waiting = [r for r in runtime.runs.values() if r.session_id not in ended]
        if (
            not active
            and not waiting
            and engine.inbox.wait_idle(1)
            and not any(r.is_active for r in engine.get_state().agent_runs.values())
        ):
            return
        for run in waiting:
            run.complete(BLOCKED)
            ended.add(run.session_id)
            while engine.get_state().agent_runs.get(run.session_id) is None or any(
                r.session_id == run.session_id and r.is_active
                for r in engine.get_state().agent_runs.values()
            ):
                time.sleep(0.01)
            break
        else:
            time.sleep(0.05)
    raise SystemExit("the engine's runs did not settle")


def ask_board(state_dir: Path) -> int:
    sock = connect(state_dir, 10)
    with sock, sock.makefile("rb") as lines:
        sock.sendall(b'{"view": "board"}\n')
        line = lines.readline()
    assert json.loads(line)["ok"] is True
    return len(line)


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * share))]


def board_costs(engine: Engine, source: Source, state_dir: Path, views: int) -> dict[str, float]:
    """Each view of a moment of its own (a change before it): the socket's views share a board
    built for the same moment, which this is not about."""
    built, asked = [], []
    size = 0
    for n in range(views):
        change = UserPausedDispatch(reason=f"v{n}") if n % 2 == 0 else UserResumedDispatch()
        assert engine.submit([change], 60)
        began = time.perf_counter()
        state_view(source)
        built.append(time.perf_counter() - began)
        began = time.perf_counter()
        size = ask_board(state_dir)
        asked.append(time.perf_counter() - began)
    assert engine.submit([UserResumedDispatch()], 60)
    return {
        "build_ms": statistics.median(built) * 1000,
        "build_p95_ms": percentile(built, 0.95) * 1000,
        "ask_ms": statistics.median(asked) * 1000,
        "ask_p95_ms": percentile(asked, 0.95) * 1000,
        "kib": size / 1024,
    }


@contextmanager
def watchers(state_dir: Path, count: int) -> Iterator[list[list[tuple[float, Any]]]]:
    """``count`` watches in another process; what each saw, filled in on leaving."""
    process = subprocess.Popen(
        [sys.executable, "-c", _WATCHERS, str(state_dir), str(count), str(ROOT)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdin is not None
    assert process.stdout is not None
    seen: list[list[tuple[float, Any]]] = []
    try:
        assert process.stdout.readline().strip() == "started"
        time.sleep(1.0)  # every watch connected and sent its first board
        yield seen
    finally:
        process.stdin.close()
        seen.extend(json.loads(process.stdout.readline()))
        process.wait(30)


def watch_delays(
    engine: Engine, state_dir: Path, count: int, pauses: int, spacing: float
) -> tuple[list[float], int]:
    """The delays seen, and how many pauses a watcher never saw (a later state's view came
    first: when views take longer to build than the events' spacing)."""
    submitted: dict[str, float] = {}
    with watchers(state_dir, count) as seen:
        for i in range(pauses):
            reason = f"pause {i}"
            submitted[reason] = time.monotonic()
            assert engine.submit([UserPausedDispatch(reason=reason)], 60)
            time.sleep(spacing)
            assert engine.submit([UserResumedDispatch()], 60)
            time.sleep(spacing)
    delays: list[float] = []
    unseen = 0
    for lines in seen:
        first: dict[str, float] = {}
        for at, reason in lines:
            if reason in submitted and reason not in first:
                first[reason] = at
        unseen += len(set(submitted) - set(first))
        delays.extend(first[r] - submitted[r] for r in submitted if r in first)
    return delays, unseen


def throughput(engine: Engine, events: int) -> float:
    batch = [
        UserPausedDispatch(reason=f"t{i}") if i % 2 == 0 else UserResumedDispatch()
        for i in range(events)
    ]
    assert engine.inbox.wait_idle(60)
    began = time.perf_counter()
    for event in batch:
        assert engine.inbox.put(event) is not None
    assert engine.inbox.wait_idle(3600)
    return events / (time.perf_counter() - began)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("sizes", nargs="*", type=int, default=[100, 1000])
    parser.add_argument("--views", type=int, default=30)
    parser.add_argument("--pauses", type=int, default=50)
    parser.add_argument("--events", type=int, default=2000)
    args = parser.parse_args()
    configure_logging("error", "json", sys.stderr)
    print("load average:", " ".join(f"{x:.2f}" for x in os.getloadavg()), flush=True)
    shm = Path("/dev/shm")
    with tempfile.TemporaryDirectory(dir=shm if shm.is_dir() else None) as tmp:
        for n in args.sizes:
            with serving(n, Path(tmp)) as (engine, source, state_dir):
                state = engine.get_state()
                print(
                    f"\n{n} work items, {len(state.agent_runs)} runs, "
                    f"{len(state.revisions)} revisions",
                    flush=True,
                )
                costs = board_costs(engine, source, state_dir, args.views)
                print(
                    f"  board: built in {costs['build_ms']:.1f} ms (p95 "
                    f"{costs['build_p95_ms']:.1f}), asked over the socket in "
                    f"{costs['ask_ms']:.1f} ms (p95 {costs['ask_p95_ms']:.1f}), "
                    f"{costs['kib']:.0f} KiB a line",
                    flush=True,
                )
                spacing = max(SPACING, 3 * costs["ask_p95_ms"] / 1000)
                for count in (1, 5):
                    delays, unseen = watch_delays(engine, state_dir, count, args.pauses, spacing)
                    print(
                        f"  {count} watcher(s), a pause every {2 * spacing:.1f} s: on the board "
                        f"after {statistics.median(delays) * 1000:.1f} ms (p95 "
                        f"{percentile(delays, 0.95) * 1000:.1f}; {len(delays)} seen, "
                        f"{unseen} overtaken)",
                        flush=True,
                    )
                alone, watched = [], []
                for _ in range(3):
                    alone.append(throughput(engine, args.events))
                    with watchers(state_dir, 5):
                        watched.append(throughput(engine, args.events))
                    print(f"    ({alone[-1]:.0f} alone, {watched[-1]:.0f} watched)", flush=True)
                print(
                    f"  throughput: {statistics.median(alone):.0f} events/s with no console, "
                    f"{statistics.median(watched):.0f} with 5 watching "
                    f"({statistics.median(watched) / statistics.median(alone):.2f}x)",
                    flush=True,
                )
    print("load average:", " ".join(f"{x:.2f}" for x in os.getloadavg()), flush=True)


if __name__ == "__main__":
    socket.setdefaulttimeout(None)
    main()

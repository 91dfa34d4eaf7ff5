"""Event throughput: queue → engine → handlers → executor, against a bare pykka ceiling.

Pushes N events through the real engine with in-memory fakes and a journal on disk (tmpfs when
/dev/shm exists, like a production SSD's page cache). Each event is a ``UserTransitionedStatus``
moving one of 100 work items between pending and blocked, a hundred at a time. About half of
them change a status: the handlers emit a ``TransitionStatus``, the executor records its intent,
writes it to the fake provider and queues ``StatusTransitioned``, which is processed in a second
cycle. A pending item is also dispatched to an implementor where the guards allow (most are
refused by ``max_concurrent``: a ``CommandRejected``, one more cycle). Measured on 2,000 events:
2,000 pushed, 1,006 transitions, 384 refused dispatches, 2 runs. Reported: pushed events per
second, and p50/p99 latency from ``enqueue`` to the end of that event's processing. All events
are pushed at once, so the latency is mostly time spent waiting in the queue behind the others.

The ceiling is the same actor topology with no work in it, measured in the same run: a queue
actor that forwards to an engine actor, which asks an executor actor and tells the queue it is
done, for two messages per pushed event.

Run: ``python bench/bench_engine.py [N ...]`` (default 10000 100000).
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import pykka

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from actors.config import EngineConfig, PollerSettings  # noqa: E402
from actors.engine import create_engine  # noqa: E402
from actors.logs import configure_logging  # noqa: E402
from domain.events import UserTransitionedStatus  # noqa: E402
from tests.fakes.provider import fake_provider  # noqa: E402
from tests.fakes.runtime import FakeRuntime, fake_runtimes  # noqa: E402

ITEMS = 100
REPEATS = 3


def _median_by(runs: list[dict[str, float]], key: str) -> dict[str, float]:
    return sorted(runs, key=lambda r: r[key])[len(runs) // 2]


def bench_engine(n: int, directory: Path) -> dict[str, float]:
    tracker, provider = fake_provider()
    for i in range(ITEMS):
        tracker.add_item(str(i), "blocked")
    off = PollerSettings(poll_interval=0)
    engine = create_engine(
        EngineConfig(
            provider=provider,
            create_runtime_adapters=fake_runtimes(FakeRuntime()),
            journal_path=str(directory / f"journal-{n}.sqlite3"),
            work_item_poller=off,
            revision_poller=off,
            spec_poller=off,
            log_level="error",
        )
    )
    engine.start()
    assert engine.inbox.wait_idle(60)
    enqueued: dict[int, float] = {}
    latencies: list[float] = []
    finish = engine.inbox.finish

    def timed_finish(seq: int, results: Any = ()) -> None:
        finish(seq, results)
        start = enqueued.pop(seq, None)
        if start is not None:
            latencies.append(time.perf_counter() - start)

    engine.inbox.finish = timed_finish  # type: ignore[method-assign]
    events = [
        UserTransitionedStatus(
            work_item_id=str(i % ITEMS), to="pending" if (i // ITEMS) % 2 == 0 else "blocked"
        )
        for i in range(n)
    ]
    began = time.perf_counter()
    for event in events:
        now = time.perf_counter()
        seq = engine.inbox.put(event)
        assert seq is not None
        enqueued[seq] = now
    assert engine.inbox.wait_idle(3600)
    elapsed = time.perf_counter() - began
    engine.stop()
    latencies.sort()
    return {
        "events_per_s": n / elapsed,
        "p50_ms": statistics.median(latencies) * 1000,
        "p99_ms": latencies[int(len(latencies) * 0.99) - 1] * 1000,
    }


class _Executor(pykka.ThreadingActor):
    def on_receive(self, message: Any) -> Any:
        return message


class _Engine(pykka.ThreadingActor):
    def __init__(self, executor: pykka.ActorRef[Any]) -> None:
        super().__init__()
        self.executor = executor
        self.queue: pykka.ActorRef[Any] | None = None

    def on_receive(self, message: Any) -> Any:
        if isinstance(message, pykka.ActorRef):
            self.queue = message
            return None
        self.executor.ask(message, timeout=60)
        assert self.queue is not None
        self.queue.tell(("done", message))
        return None


class _Queue(pykka.ThreadingActor):
    def __init__(self, engine: pykka.ActorRef[Any], total: int, done: threading.Event) -> None:
        super().__init__()
        self.engine, self.total, self.finished, self.done = engine, total, 0, done
        self.pending: list[Any] = []
        self.busy = False

    def on_receive(self, message: Any) -> Any:
        if isinstance(message, tuple):
            self.busy = False
            self.finished += 1
            if self.finished == self.total:
                self.done.set()
        else:
            self.pending.append(message)
        if not self.busy and self.pending:
            self.busy = True
            self.engine.tell(self.pending.pop(0))


def bench_ceiling(n: int) -> dict[str, float]:
    done = threading.Event()
    executor = _Executor.start()
    engine = _Engine.start(executor)
    queue = _Queue.start(engine, 2 * n, done)
    engine.tell(queue)
    began = time.perf_counter()
    for i in range(2 * n):
        queue.tell(i)
    done.wait(3600)
    elapsed = time.perf_counter() - began
    pykka.ActorRegistry.stop_all()
    return {"events_per_s": n / elapsed}


def main(sizes: list[int]) -> None:
    configure_logging("error", "json", sys.stderr)
    shm = Path("/dev/shm")
    with tempfile.TemporaryDirectory(dir=shm if shm.is_dir() else None) as tmp:
        print(
            f"{'events':>8} {'engine ev/s':>12} {'ceiling ev/s':>13} {'ratio':>6} "
            f"{'p50 ms':>8} {'p99 ms':>8}"
        )
        for n in sizes:
            # alternate, three of each, and compare medians: the machine's load drifts
            ceilings, results = [], []
            for _ in range(REPEATS):
                ceilings.append(bench_ceiling(n))
                results.append(bench_engine(n, Path(tmp)))
            ceiling = _median_by(ceilings, "events_per_s")
            result = _median_by(results, "events_per_s")
            ratio = result["events_per_s"] / ceiling["events_per_s"]
            print(
                f"{n:>8} {result['events_per_s']:>12.0f} {ceiling['events_per_s']:>13.0f} "
                f"{ratio:>6.2f} {result['p50_ms']:>8.2f} {result['p99_ms']:>8.2f}",
                flush=True,
            )


if __name__ == "__main__":
    main([int(a) for a in sys.argv[1:]] or [10_000, 100_000])

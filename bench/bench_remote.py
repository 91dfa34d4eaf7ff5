"""A local run against the same run through Ray (``[runtime.remote]``) on a local cluster: a head
node and two worker nodes on this machine, each its own ``ray start`` processes
(``adapters/runtime/remote/cluster.py``), the real ``claude`` CLI (claude-sdk runtime) against
the scripted model on loopback, an implementor run that writes two files, edits one and runs
the tests.

Reported, as a markdown table:

- **per session**, on the demo-sized repository: from ``start_agent`` to the first output chunk
  and to the result, local and remote (p50 of RUNS each, after one warm-up run of each), and the
  remote's overhead;
- **bytes shipped per run**: what goes to the node (the pickled payload: the bundle at the base
  commit, the prompt, the agent definition, the settings) and what comes back (the run's
  artifacts as a tar.gz), for the small repository and for a generated 10,000-file one (with the
  whole run's time there, local and remote);
- **N runs at once** across the two worker nodes (each has ``agent_slot = ceil(N / 2)``), against
  the same N local runs at once: the wall time to the last result, and which nodes ran them.

Run: ``python bench/bench_remote.py [--runs RUNS] [--at-once N]`` (default 3 and 4). Every Ray
process it starts is killed at its end (never ``ray stop``: that would stop every Ray process of
the user on the machine).
"""

from __future__ import annotations

import argparse
import math
import pickle
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from actors.logs import configure_logging  # noqa: E402
from adapters.runtime.claude.settings import ClaudeSdkRuntime  # noqa: E402
from adapters.runtime.common import RuntimeContext  # noqa: E402
from adapters.runtime.remote.cluster import ray_cluster  # noqa: E402
from adapters.runtime.remote.settings import RemoteSettings  # noqa: E402
from adapters.scripted_model import ScriptedModelServer, load_scenario  # noqa: E402
from domain.models import ImplementorStartParams, SessionId, WorkItemId  # noqa: E402
from domain.results import ImplementorResult  # noqa: E402
from tests.adapters.runtime.driving import drive_at_once, provider_deps  # noqa: E402
from tests.support.git import make_repo  # noqa: E402
from tests.support.ray_cluster import runtime_context  # noqa: E402

LARGE_FILES = 10_000


def context(repo: Path, env: dict[str, str]) -> RuntimeContext:
    return runtime_context(repo, env, repo / ".cpe" / "runs")


class Metered:
    """The remote runtime with what each run ships counted: the payload to the node (pickled,
    as Ray sends it) and the artifacts' tar back."""

    def __init__(self, runtime: Any) -> None:
        self.runtime = runtime
        self.sent: list[int] = []
        self.back: list[int] = []
        place, unpack = runtime._place, runtime._unpack

        async def placing(run: Any, payload: Any) -> Any:
            self.sent.append(len(pickle.dumps(dict(payload))))
            return await place(run, payload)

        def unpacking(session_id: Any, data: bytes) -> None:
            self.back.append(len(data))
            unpack(session_id, data)

        runtime._place, runtime._unpack = placing, unpacking


def build(repo: Path, env: dict[str, str], remote: RemoteSettings | None) -> Any:
    from adapters.runtime.remote.ray_runtime import create_ray_runtime  # noqa: PLC0415

    deps = provider_deps(("1", "in-progress", "Greeting", "Add greet(name)."))
    ctx = context(repo, env)
    if remote is None:
        return ClaudeSdkRuntime().build(ctx, deps)
    return create_ray_runtime(remote, ClaudeSdkRuntime(), ctx, deps)


_serial = Counter[str]()


def params(tag: str) -> ImplementorStartParams:
    _serial[tag] += 1
    name = f"{tag}-{_serial[tag]}"
    return ImplementorStartParams(
        session_id=SessionId(f"implementor-{name}"),
        work_item_id=WorkItemId("1"),
        branch_name=f"cpe/1-{name}",
    )


def one(runtime: Any, tag: str) -> tuple[float, float]:
    """One run: seconds to the first output chunk and to its result."""

    async def main() -> tuple[float, float]:
        began = time.perf_counter()
        handle = await runtime.start_agent(params(tag))
        first = None
        async for _ in handle.output:
            first = first or time.perf_counter()
        result = await handle.result
        if not isinstance(result, ImplementorResult) or result.outcome != "completed":
            raise RuntimeError(f"the run did not complete: {result}")
        return (first or time.perf_counter()) - began, time.perf_counter() - began

    return anyio.run(main)


def p50(values: Sequence[float]) -> float:
    return statistics.median(values)


def large_repo(base: Path) -> Path:
    """A repository of ``LARGE_FILES`` small files (about 300 bytes each, 100 directories)."""
    repo = make_repo(base / "large", {"README.md": "large\n"}, with_agents=True)
    for i in range(LARGE_FILES):
        path = repo / "src" / f"d{i % 100:02d}" / f"m{i:05d}.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        body = f'"""Module {i}."""\n\n\ndef f{i}(x: int) -> int:\n    return x + {i}\n'
        path.write_text(body * 3)
    subprocess.run(["git", "-C", str(repo), "add", "-A"], check=True, capture_output=True)
    subprocess.run(
        ["git", "-C", str(repo), "commit", "-qm", "10k files"], check=True, capture_output=True
    )
    return repo


def kib(values: Sequence[int]) -> str:
    return f"{p50(values) / 1024:,.1f} KiB" if values else "n/a"


Row = tuple[str, str, str, str]


def main(runs: int, at_once: int) -> None:
    configure_logging("error", "json", sys.stderr)
    rows: list[Row] = []
    with (
        tempfile.TemporaryDirectory(prefix="cpe-bench-remote-") as tmp,
        ScriptedModelServer([load_scenario("implement")]) as server,
        ray_cluster(env=server.client_env()) as cluster,
    ):
        base = Path(tmp)
        env = server.client_env()
        began = time.perf_counter()
        cluster.start_head()
        head = time.perf_counter() - began
        slots = math.ceil(at_once / 2)
        began = time.perf_counter()
        cluster.add_node({"agent_slot": slots})
        cluster.add_node({"agent_slot": slots})
        workers = (time.perf_counter() - began) / 2
        remote = RemoteSettings(
            address=cluster.address, resources={"agent_slot": 1}, node_dir=str(base / "nodes")
        )
        try:
            small = make_repo(base / "small", {"README.md": "demo\n"}, with_agents=True)
            local_rt, remote_rt = build(small, env, None), Metered(build(small, env, remote))
            rows += per_session(local_rt, remote_rt, runs)
            rows += large(base, env, remote)
            rows.append(together(small, local_rt, remote_rt.runtime, at_once))
        finally:
            import ray  # noqa: PLC0415

            ray.shutdown()
        rows.append(("`ray start`: head / worker node", "—", f"{head:.1f} s / {workers:.1f} s", ""))
    print("| measure | local | through Ray | remote - local |")
    print("| --- | --- | --- | --- |")
    for row in rows:
        print("| " + " | ".join(row) + " |")


def per_session(local_rt: Any, remote_rt: Metered, runs: int) -> list[Row]:
    one(local_rt, "warm-local")
    one(remote_rt.runtime, "warm-remote")  # the nodes' first Ray workers start
    local = [one(local_rt, "local") for _ in range(runs)]
    far = [one(remote_rt.runtime, "remote") for _ in range(runs)]
    rows = []
    for i, what in enumerate(("first output chunk", "whole run")):
        lo, re_ = p50([r[i] for r in local]), p50([r[i] for r in far])
        rows.append(
            (
                f"{what}, p50 of {runs}",
                f"{lo * 1000:,.0f} ms",
                f"{re_ * 1000:,.0f} ms",
                f"+{(re_ - lo) * 1000:,.0f} ms",
            )
        )
    rows.append(("shipped to the node per run (sample repo)", "—", kib(remote_rt.sent), ""))
    rows.append(("artifacts back per run (sample repo)", "—", kib(remote_rt.back), ""))
    return rows


def large(base: Path, env: dict[str, str], remote: RemoteSettings) -> list[Row]:
    big = large_repo(base)
    big_local, big_remote = build(big, env, None), Metered(build(big, env, remote))
    _, lo_whole = one(big_local, "big-local")
    _, re_whole = one(big_remote.runtime, "big-remote")
    files = f"{LARGE_FILES:,}-file repo"
    return [
        (f"shipped to the node per run ({files})", "—", kib(big_remote.sent), ""),
        (
            f"whole run ({files})",
            f"{lo_whole * 1000:,.0f} ms",
            f"{re_whole * 1000:,.0f} ms",
            f"+{(re_whole - lo_whole) * 1000:,.0f} ms",
        ),
    ]


def together(repo: Path, local_rt: Any, remote_rt: Any, at_once: int) -> Row:
    batch_local = [params("at-once-local") for _ in range(at_once)]
    began = time.perf_counter()
    done = drive_at_once(local_rt, batch_local, timeout=900)
    wall_local = time.perf_counter() - began
    batch = [params("at-once-remote") for _ in range(at_once)]
    began = time.perf_counter()
    done_remote = drive_at_once(remote_rt, batch, timeout=900)
    wall_remote = time.perf_counter() - began
    ok = sum(isinstance(r, ImplementorResult) for r in done)
    ok_remote = sum(isinstance(r, ImplementorResult) for r in done_remote)
    nodes = Counter(n for p in batch if (n := _node(repo, p.session_id)))
    return (
        f"{at_once} runs at once: wall to the last result (completed)",
        f"{wall_local:,.1f} s ({ok}/{at_once})",
        f"{wall_remote:,.1f} s ({ok_remote}/{at_once})",
        f"runs per node: {sorted(nodes.values(), reverse=True)}",
    )


def _node(repo: Path, session_id: str) -> str:
    from adapters.runtime.remote.placement import read_placement  # noqa: PLC0415

    where = read_placement(repo / ".cpe", session_id) or {}
    return where.get("node_id", "")[:8]


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3, help="runs of each kind (p50 of them)")
    parser.add_argument("--at-once", type=int, default=4, help="runs at once across two nodes")
    args = parser.parse_args()
    try:
        import ray  # noqa: F401
    except ImportError:
        print("bench_remote: skipped, no Ray (pip install 'control-plane-engine[ray]')")
        sys.exit(0)
    main(args.runs, args.at_once)

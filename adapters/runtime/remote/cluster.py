"""A real multi-node Ray cluster on this machine, for ``cpe demo --remote ray`` and the remote
runtime's tests: a head node and worker nodes, each ``ray start`` run as its own processes
with a temporary directory of its own, so every process of a node is found (and killed) by
that directory and nothing else on the machine is touched (``ray stop`` would stop every Ray
process of the user)."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import psutil

RAY = Path(sys.executable).parent / "ray"
OBJECT_STORE = 80 * 1024 * 1024  # Ray's floor is 75 MiB; the shared memory it takes stays small


@dataclass
class Node:
    temp_dir: Path  # short: Ray's unix sockets live under it (a socket path is 107 bytes at most)
    resources: Mapping[str, float]
    head: bool = False

    def processes(self) -> list[psutil.Process]:
        """Every process of this node: those naming its directory, and their descendants (the
        Ray workers the raylet starts, and what they start: agents in sessions of their own)."""
        found: dict[int, psutil.Process] = {}
        for proc in psutil.process_iter(["cmdline"]):
            with contextlib.suppress(psutil.Error):
                if any(str(self.temp_dir) in arg for arg in proc.info["cmdline"] or ()):
                    found[proc.pid] = proc
                    for child in proc.children(recursive=True):
                        found[child.pid] = child
        return [p for p in found.values() if _alive(p)]

    def kill(self) -> None:
        """SIGKILL every process of the node at once, as a machine that dies."""
        procs = self.processes()
        for proc in procs:
            with contextlib.suppress(psutil.Error):
                proc.send_signal(signal.SIGKILL)
        psutil.wait_procs(procs, timeout=30)


@dataclass
class RayCluster:
    """``ray start --head`` and ``ray start --address`` nodes; ``stop`` kills them all."""

    env: Mapping[str, str] = field(default_factory=dict)
    nodes: list[Node] = field(default_factory=list)
    address: str = ""

    def start_head(self, resources: Mapping[str, float] | None = None) -> Node:
        node = self._start(["--head", "--port=0", "--include-dashboard=false"], resources, True)
        session = node.temp_dir / "session_latest"
        port = next(session.glob("gcs_server_port_*")).read_text().strip()
        self.address = f"{_node_ip()}:{port}"
        return node

    def add_node(self, resources: Mapping[str, float] | None = None) -> Node:
        if not self.address:
            raise RuntimeError("start the head first")
        return self._start([f"--address={self.address}"], resources, False)

    def _start(self, args: list[str], resources: Mapping[str, float] | None, head: bool) -> Node:
        temp_dir = Path(tempfile.mkdtemp(prefix="cpe-ray-", dir="/tmp"))
        node = Node(temp_dir, dict(resources or {}), head=head)
        self.nodes.append(node)
        command = [
            str(RAY),
            "start",
            *args,
            "--num-cpus=1",
            f"--object-store-memory={OBJECT_STORE}",
            "--disable-usage-stats",
            f"--temp-dir={temp_dir}",
            f"--resources={json.dumps(dict(resources or {}))}",
        ]
        result = subprocess.run(
            command,
            capture_output=True,
            text=True,
            timeout=180,
            check=False,
            env={**os.environ, **self.env},
        )
        if result.returncode != 0:
            raise RuntimeError(f"ray start failed: {(result.stdout + result.stderr)[-2000:]}")
        return node

    def stop(self) -> None:
        for node in reversed(self.nodes):
            node.kill()
            shutil.rmtree(node.temp_dir, ignore_errors=True)
        self.nodes.clear()

    def leftovers(self) -> list[psutil.Process]:
        return [proc for node in self.nodes for proc in node.processes()]


def _node_ip() -> str:
    """The address Ray gives this machine's nodes (the first non-loopback one)."""
    from ray._private import services  # noqa: PLC0415

    return str(services.get_node_ip_address())  # type: ignore[no-untyped-call]


def _alive(proc: psutil.Process) -> bool:
    with contextlib.suppress(psutil.Error):
        return bool(proc.status() != psutil.STATUS_ZOMBIE)
    return False


@contextlib.contextmanager
def ray_cluster(env: Mapping[str, str] | None = None) -> Iterator[RayCluster]:
    cluster = RayCluster(env=dict(env or {}))
    try:
        yield cluster
    finally:
        cluster.stop()

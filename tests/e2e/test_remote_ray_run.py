"""The demo loop as a real ``cpe run`` process with its implementors on a Ray cluster (issue 18):
a head node and worker nodes on this machine, each its own ``ray start`` processes, the
implementors pinned to the workers by a custom resource only they have (``agent_slot``), the
real ``claude`` CLI against the scripted model (its address in the nodes' environment, as a
node's model credentials are). ``cpe run`` joins the cluster as its driver; so does this test,
to list the actors a run leaves."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest
import ray
from ray.util import list_named_actors

from adapters.demo.book import ITEM_ONE_TITLE, demo_book
from adapters.runtime.remote.ray_runtime import default_namespace
from adapters.scripted_model import Match, ScriptedModelServer, load_scenario
from tests.e2e.crash import Loop
from tests.e2e.running import CPE, agent_runs, wait_for, work_items
from tests.support.git import git_raw
from tests.support.ray_cluster import Node, RayCluster, ray_cluster

pytestmark = pytest.mark.timeout(900)

SLOT = "agent_slot"


@pytest.fixture(scope="module")
def model() -> Iterator[ScriptedModelServer]:
    """One scripted model for the module: its address is in the nodes' environment (the model
    credentials a node has); each test sets the book it plays."""
    with ScriptedModelServer(demo_book()) as server:
        yield server


@pytest.fixture(scope="module")
def cluster(model: ScriptedModelServer) -> Iterator[RayCluster]:
    """The head (no agent slot) and a worker node with ``agent_slot = 1``; this process joins it
    as a driver. Every Ray process is gone after the module."""
    with ray_cluster(env=model.client_env()) as cluster:
        cluster.start_head()
        cluster.add_node({SLOT: 1})
        ray.init(address=cluster.address, log_to_driver=False, configure_logging=False)
        try:
            yield cluster
        finally:
            ray.shutdown()
    assert cluster.leftovers() == []


class RemoteLoop(Loop):
    """``Loop`` (the demo's sample, ``cpe run`` on it) with ``[runtime.remote]``: implementors on
    the cluster's ``agent_slot`` nodes, working under ``<base>/nodes``; the module's model."""

    # Every implementor run goes through Ray (placement, a node actor, artifacts sent back):
    # about 15 s on an idle machine, and it once took just over 180 s beside two other suites.
    finish_timeout = 420.0

    def __init__(self, base: Path, cluster: RayCluster, model: ScriptedModelServer) -> None:
        super().__init__(base)
        self.server.close()  # the module's server instead: the nodes know its address
        self.server = model
        self.node_dir = base / "nodes"
        toml = self.repo / "supervisor.toml"
        toml.write_text(
            toml.read_text() + "\n[runtime.remote]\n"
            'kind = "ray"\n'
            f'address = "{cluster.address}"\n'
            f"resources = {{ {SLOT} = 1 }}\n"
            f'node_dir = "{self.node_dir}"\n'
            "[runtime.remote.roles]\n"
            "implementor = true\n"
        )
        git_raw(self.repo, "commit", "-qam", "implementors on the Ray cluster")
        self.namespace = default_namespace(self.repo / ".cpe")

    def close(self) -> None:
        for process in self.processes:
            if process.poll() is None:
                process.kill()
                process.wait(30)

    def actors(self) -> list[str]:
        """The named actors of this engine's namespace alive on the cluster."""
        return [
            a["name"]
            for a in list_named_actors(all_namespaces=True)
            if a.get("namespace") == self.namespace
        ]

    def agents(self, named: str = "") -> list[psutil.Process]:
        """Processes working under the nodes' directory (an agent, a tool it started), those
        whose command line has ``named`` in it."""
        found = []
        for proc in psutil.process_iter(["cwd", "cmdline"]):
            cwd, cmdline = proc.info.get("cwd") or "", " ".join(proc.info.get("cmdline") or ())
            if cwd.startswith(str(self.node_dir)) and named in cmdline:
                found.append(proc)
        return found

    def placed(self) -> dict[str, dict[str, Any]]:
        """Each implementor run's ``remote.json``: where it ran."""
        runs = self.repo / ".cpe" / "runs"
        return {p.parent.name: json.loads(p.read_text()) for p in runs.glob("*/remote.json")}

    def assert_nothing_left(self) -> None:
        assert self.actors() == [], "no actor of this engine is left on the cluster"
        assert self.agents() == [], "no agent process is left on a node"
        assert [p for p in self.node_dir.glob("*/*") if p.is_dir()] == [], "no run directory"


@pytest.fixture
def loop(tmp_path: Path, cluster: RayCluster, model: ScriptedModelServer) -> Iterator[RemoteLoop]:
    model.book = tuple(demo_book())
    running = RemoteLoop(tmp_path, cluster, model)
    try:
        yield running
    finally:
        running.close()
        model.book = tuple(demo_book())


def slot_nodes() -> dict[str, str]:
    """The live nodes with an agent slot: node id → the raylet's socket (under its directory)."""
    return {
        n["NodeID"]: n["RayletSocketName"]
        for n in ray.nodes()  # type: ignore[no-untyped-call]
        if n["Alive"] and SLOT in n["Resources"]
    }


def node_of(cluster: RayCluster, node_id: str) -> Node:
    socket = slot_nodes()[node_id]
    [node] = [n for n in cluster.nodes if socket.startswith(str(n.temp_dir))]
    return node


def hanging_first() -> tuple[Any, ...]:
    """The demo's book with every implementor run hanging (the model never answers) first."""
    hang = load_scenario("hang", match=Match(role="implementor"))
    return (hang, *demo_book())


def implementor_runs(loop: RemoteLoop) -> list[Any]:
    return sorted(
        (r for r in agent_runs(loop.repo) if r.role == "implementor"),
        key=lambda r: r.requested_at,
    )


def test_the_demo_loop_under_cpe_run_with_remote_implementors_is_done(loop: RemoteLoop) -> None:
    """Every item done with every implementor run on the worker node; SIGTERM → exit 0, and no
    actor of the engine nor agent process is left on the cluster."""
    loop.finish()  # until every item is done, then SIGTERM: exit 0
    loop.check_invariants()
    placed = loop.placed()
    runs = implementor_runs(loop)
    assert len(runs) >= 3, runs  # two items, one round of review changes
    assert set(placed) == {r.session_id for r in runs}, "every implementor ran remotely"
    assert {p["node_id"] for p in placed.values()} <= set(slot_nodes())
    assert all(p["runtime"] == "claude-sdk" for p in placed.values())
    assert all(r.status == "completed" for r in runs)
    loop.assert_nothing_left()
    status = subprocess.run(
        [str(CPE), "status", "--repo", str(loop.repo)],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
        cwd=loop.home,
        env={"PATH": os.environ["PATH"], "HOME": str(loop.home), "LANG": "C.UTF-8"},
    ).stdout
    for session, where in placed.items():  # where each run ran, as the dashboard shows it too
        line = next(line for line in status.splitlines() if session in line)
        assert f"claude-sdk@{where['node_address']}/{where['node_id'][:8]}" in line, line


def test_a_worker_node_killed_mid_run_fails_under_the_agent_and_the_item_runs_elsewhere(
    loop: RemoteLoop, cluster: RayCluster, model: ScriptedModelServer
) -> None:
    """A second worker node with the same slot; the node the first implementor run lands on is
    killed whole while its agent waits on the model: the run fails under the agent (no attempt
    spent), the item is run again on the other node, and the loop finishes."""
    cluster.add_node({SLOT: 1})
    assert wait_for(lambda: len(slot_nodes()) == 2, 120), slot_nodes()
    model.book = hanging_first()
    process = loop.start()
    assert model.wait_until(lambda s: s.hanging >= 1, 300), loop.tail()
    [(session, where)] = loop.placed().items()
    doomed = node_of(cluster, where["node_id"])
    model.book = tuple(demo_book())  # what comes after the loss completes
    doomed.kill()
    done = wait_for(lambda: loop.done() or process.poll() is not None, loop.finish_timeout)
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
    code = process.wait(120)
    assert done, f"the loop did not finish: {loop.state()}\n{loop.tail()}"
    assert code == 0, loop.tail()
    runs = implementor_runs(loop)
    lost = next(r for r in runs if r.session_id == session)
    assert lost.status == "failed", lost
    assert lost.failure_class == "infrastructure", lost  # under the agent: no attempt spent
    assert "remote run was lost" in (lost.failure_reason or ""), lost.failure_reason
    again = [r for r in runs[runs.index(lost) + 1 :] if r.work_item_id == lost.work_item_id]
    assert again, runs
    assert again[0].status == "completed", runs
    placed = loop.placed()
    assert placed[again[0].session_id]["node_id"] != where["node_id"], "retried on another node"
    [item] = [i for i in work_items(loop.repo) if i.id == lost.work_item_id]
    assert item.title == ITEM_ONE_TITLE
    assert all(i.status == "done" for i in work_items(loop.repo))
    loop.assert_nothing_left()


AGENT_ARGS = "--output-format stream-json"


def why_gone(cluster: RayCluster, workers: dict[int, int], loop: RemoteLoop) -> str:
    """What the nodes' logs say about agents gone with their head (which Ray does not promise
    against): whether each one's worker lives, the worker's log and the raylets' lines on
    workers, and the run's directory on the node."""
    lines = []
    for agent, worker in workers.items():
        lines.append(f"agent {agent}: worker {worker} alive: {psutil.pid_exists(worker)}")
        for node in cluster.nodes:
            logs = node.temp_dir / "session_latest" / "logs"
            for path in sorted(logs.glob(f"*{worker}*")):
                lines += [f"--- {path.name}", *path.read_text(errors="replace").splitlines()[-15:]]
    for node in cluster.nodes:
        raylet = node.temp_dir / "session_latest" / "logs" / "raylet.out"
        if raylet.exists():
            said = [
                line
                for line in raylet.read_text(errors="replace").splitlines()
                if "orker" in line and any(w in line for w in ("exit", "kill", "Kill", "died"))
            ]
            lines += [f"--- {raylet}", *said[-15:]]
    lines += ["--- node runs", *(str(p) for p in sorted(loop.node_dir.glob("*/*")))]
    for path in sorted(loop.node_dir.glob("*/*/state/runs/*/*")):  # the run's own records
        if path.is_file():
            lines += [f"--- {path.name}", *path.read_text(errors="replace").splitlines()[-8:]]
    return "\n".join(lines)


def test_a_restarted_head_stops_the_remote_runs_an_earlier_head_left(
    loop: RemoteLoop, cluster: RayCluster, model: ScriptedModelServer
) -> None:
    """``cpe run`` is killed (SIGKILL) while its remote implementor waits on the model: its
    detached actor and the agent live on on the node. The next ``cpe run`` on the same state
    finds them in its namespace (``reap``), stops the agent and kills the actor, and finishes."""
    if not slot_nodes():
        cluster.add_node({SLOT: 1})
    assert wait_for(lambda: len(slot_nodes()) >= 1, 120)
    model.book = hanging_first()
    first = loop.start()
    assert model.wait_until(lambda s: s.hanging >= 1, 300), loop.tail()
    # The CLI itself (its stream-json arguments), not a short-lived helper it starts in the
    # worktree (a bundled tool whose path names claude too), which ends on its own.
    assert wait_for(lambda: bool(loop.agents(AGENT_ARGS)), 60)
    left_agents = loop.agents(AGENT_ARGS)
    workers = {p.pid: p.ppid() for p in left_agents}  # the actor's worker: each agent's parent
    [left_actor] = loop.actors()
    first.send_signal(signal.SIGKILL)
    assert first.wait(60) == -signal.SIGKILL
    assert loop.actors() == [left_actor], "a detached actor outlives its head"
    assert all(p.is_running() for p in left_agents), (
        f"so does its agent\n{why_gone(cluster, workers, loop)}"
    )
    model.book = tuple(demo_book())
    second = loop.start()
    gone = wait_for(lambda: left_actor not in loop.actors(), 120)
    _, alive = psutil.wait_procs(left_agents, timeout=60)
    assert gone, f"the earlier head's actor is still alive\n{loop.tail()}"
    assert alive == [], f"the earlier head's agent is still running: {alive}"
    assert "stopping a remote run an earlier head left" in loop.log_path.read_text()
    done = wait_for(lambda: loop.done() or second.poll() is not None, loop.finish_timeout)
    if second.poll() is None:
        second.send_signal(signal.SIGTERM)
    code = second.wait(120)
    assert done, f"the loop did not finish: {loop.state()}\n{loop.tail()}"
    assert code == 0, loop.tail()
    loop.assert_nothing_left()

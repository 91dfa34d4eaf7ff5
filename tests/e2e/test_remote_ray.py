"""Remote runs on a real multi-node Ray cluster on this machine (issue 18): a head node and a
worker node, each its own ``ray start`` processes, started and stopped by these tests. The
implementor runs are pinned to the worker node by a custom resource only it has
(``agent_slot``); the agent is the real ``claude`` CLI (the one claude-agent-sdk bundles)
against the scripted model on loopback."""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest
import ray

from adapters.runtime.claude.settings import ClaudeCliRuntime, ClaudeSdkRuntime
from adapters.runtime.codex.settings import CodexCliRuntime
from adapters.runtime.remote.ray_runtime import RayRuntime, create_ray_runtime
from adapters.runtime.remote.settings import RemoteSettings
from adapters.scripted_model import ScriptedModelServer, load_scenario
from adapters.scripted_model.responses_wire import codex_overrides
from domain.errors import AgentFailure
from domain.models import ImplementorStartParams, SessionId, WorkItemId
from domain.results import ImplementorResult
from tests.adapters.runtime.driving import drive, provider_deps
from tests.e2e.running import wait_for
from tests.real_clis import real_codex
from tests.support.git import make_repo
from tests.support.ray_cluster import Node, RayCluster, ray_cluster, runtime_context

pytestmark = pytest.mark.timeout(900)


@pytest.fixture(scope="module")
def cluster() -> Iterator[RayCluster]:
    """The head (no agent slot) and one worker node with ``agent_slot = 1``; this process joins
    it as the driver, as cpe's head does. Every Ray process is gone after the module."""
    with ray_cluster() as cluster:
        cluster.start_head()
        cluster.add_node({"agent_slot": 1})
        yield cluster
        ray.shutdown()
    assert cluster.leftovers() == []


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "repo", {"README.md": "demo\n"}, with_agents=True)


def remote_runtime(
    cluster: RayCluster,
    repo: Path,
    tmp_path: Path,
    env: dict[str, str],
    *,
    slot: str = "agent_slot",
    max_agent_duration: float = 300,
    local: Any = None,
) -> RayRuntime:
    state_dir = repo / ".cpe"
    context = runtime_context(repo, env, state_dir / "runs", max_agent_duration)
    settings = RemoteSettings(
        address=cluster.address, resources={slot: 1}, node_dir=str(tmp_path / "nodes")
    )
    deps = provider_deps(("1", "in-progress", "Greeting", "Add greet(name)."))
    local = local if local is not None else ClaudeSdkRuntime()
    return create_ray_runtime(settings, local, context, deps)


def implementor(name: str) -> ImplementorStartParams:
    return ImplementorStartParams(
        session_id=SessionId(f"implementor-{name}"),
        work_item_id=WorkItemId("1"),
        branch_name=f"cpe/1-{name}",
    )


def node_id(resource: str) -> set[str]:
    return {n["NodeID"] for n in ray.nodes() if n["Alive"] and resource in n["Resources"]}  # type: ignore[no-untyped-call]


def agents_in(directory: Path) -> list[psutil.Process]:
    """Processes working under ``directory`` (an agent, a tool it started)."""
    found = []
    for proc in psutil.process_iter(["cwd"]):
        cwd = proc.info.get("cwd") or ""
        if cwd.startswith(str(directory)):
            found.append(proc)
    return found


def nothing_left(tmp_path: Path) -> None:
    nodes = tmp_path / "nodes"
    assert agents_in(nodes) == []
    assert [p for p in nodes.glob("*/*") if p.is_dir()] == []  # every run's directory removed


def where(repo: Path, params: ImplementorStartParams) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(
        (repo / ".cpe" / "runs" / str(params.session_id) / "remote.json").read_text()
    )
    return data


LOCAL_RUNTIMES: dict[str, Callable[[ScriptedModelServer], Any]] = {
    "claude-sdk": lambda server: ClaudeSdkRuntime(),
    "claude-cli": lambda server: ClaudeCliRuntime(),
    # codex is sent to the scripted model by its -c overrides, not by an environment variable
    "codex-cli": lambda server: CodexCliRuntime(
        cli_path=str(real_codex()), overrides=codex_overrides(server.base_url)
    ),
}


@pytest.mark.parametrize("kind", list(LOCAL_RUNTIMES))
def test_an_implementor_run_on_the_worker_node_completes_and_its_patch_comes_back(
    cluster: RayCluster, repo: Path, tmp_path: Path, kind: str
) -> None:
    """Whichever runtime the role names runs on the node."""
    params = implementor(f"a-{kind}")
    with ScriptedModelServer([load_scenario("implement")]) as server:
        runtime = remote_runtime(
            cluster, repo, tmp_path, server.client_env(), local=LOCAL_RUNTIMES[kind](server)
        )
        chunks, result = drive(runtime, params)
    assert isinstance(result, ImplementorResult), result
    assert result.outcome == "completed"
    assert "greeting.py" in (result.patch or "")
    assert chunks, "the agent's output streamed back"
    placed = where(repo, params)
    assert {placed["node_id"]} == node_id("agent_slot")  # the worker node, the only one with it
    assert placed["runtime"] == kind
    run_dir = repo / ".cpe" / "runs" / str(params.session_id)
    assert (run_dir / "transcript.log").is_file()  # the artifacts came back to the head
    metadata = json.loads((run_dir / "runner_metadata.json").read_text())
    assert metadata["remote"]["node_id"] == placed["node_id"]
    assert not (repo / ".worktrees").exists() or not any((repo / ".worktrees").iterdir())
    nothing_left(tmp_path)


def test_a_cancelled_remote_run_leaves_no_process_on_the_node(
    cluster: RayCluster, repo: Path, tmp_path: Path
) -> None:
    params = implementor("b")
    with ScriptedModelServer([load_scenario("hang")]) as server:
        runtime = remote_runtime(cluster, repo, tmp_path, server.client_env())
        _, result = drive(
            runtime, params, cancel_when=lambda: server.wait_until(lambda s: s.hanging >= 1, 240)
        )
    assert isinstance(result, AgentFailure), result
    assert result.kind == "cancelled"
    assert not result.infrastructure
    nothing_left(tmp_path)


def test_a_remote_run_past_its_duration_is_killed_on_the_node(
    cluster: RayCluster, repo: Path, tmp_path: Path
) -> None:
    params = implementor("c")
    with ScriptedModelServer([load_scenario("hang")]) as server:
        runtime = remote_runtime(
            cluster, repo, tmp_path, server.client_env(), max_agent_duration=30
        )
        at_work = threading.Event()
        watch = threading.Thread(
            target=lambda: server.wait_until(lambda s: s.hanging >= 1, 120) and at_work.set(),
            daemon=True,
        )
        watch.start()
        _, result = drive(runtime, params)
        watch.join(10)
        assert at_work.is_set(), "the agent was at work when its time ran out"
    assert isinstance(result, AgentFailure), result
    assert result.kind == "timed-out"
    nothing_left(tmp_path)


def test_a_node_that_dies_mid_run_fails_it_as_infrastructure_and_the_next_run_goes_elsewhere(
    cluster: RayCluster, repo: Path, tmp_path: Path
) -> None:
    """A node of its own (``doomed_slot``) is killed whole while its agent works: the run ends
    with an infrastructure failure (no attempt spent) within seconds; the same run started again
    lands on another node with that resource and completes."""
    doomed = cluster.add_node({"doomed_slot": 1})
    assert wait_for(lambda: len(node_id("doomed_slot")) == 1, 120)
    [doomed_id] = node_id("doomed_slot")
    with ScriptedModelServer([load_scenario("hang")]) as server:
        runtime = remote_runtime(cluster, repo, tmp_path, server.client_env(), slot="doomed_slot")
        killed_at: list[float] = []

        def kill_the_node() -> None:
            assert server.wait_until(lambda s: s.hanging >= 1, 240)
            killed_at.append(_now())
            kill(doomed)

        _, lost = drive_until_killed(runtime, implementor("d"), kill_the_node)
        took = _now() - killed_at[0]
        print(f"the lost run failed {took:.1f}s after its node was killed: {lost}")
        assert isinstance(lost, AgentFailure), lost
        assert lost.infrastructure, lost
        assert took < 60, f"the lost run took {took:.1f}s to fail"
    cluster.add_node({"doomed_slot": 1})
    with ScriptedModelServer([load_scenario("implement")]) as server:
        runtime = remote_runtime(cluster, repo, tmp_path, server.client_env(), slot="doomed_slot")
        _, result = drive(runtime, implementor("e"))
    assert isinstance(result, ImplementorResult), result
    assert where(repo, implementor("e"))["node_id"] != doomed_id


def drive_until_killed(runtime: Any, params: ImplementorStartParams, kill: Any) -> Any:
    """Start a run, kill its node when ``kill`` says, read it to its end."""
    import anyio  # noqa: PLC0415

    async def main() -> Any:
        handle = await runtime.start_agent(params)
        await anyio.to_thread.run_sync(kill)
        _ = [chunk async for chunk in handle.output]
        try:
            return None, await handle.result
        except AgentFailure as failure:
            return None, failure

    return anyio.run(main)


def kill(node: Node) -> None:
    node.kill()


def _now() -> float:
    import time  # noqa: PLC0415

    return time.monotonic()


def cluster_processes(home: Path) -> set[int]:
    """The Ray processes of clusters started with ``HOME=home``: every node process inherits the
    environment of the ``ray start`` that made it, so another test's cluster running beside this
    one (another module, another worker, another suite) is not counted."""
    found = set()
    for proc in psutil.process_iter(["cmdline"]):
        if not any("cpe-ray-" in arg for arg in (proc.info.get("cmdline") or ())):
            continue
        with contextlib.suppress(psutil.Error):
            if proc.environ().get("HOME") == str(home):
                found.add(proc.pid)
    return found


def test_the_demo_loop_with_implementors_on_a_local_cluster_is_done(tmp_path: Path) -> None:
    """``cpe demo --remote ray``: the demo starts a head and a worker node, every implementor
    run goes to the worker node, every item is done, and the cluster is gone after it."""
    from tests.e2e.test_demo import assert_loop_done, run_demo  # noqa: PLC0415

    repo, stdout = run_demo(tmp_path, "--remote", "ray")  # with HOME=tmp_path
    assert "implementors on a local Ray cluster" in stdout
    assert_loop_done(repo)
    runs = repo / ".cpe" / "runs"
    placed = [json.loads(p.read_text()) for p in runs.glob("implementor-*/remote.json")]
    assert len(placed) >= 3, "every implementor run went to the cluster"
    assert len({p["node_id"] for p in placed}) == 1  # the worker node, the only one with a slot
    assert not list(runs.glob("planner-*/remote.json"))  # the planner ran on the head
    assert not list(runs.glob("reviewer-*/remote.json"))
    assert cluster_processes(tmp_path) == set(), "the demo's cluster is gone"
    assert [p for p in (tmp_path / "nodes").glob("*/*") if p.is_dir()] == []

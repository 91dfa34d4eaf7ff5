"""The local Ray cluster the remote runtime's tests and benchmark start
(adapters/runtime/remote/cluster.py), and the runtime context they build remote runtimes with."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from adapters.bash_guard.config import BashGuardConfig
from adapters.runtime.common import RuntimeCommon, RuntimeContext
from adapters.runtime.pricing import DEFAULT_PRICES
from adapters.runtime.remote.cluster import Node, RayCluster, ray_cluster
from adapters.runtime.sandbox.config import SandboxConfig

__all__ = ["Node", "RayCluster", "ray_cluster", "runtime_context"]


def runtime_context(
    repo: Path, env: Mapping[str, str], logs_dir: Path, max_agent_duration: float = 300
) -> RuntimeContext:
    """The runtime context of a run on ``repo`` (no sandbox here, the default sandbox settings
    shipped to a node, no setup command, an isolated home, ``env`` added to the agent's
    environment), logging into ``logs_dir``."""
    common = RuntimeCommon(
        max_agent_duration=max_agent_duration,
        max_budget_usd=None,
        repeat_limit=None,
        unchanged_limit=None,
        agent_sessions=True,
        context_paths=(".claude/CLAUDE.md",),
        setup_command="",
        setup_timeout=600,
        hooks={},
        agent_env=dict(env),
        isolated_home=True,
        bash_guard=BashGuardConfig(),
        prices=dict(DEFAULT_PRICES),
        sandbox=SandboxConfig(),
        models={},
        idle_timeout=None,
        codex_overrides=(),
    )
    return RuntimeContext(
        common,
        repo_root=str(repo),
        default_branch="main",
        logs_dir=str(logs_dir),
        sandbox=None,
        sandbox_missing="",
    )

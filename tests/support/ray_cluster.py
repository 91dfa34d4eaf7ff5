"""The local Ray cluster the remote runtime's tests and benchmark start
(adapters/runtime/remote/cluster.py), and the runtime context they build remote runtimes with."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from adapters.bash_guard.config import BashGuardConfig
from adapters.cli.settings import RuntimeContext
from adapters.runtime.pricing import DEFAULT_PRICES
from adapters.runtime.remote.cluster import Node, RayCluster, ray_cluster
from domain.ports import SessionLogging

__all__ = ["Node", "RayCluster", "ray_cluster", "runtime_context"]


def runtime_context(
    repo: Path, env: Mapping[str, str], logs_dir: Path, max_agent_duration: float = 300
) -> RuntimeContext:
    """The shared runtime settings of a run on ``repo`` (no sandbox, no setup command, an
    isolated home, ``env`` added to the agent's environment), logging into ``logs_dir``."""
    return RuntimeContext(
        shared={
            "repo_root": str(repo),
            "default_branch": "main",
            "max_agent_duration": max_agent_duration,
            "logging": SessionLogging(logs_dir=str(logs_dir)),
            "context_paths": (".claude/CLAUDE.md",),
            "setup_command": "",
            "setup_timeout": 600,
            "hooks": {},
            "agent_env": dict(env),
            "isolated_home": True,
            "bash_guard": BashGuardConfig(),
            "sandbox": None,
            "sandbox_missing": "",
            "prices": dict(DEFAULT_PRICES),
        },
        models={},
        idle_timeout=None,
    )

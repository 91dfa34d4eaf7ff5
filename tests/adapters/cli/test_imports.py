"""What each ``cpe`` command imports, as a user runs it (a subprocess, ``python -X importtime``):
the read-only commands an operator types all day leave the engine, its runtimes, the vendor
SDKs and the services to ``cpe run`` (docs/benchmarks.md has what that saves in time)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.adapters.cli.test_cli import ROOT, cpe
from tests.support.git import make_repo

CONFIG = "[provider.local]\npipeline_command = []\n"

# cpe run's own: the engine and its actors, the services beside it, the runtimes and the SDKs
# they drive, logging's configuration.
ENGINE_ONLY = (
    "actors.engine",
    "actors.assembly",
    "actors.startup",
    "actors.process",
    "actors.services",
    "actors.loop",
    "actors.pollers",
    "actors.session_actor",
    "actors.logs",
    "adapters.host.control",
    "adapters.host.console",
    "adapters.dashboard",
    # (each vendor's settings.py, its kinds' models, is the configuration's: read everywhere)
    "adapters.runtime.claude.sdk",
    "adapters.runtime.claude.cli_runner",
    "adapters.runtime.codex.runner",
    "adapters.runtime.codex.run",
    "adapters.runtime.codex.home",
    "adapters.runtime.codex.sandbox",
    "adapters.runtime.codex.signals",
    "adapters.runtime.cli",
    "claude_agent_sdk",
    "githubkit",
    "ray",
    # Linear's and Jira's providers and their HTTP client: the configuration embeds only their
    # settings (adapters/providers/{linear,jira}/__init__.py import the provider lazily).
    "httpx",
    "adapters.providers.linear.provider",
    "adapters.providers.jira.provider",
)

# What reading supervisor.toml and the local tracker needs none of: the engine's settings models
# live apart from the actors (actors/settings.py), the sandbox's and the Bash guard's packages
# import their heavy modules on first use, and the tracker's reads run git without GitPython and
# leave the pipeline (psutil, anyio) and the spec reader (PyYAML) to cpe run.
READ_PATH_ONLY_NOT = (
    "pykka",
    "actors.executor",
    "actors.writes",
    "actors.supervisor",
    "actors.session_registry",
    "adapters.runtime.sandbox.bwrap",
    "adapters.runtime.workspace.worktrees",
    "adapters.runtime.process.launcher",
    "adapters.bash_guard.guard",
    "adapters.providers.local.pipeline",
    "adapters.providers.local.pipeline_runner",
    "adapters.providers.specs",
    "git",
    "yaml",
    "psutil",
    "anyio",
)


def imported(*args: str, cwd: Path = ROOT) -> set[str]:
    """The modules ``cpe ARGS`` imports, from ``-X importtime``'s report (after it succeeded)."""
    result = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "adapters.cli", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=120,
        check=False,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)},
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return set(re.findall(r"^import time:\s+\d+ \|\s+\d+ \|\s*(\S+)$", result.stderr, re.M))


def within(modules: set[str], packages: tuple[str, ...]) -> list[str]:
    return sorted(m for m in modules if any(m == p or m.startswith(p + ".") for p in packages))


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A repository an engine has not run on, with a work item (``cpe work add``)."""
    path = make_repo(tmp_path_factory.mktemp("imports") / "repo", {"supervisor.toml": CONFIG})
    added = cpe("work", "add", "Greeting", cwd=path)
    assert added.returncode == 0, added.stderr
    return path


def test_help_imports_the_parser_and_nothing_of_the_engine_or_the_config() -> None:
    modules = imported("--help")
    assert "adapters.cli.parser" in modules  # the report is read
    assert within(modules, ("actors", "structlog", "pykka", "git")) == []
    assert within(modules, ("adapters.cli.settings", "adapters.cli.build")) == []
    assert within(modules, ("adapters.cli.repository", "adapters.cli.runtimes")) == []


@pytest.mark.parametrize(
    "command",
    [("status",), ("work", "list"), ("work", "show", "1"), ("costs",)],
    ids=["status", "work-list", "work-show", "costs"],
)
def test_a_read_only_command_imports_neither_the_engine_nor_a_runtime_nor_a_vendor_sdk(
    repo: Path, command: tuple[str, ...]
) -> None:
    modules = imported(*command, cwd=repo)
    assert "adapters.cli.settings" in modules  # it did read the configuration
    assert within(modules, ENGINE_ONLY) == []


@pytest.mark.parametrize(
    ("command", "reader"),
    [
        (("status",), "adapters.providers.local.provider"),
        (("work", "list"), "adapters.providers.local.provider"),
        (("work", "show", "1"), "adapters.providers.local.provider"),
        (("costs",), "actors.journal"),
    ],
    ids=["status", "work-list", "work-show", "costs"],
)
def test_a_read_only_command_imports_neither_pykka_nor_gitpython_pyyaml_psutil_nor_the_sandbox(
    repo: Path, command: tuple[str, ...], reader: str
) -> None:
    modules = imported(*command, cwd=repo)
    assert {"adapters.cli.settings", reader} <= modules  # the config and what it reads
    assert within(modules, READ_PATH_ONLY_NOT) == []

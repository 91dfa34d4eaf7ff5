"""The composition root: from ``supervisor.toml`` and a repository to a running engine.

``build_app`` validates what a user can get wrong (not a git repository, no default branch, a
missing token, an unknown or unavailable runtime, a bad ``supervisor.toml``) and turns each into
a ``ConfigError`` with one clear line; then it builds the provider, one runtime adapter per
role, and the engine. Concrete adapters are imported here and nowhere in ``actors/``.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from actors.config import CpeConfig, load_config, parse_config
from actors.engine import Engine, create_engine
from adapters.runtime.bash_guard import BashGuardConfig
from domain.errors import ConfigError, CpeError
from domain.models import AgentRole
from domain.ports import ProviderInterfaces, RuntimeAdapter, RuntimeAdapterDeps, SessionLogging

CONFIG_NAME = "supervisor.toml"
# The settings the claude-cli runtime shares with the SDK runtime's config.
_CLI_FIELDS = {
    "repo_root",
    "default_branch",
    "max_agent_duration",
    "logging",
    "context_paths",
    "setup_command",
    "agent_env",
    "isolated_home",
    "bash_guard",
}


@dataclass
class App:
    config: CpeConfig
    repo: Path
    default_branch: str
    state_dir: Path
    engine: Engine
    closers: list[Any] = field(default_factory=list)

    def close(self) -> None:
        for closer in reversed(self.closers):
            closer()


def resolve_config(config_path: Path | None, repo: Path | None) -> tuple[CpeConfig, Path]:
    """The configuration and the repository it applies to."""
    if config_path is not None:
        config = load_config(config_path)
        base = config_path.resolve().parent
    else:
        candidate = (repo or Path.cwd()) / CONFIG_NAME
        config = load_config(candidate) if candidate.exists() else parse_config({})
        base = (repo or Path.cwd()).resolve()
    root = repo or (base / config.repository.path)
    return config, git_toplevel(root)


def git_toplevel(path: Path) -> Path:
    if not path.is_dir():
        raise ConfigError(f"{path}: no such directory", expected="a git repository")
    result = subprocess.run(
        ["git", "-C", str(path), "rev-parse", "--show-toplevel"],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    if result.returncode != 0:
        raise ConfigError(f"{path}: not a git repository", expected="a repository (git init)")
    return Path(result.stdout.strip())


def default_branch(config: CpeConfig, repo: Path) -> str:
    from adapters.git_plumbing import GitRepo, detect_default_branch  # noqa: PLC0415

    name = config.repository.default_branch
    if not name:
        try:
            name = detect_default_branch(GitRepo(repo))
        except CpeError as exc:
            raise ConfigError(
                f"{repo}: no default branch",
                expected="a first commit, or repository.default_branch",
            ) from exc
    check = subprocess.run(
        ["git", "-C", str(repo), "rev-parse", "--verify", "--quiet", f"refs/heads/{name}"],
        capture_output=True,
        check=False,
        timeout=60,
    )
    if check.returncode != 0:
        source = "repository.default_branch" if config.repository.default_branch else "detected"
        raise ConfigError(
            f"no default branch: {name!r} ({source}) has no commit in {repo}",
            expected="a first commit on it, or repository.default_branch naming a branch",
        )
    return name


def build_app(
    config_path: Path | None = None,
    repo: Path | None = None,
    *,
    agent_env: Mapping[str, str] | None = None,
    isolated_home: bool = False,
) -> App:
    config, root = resolve_config(config_path, repo)
    branch = default_branch(config, root)
    state_dir = root / config.engine.state_dir
    closers: list[Any] = []
    provider = _provider(config, root, branch, state_dir, closers)
    roles = config.runtime.roles.model_dump()
    factory = _runtime_factory(
        config, root, branch, state_dir, roles, agent_env=agent_env, isolated_home=isolated_home
    )
    engine = create_engine(config.engine_config(provider, factory, repo_root=root))
    return App(config, root, branch, state_dir, engine, closers)


def _provider(
    config: CpeConfig, root: Path, branch: str, state_dir: Path, closers: list[Any]
) -> ProviderInterfaces:
    if config.provider.kind == "github":
        github = config.provider.github
        if github is None:
            raise ConfigError("provider.github: missing", expected="repository and token_env")
        settings = {**github.model_dump(), "default_branch": branch}
        if settings.get("app_id") is None and not os.environ.get(github.token_env):
            raise ConfigError(
                f"provider.github.token_env: the environment variable {github.token_env} is "
                "not set",
                expected="a GitHub token in that variable",
            )
        try:
            from adapters.github import create_github_provider  # noqa: PLC0415
        except ImportError as exc:
            raise ConfigError(
                "provider.kind: the GitHub provider is not available in this version",
                expected="local",
            ) from exc
        from adapters.specs.reader import GitSpecReader  # noqa: PLC0415

        specs = GitSpecReader(root, config.specs.globs, default_branch=branch)
        try:
            provider, interfaces = create_github_provider(settings, specs)
        except ValidationError as exc:
            problems = "; ".join(
                f"provider.github.{'.'.join(map(str, e['loc']))}: {e['msg']}"
                for e in exc.errors(include_url=False)
            )
            raise ConfigError(problems) from exc
        closers.append(provider.close)
        return interfaces
    from adapters.local.pipeline import LocalPipeline  # noqa: PLC0415
    from adapters.local.provider import create_local_provider  # noqa: PLC0415

    local = config.provider.local
    pipeline = (
        LocalPipeline(local.pipeline_command, local.pipeline_timeout)
        if local.pipeline_command
        else None
    )
    local_provider, interfaces = create_local_provider(
        root, state_dir, default_branch=branch, pipeline=pipeline, spec_globs=config.specs.globs
    )
    closers.append(local_provider.close)
    return interfaces


def _runtime_factory(
    config: CpeConfig,
    root: Path,
    branch: str,
    state_dir: Path,
    roles: Mapping[str, str],
    *,
    agent_env: Mapping[str, str] | None,
    isolated_home: bool,
) -> Any:
    for role, kind in roles.items():
        if kind not in ("claude-sdk", "claude-cli"):
            raise ConfigError(
                f"runtime.roles.{role}: the {kind} runtime is not available in this version",
                expected="claude-sdk or claude-cli",
            )
    from adapters.runtime.claude_sdk import (  # noqa: PLC0415
        ClaudeAdapterConfig,
        bundled_cli,
        create_claude_adapter,
    )
    from adapters.runtime.runners.runtime import (  # noqa: PLC0415
        CliRuntimeConfig,
        create_cli_runtime,
    )

    cli = bundled_cli()
    if not Path(cli).exists():
        raise ConfigError(
            f"runtime claude-sdk: the claude CLI was not found at {cli}",
            expected="claude-agent-sdk installed with its bundled CLI",
        )
    try:
        guard = BashGuardConfig.model_validate(config.bash_guard.model_dump())
    except ValueError as exc:
        raise ConfigError(f"bash_guard: {exc}") from exc
    adapter_config = ClaudeAdapterConfig(
        repo_root=str(root),
        default_branch=branch,
        max_agent_duration=config.runtime.max_agent_duration,
        logging=SessionLogging(
            agent_sessions=config.logging.agent_transcripts, logs_dir=str(state_dir / "runs")
        ),
        context_paths=tuple(config.runtime.context_paths),
        setup_command=config.runtime.setup_command,
        agent_env=dict(agent_env or {}),
        isolated_home=isolated_home,
        bash_guard=guard,
    )

    def factory(deps: RuntimeAdapterDeps) -> dict[AgentRole, RuntimeAdapter]:
        built: dict[str, RuntimeAdapter] = {}  # one adapter per kind, shared by its roles
        adapters: dict[AgentRole, RuntimeAdapter] = {}
        for role in ("planner", "implementor", "reviewer"):
            kind = roles[role]
            if kind not in built:
                built[kind] = (
                    create_claude_adapter(adapter_config, deps)
                    if kind == "claude-sdk"
                    else create_cli_runtime(
                        CliRuntimeConfig(**adapter_config.model_dump(include=_CLI_FIELDS)), deps
                    )
                )
            adapters[role] = built[kind]
        return adapters

    return factory

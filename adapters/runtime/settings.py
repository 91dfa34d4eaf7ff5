"""The runtimes' settings: one model per runtime kind, and what every kind is built with.

``RuntimeSettings`` is a union discriminated on ``kind``: ``ClaudeSdkRuntime`` (claude-sdk),
``ClaudeCliRuntime`` (claude-cli), ``CodexCliRuntime`` (codex-cli). Each says what cannot work
before anything starts (``check()``), which CLI it runs (``cli()``, for the version check) and
builds its runtime adapter (``build()``), importing that runtime only then: a configuration of
one vendor's runtimes imports nothing of another's. In ``supervisor.toml`` ``[runtime.roles]``
names a kind per role and ``[runtime.claude_cli]``, ``[runtime.codex_cli]`` hold those kinds'
settings without a ``kind`` key (``kind`` is each model's default; claude-sdk has no section).

``RuntimeCommon`` is the part every runtime kind shares, typed: the composition root
(adapters/cli/build.py) fills it from ``supervisor.toml`` and the command line; a remote run ships
it to its node as ``model_dump()`` and the node validates it again, so a field renamed on one
side is an error there, never a setting silently dropped. It is data only (JSON-able): what
belongs to the machine a run happens on (the repository, the logs' directory, the sandbox found
there) is the ``RuntimeContext``'s own, beside it.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Literal, TypeVar, get_args

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from adapters.bash_guard.config import BashGuardConfig
from adapters.runtime.pricing import ModelPrice
from adapters.runtime.sandbox.config import SandboxConfig
from domain.errors import ConfigError
from domain.ports import RuntimeAdapter, RuntimeAdapterDeps, SessionLogging

if TYPE_CHECKING:
    from adapters.runtime.sandbox import Sandbox
    from adapters.runtime.skeleton import AgentRuntimeConfig
    from adapters.runtime.workspace.agents import AgentSpec


class RuntimeCommon(BaseModel):
    """The settings every runtime kind is built with, whatever machine it runs on. Every field
    is required and an unknown one refused: what the head ships a node is all of it, by name."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    max_agent_duration: float = Field(gt=0)
    max_budget_usd: float | None  # per run; None: none
    repeat_limit: int | None  # the same tool call this many times in a row: stopped
    unchanged_limit: int | None  # an implementor's tool calls changing nothing: stopped
    agent_sessions: bool  # the agents' transcripts kept ([logging] agent_transcripts)
    context_paths: tuple[str, ...]
    setup_command: str  # the after_create hook
    setup_timeout: float = Field(gt=0)
    # The other workspace hooks: name (before_run, after_run, before_remove) → (command, timeout)
    hooks: dict[str, tuple[str, float]]
    agent_env: dict[str, str]  # added to the agent's environment on purpose
    isolated_home: bool
    bash_guard: BashGuardConfig
    prices: dict[str, ModelPrice]  # USD per million tokens by model
    sandbox: SandboxConfig  # its settings: each machine finds its own sandbox with them
    models: dict[str, str]  # [runtime.models] without its empty entries: a model per role
    idle_timeout: float | None  # [runtime] idle_timeout (None: off); a runtime's own wins
    codex_overrides: tuple[str, ...]  # -c values cpe adds (the demo's scripted model)


@dataclass(frozen=True)
class RuntimeContext:
    """``common`` and what a runtime is built with on this machine: the repository and the
    branch its worktrees start from, the directory of its runs' logs, the sandbox found here
    (or why there is none). ``assembled``: the prompt and agent definition a remote run's head
    assembled (None: the runtime assembles its own, as a local run does)."""

    common: RuntimeCommon
    repo_root: str
    default_branch: str
    logs_dir: str
    sandbox: Sandbox | None
    sandbox_missing: str
    assembled: tuple[str, AgentSpec] | None = None


ConfigT = TypeVar("ConfigT", bound="AgentRuntimeConfig")


def runtime_config(config: type[ConfigT], context: RuntimeContext, **own: Any) -> ConfigT:
    """A runtime's config (``config``: ``ClaudeAdapterConfig``, ``CliRuntimeConfig``) from
    ``context``, and ``own``: the fields its kind sets its own way (model, idle timeout)."""
    common = context.common
    return config(
        repo_root=context.repo_root,
        default_branch=context.default_branch,
        logging=SessionLogging(agent_sessions=common.agent_sessions, logs_dir=context.logs_dir),
        sandbox=context.sandbox,
        sandbox_missing=context.sandbox_missing,
        assembled=context.assembled,
        max_agent_duration=common.max_agent_duration,
        max_budget_usd=common.max_budget_usd,
        repeat_limit=common.repeat_limit,
        unchanged_limit=common.unchanged_limit,
        context_paths=common.context_paths,
        setup_command=common.setup_command,
        setup_timeout=common.setup_timeout,
        hooks=common.hooks,
        agent_env=common.agent_env,
        isolated_home=common.isolated_home,
        bash_guard=common.bash_guard,
        prices=common.prices,
        **own,
    )


# ---------------------------------------------------------------------------- the kinds

RuntimeKind = Literal["claude-sdk", "claude-cli", "codex-cli"]
RUNTIME_KINDS: tuple[RuntimeKind, ...] = get_args(RuntimeKind)

# Every duration is finite and bounded: an infinite or huge one passes a "> 0" check, then
# overflows a timer (a SIGTERM could no longer stop cpe).
DAY = 86_400.0
Seconds = Annotated[float, Field(gt=0, le=DAY, allow_inf_nan=False)]


def _expand(value: str) -> str:
    """``~`` and ``$VARIABLES`` in a configured path, as a shell would expand them."""
    return os.path.expandvars(os.path.expanduser(value)) if value else value


# A path from the configuration: ``~`` and environment variables expanded.
ExpandedPath = Annotated[str, AfterValidator(_expand)]


class _Runtime(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    # The model account the kind uses: usage windows and rate limits are the account's.
    account: ClassVar[str]


class ClaudeSdkRuntime(_Runtime):
    """``claude-sdk``: the Claude Agent SDK (adapters/runtime/claude/sdk.py); no section."""

    kind: Literal["claude-sdk"] = "claude-sdk"
    account: ClassVar[str] = "anthropic"

    def check(self) -> None:
        """A ``ConfigError`` for what cannot work, before anything starts."""
        from adapters.runtime.workspace.launcher import LAUNCHER  # noqa: PLC0415

        _bundled_claude()
        if not os.access(LAUNCHER, os.X_OK):
            raise ConfigError(
                f"runtime claude-sdk: cpe's launcher {LAUNCHER} is not executable",
                expected="cpe installed with its file modes (pip install keeps them)",
            )

    def cli(self) -> tuple[str, str, str]:
        """The CLI it runs, for the version check: family, path, the key that names it."""
        cli = _bundled_claude()
        return "claude", executable(cli) or cli, "claude-agent-sdk's bundled CLI"

    def build(self, context: RuntimeContext, deps: RuntimeAdapterDeps) -> RuntimeAdapter:
        from adapters.runtime.claude.sdk import (  # noqa: PLC0415
            ClaudeAdapterConfig,
            create_claude_adapter,
        )

        common = context.common
        config = runtime_config(
            ClaudeAdapterConfig, context, models=common.models, idle_timeout=common.idle_timeout
        )
        return create_claude_adapter(config, deps)


class ClaudeCliRuntime(_Runtime):
    """``[runtime.claude_cli]``: the ``claude -p`` runtime."""

    kind: Literal["claude-cli"] = "claude-cli"
    account: ClassVar[str] = "anthropic"

    cli_path: ExpandedPath = ""  # empty: the CLI bundled with claude-agent-sdk
    model: str = ""  # empty: the CLI's default; else one of sonnet, opus, haiku
    idle_timeout: Seconds | None = None  # no output for this long: killed

    def check(self) -> None:
        from adapters.runtime.claude.cli_runner import CLAUDE_CAPABILITIES  # noqa: PLC0415

        if not self.cli_path:
            _bundled_claude()
        elif not executable(self.cli_path):
            raise ConfigError(
                f"runtime.claude_cli.cli_path: the claude CLI was not found at {self.cli_path!r}",
                expected="an executable claude, or empty for the bundled one",
            )
        models = CLAUDE_CAPABILITIES.available_models
        if self.model and self.model not in models:
            raise ConfigError(
                f"runtime.claude_cli.model: {self.model!r} is not a model the claude CLI runner "
                "offers",
                expected=f"empty or one of {', '.join(models)}",
            )

    def cli(self) -> tuple[str, str, str]:
        path = self.cli_path or _bundled_claude()
        return "claude", executable(path) or path, "runtime.claude_cli.cli_path"

    def build(self, context: RuntimeContext, deps: RuntimeAdapterDeps) -> RuntimeAdapter:
        from adapters.runtime.claude.cli_runner import create_claude_cli_runtime  # noqa: PLC0415
        from adapters.runtime.cli.cli_runtime import CliRuntimeConfig  # noqa: PLC0415

        config = runtime_config(
            CliRuntimeConfig,
            context,
            model=self.model or None,
            models=context.common.models,
            idle_timeout=self.idle_timeout or context.common.idle_timeout,
        )
        return create_claude_cli_runtime(config, deps, cli_path=self.cli_path or None)


class CodexCliRuntime(_Runtime):
    """``[runtime.codex_cli]``: the ``codex exec`` runtime."""

    kind: Literal["codex-cli"] = "codex-cli"
    account: ClassVar[str] = "openai"

    cli_path: ExpandedPath = "codex"  # a name on PATH or a path
    model: str = ""  # empty: codex's default model; else one of ``models``
    models: list[str] = Field(default_factory=lambda: ["gpt-5-codex", "gpt-5"], min_length=1)
    sandbox: Literal["workspace-write", "danger-full-access"] = "workspace-write"
    overrides: list[str] = Field(default_factory=list)  # extra ``-c key=value`` (TOML values)
    idle_timeout: Seconds | None = None

    def check(self) -> None:
        if executable(self.cli_path) is None:
            raise ConfigError(
                f"runtime.codex_cli.cli_path: the codex CLI was not found ({self.cli_path!r})",
                expected="codex on PATH (npm install -g @openai/codex) or its path",
            )
        if self.model and self.model not in self.models:
            raise ConfigError(
                f"runtime.codex_cli.model: {self.model!r} is not in runtime.codex_cli.models",
                expected=f"empty or one of {', '.join(self.models)}",
            )
        if self.sandbox == "danger-full-access":
            raise ConfigError(
                "runtime.codex_cli.sandbox: danger-full-access leaves the agent unconfined "
                "(codex has no tool lists and no hook for cpe's Bash guard)",
                expected="workspace-write",
            )
        for override in self.overrides:
            key, equals, _ = override.partition("=")
            if not equals or not key.strip():
                raise ConfigError(
                    f"runtime.codex_cli.overrides: {override!r} is not key=value",
                    expected='a codex -c value, e.g. model_reasoning_effort="high"',
                )

    def cli(self) -> tuple[str, str, str]:
        return "codex", executable(self.cli_path) or self.cli_path, "runtime.codex_cli.cli_path"

    def build(self, context: RuntimeContext, deps: RuntimeAdapterDeps) -> RuntimeAdapter:
        from adapters.runtime.cli.cli_runtime import CliRuntimeConfig  # noqa: PLC0415
        from adapters.runtime.codex.runner import create_codex_runtime  # noqa: PLC0415

        config = runtime_config(
            CliRuntimeConfig,
            context,
            model=self.model or None,
            idle_timeout=self.idle_timeout or context.common.idle_timeout,
        )
        return create_codex_runtime(
            config,
            deps,
            cli_path=executable(self.cli_path) or self.cli_path,
            overrides=[*self.overrides, *context.common.codex_overrides],
            models=self.models,
            sandbox=self.sandbox,
        )


RuntimeSettings = Annotated[
    ClaudeSdkRuntime | ClaudeCliRuntime | CodexCliRuntime, Field(discriminator="kind")
]


def _bundled_claude() -> str:
    """The claude CLI bundled with claude-agent-sdk; a ``ConfigError`` when it is not there."""
    from adapters.runtime.claude.vendor import bundled_cli  # noqa: PLC0415

    cli = bundled_cli()
    if not Path(cli).exists():
        raise ConfigError(
            f"runtime claude-sdk: the claude CLI was not found at {cli}",
            expected="claude-agent-sdk installed with its bundled CLI",
        )
    return cli


def executable(name: str) -> str | None:
    """``name`` as a runnable path: a path that is an executable file, or a name on PATH."""
    if os.sep in name:
        candidate = Path(name).expanduser()
        return str(candidate) if candidate.is_file() and os.access(candidate, os.X_OK) else None
    return shutil.which(name)

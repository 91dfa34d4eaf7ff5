"""The Claude kinds' settings: ``claude-sdk`` (the Agent SDK, no section of its own) and
``claude-cli`` (``[runtime.claude_cli]``). Importing this imports no runtime: ``check()`` and
``build()`` import what they need of this package when called."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar, Literal

from adapters.runtime.common import (
    ExpandedPath,
    RuntimeContext,
    RuntimeKindSettings,
    Seconds,
    executable,
    runtime_config,
)
from domain.errors import ConfigError

if TYPE_CHECKING:
    from domain.ports import RuntimeAdapter, RuntimeAdapterDeps


class ClaudeSdkRuntime(RuntimeKindSettings):
    """``claude-sdk``: the Claude Agent SDK (adapters/runtime/claude/sdk.py); no section."""

    kind: Literal["claude-sdk"] = "claude-sdk"
    account: ClassVar[str] = "anthropic"

    def check(self) -> None:
        """A ``ConfigError`` for what cannot work, before anything starts."""
        from adapters.runtime.process.launcher import LAUNCHER  # noqa: PLC0415

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


class ClaudeCliRuntime(RuntimeKindSettings):
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

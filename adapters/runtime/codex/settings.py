"""The ``codex-cli`` kind's settings (``[runtime.codex_cli]``). Importing this imports no
runtime: ``build()`` imports the codex runner when called."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar, Literal

from pydantic import Field

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


class CodexCliRuntime(RuntimeKindSettings):
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

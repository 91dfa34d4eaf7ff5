"""What every runtime kind is built with besides its own settings, and what the kinds share.

``RuntimeCommon`` is the part every runtime kind shares, typed: the composition root
(adapters/cli/runtimes.py) fills it from ``supervisor.toml`` and the command line; a remote run
ships it to its node as ``model_dump()`` and the node validates it again, so a field renamed on
one side is an error there, never a setting silently dropped. It is data only (JSON-able): what
belongs to the machine a run happens on (the repository, the logs' directory, the sandbox found
there) is the ``RuntimeContext``'s own, beside it. ``RuntimeKindSettings`` is the base of each
kind's settings model (adapters/runtime/settings.py has the union of them).
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, TypeVar

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from adapters.bash_guard.config import BashGuardConfig
from adapters.runtime.pricing import ModelPrice
from adapters.runtime.sandbox.config import SandboxConfig
from domain.ports import SessionLogging

if TYPE_CHECKING:
    from adapters.runtime.agent_runtime import AgentRuntimeConfig
    from adapters.runtime.prompt.agents import AgentSpec
    from adapters.runtime.sandbox import Sandbox


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


# ---------------------------------------------------------------------------- what the kinds share

# Every duration is finite and bounded: an infinite or huge one passes a "> 0" check, then
# overflows a timer (a SIGTERM could no longer stop cpe).
DAY = 86_400.0
Seconds = Annotated[float, Field(gt=0, le=DAY, allow_inf_nan=False)]


def _expand(value: str) -> str:
    """``~`` and ``$VARIABLES`` in a configured path, as a shell would expand them."""
    return os.path.expandvars(os.path.expanduser(value)) if value else value


# A path from the configuration: ``~`` and environment variables expanded.
ExpandedPath = Annotated[str, AfterValidator(_expand)]


class RuntimeKindSettings(BaseModel):
    """The base of a runtime kind's settings: ``kind`` (a ``Literal``, the union's
    discriminator), ``check()``, ``cli()`` and ``build(context, deps)``."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    # The model account the kind uses: usage windows and rate limits are the account's.
    account: ClassVar[str]


def executable(name: str) -> str | None:
    """``name`` as a runnable path: a path that is an executable file, or a name on PATH."""
    if os.sep in name:
        candidate = Path(name).expanduser()
        return str(candidate) if candidate.is_file() and os.access(candidate, os.X_OK) else None
    return shutil.which(name)

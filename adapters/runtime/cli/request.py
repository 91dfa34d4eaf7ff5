"""What a run asks of an agent CLI (docs/contract.md, S003, S004), agent-neutral; the runner
role itself is ``runner.CliRunner``.

A :class:`RunRequest` says *what* a run needs (a worktree, a prompt, an optional model, the
guarantees it requires); a runner translates that intent into its CLI's own flags, and refuses
a request it cannot honour before anything runs (S003-03, S004-04). Capabilities are plain
data (S003-02, S004-03) so an engine can choose a runner without knowing its flags.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, get_args

from adapters.bash_guard import BashGuardConfig
from adapters.runtime.artifacts.store import Termination
from adapters.runtime.pricing import ModelPrice
from adapters.runtime.sandbox import RunSandbox

__all__ = [
    "GUARANTEES",
    "AgentProfile",
    "Guarantee",
    "RunRequest",
    "RunRejectedError",
    "RunnerCapabilities",
    "Termination",
    "check_request",
    "is_worktree",
]

Guarantee = Literal[
    "writable_workspace",
    "sandboxed_execution",
    "approval_controls",
    "tool_allow_deny",
    "structured_event_stream",
    "interactive_prompt_suppression",
]
GUARANTEES: tuple[Guarantee, ...] = get_args(Guarantee)


class RunRejectedError(ValueError):
    """A request the runner cannot honour; raised before any process starts."""


@dataclass(frozen=True)
class RunnerCapabilities:
    """What a runner supports (S003-02) and enforces natively (S004-03)."""

    name: str
    supports_model: bool
    supports_non_interactive: bool
    supports_prompt_file_inclusion: bool
    available_models: tuple[str, ...] = ()
    writable_workspace: bool = False
    sandboxed_execution: bool = False
    approval_controls: bool = False
    tool_allow_deny: bool = False
    structured_event_stream: bool = False
    interactive_prompt_suppression: bool = False
    command_guard: bool = False  # cpe's Bash guard can check every shell command (a hook)
    supports_max_turns: bool = False  # a limit on the agent's turns
    supports_max_budget: bool = False  # a limit on what the run costs
    # The run's token usage can be read as it goes (codex's session log): cpe prices it and
    # stops the run at a budget itself (``counted_budget_usd``).
    live_token_usage: bool = False

    def enforces(self, guarantee: Guarantee) -> bool:
        return bool(getattr(self, guarantee))

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "supports_model": self.supports_model,
            "supports_non_interactive": self.supports_non_interactive,
            "supports_prompt_file_inclusion": self.supports_prompt_file_inclusion,
            "available_models": list(self.available_models),
            "enforces": {g: self.enforces(g) for g in GUARANTEES},
            "command_guard": self.command_guard,
            "supports_max_turns": self.supports_max_turns,
            "supports_max_budget": self.supports_max_budget,
            "live_token_usage": self.live_token_usage,
        }


@dataclass(frozen=True)
class AgentProfile:
    """A named role the runner loads as its agent (instructions, tool allow and deny lists)."""

    name: str
    description: str
    instructions: str
    tools: tuple[str, ...] | None = None
    disallowed_tools: tuple[str, ...] | None = None


@dataclass(frozen=True)
class RunRequest:
    """One run, agent-neutral (S003-04, S004-01/02): never a raw flag of some CLI."""

    run_id: str
    worktree_path: Path
    prompt: str
    env: Mapping[str, str] | None = None
    model: str | None = None
    requested_policy: frozenset[Guarantee] = frozenset()
    prompt_reference: str | None = None
    agent: AgentProfile | None = None
    output_schema: Mapping[str, Any] | None = None
    wall_timeout: float | None = None
    idle_timeout: float | None = None
    max_turns: int | None = None
    # For a runner with no turn limit of its own: cpe counts the agent's tool calls in its
    # event stream and stops the run past this many.
    counted_max_turns: int | None = None
    max_budget_usd: float | None = None  # the run ends (error_max_budget_usd) past this cost
    # For a runner with no budget of its own but live token usage: cpe prices the usage with
    # ``token_price`` and stops the run (killed_policy) once it reaches this cost.
    counted_budget_usd: float | None = None
    token_price: ModelPrice | None = None
    # Prices the streamed usage of a runner whose own budget may fail to hold (the claude
    # CLI): at ``max_budget_usd`` cpe stops the run itself.
    prices: Mapping[str, ModelPrice] | None = None
    repeat_limit: int | None = None  # the same tool call this many times in a row: stopped
    unchanged_limit: int | None = None  # this many tool calls changing nothing: stopped
    bash_guard: BashGuardConfig | None = None  # check every shell command with cpe's guard
    sandbox: RunSandbox | None = None  # cpe's OS sandbox for the agent's commands
    sandbox_missing: str = "no sandbox was configured for this runtime"  # why sandbox is None
    read_only: bool = False  # the run has no reason to change the workspace (planner, reviewer)
    transcript_log: bool = True  # keep a human-readable transcript.log besides the normalized set
    extra: Mapping[str, Any] = field(default_factory=dict)

    def policy_dict(self) -> dict[str, Any]:
        return {"require": sorted(self.requested_policy)}


def is_worktree(path: Path) -> bool:
    """``path`` is the top of a git working tree: a linked worktree (``.git`` file) or a main
    one (``.git`` directory). Anything else — a subdirectory, a bare path — is not."""
    try:
        return path.is_dir() and (path / ".git").exists()
    except OSError:
        return False


def check_request(caps: RunnerCapabilities, run: RunRequest) -> None:
    """Refuse what ``caps`` cannot honour (S003-03/04/06, S004-04); run before start."""
    if not run.run_id or any(c in run.run_id for c in "/\\\0") or run.run_id in (".", ".."):
        raise RunRejectedError(f"run id {run.run_id!r} cannot name a run")
    if not run.prompt.strip():
        raise RunRejectedError("the prompt is empty")
    if not is_worktree(Path(run.worktree_path)):
        raise RunRejectedError(f"{run.worktree_path} is not a git worktree")
    if not caps.supports_non_interactive:
        raise RunRejectedError(f"{caps.name} cannot run non-interactively")
    if run.model is not None:
        if not caps.supports_model:
            raise RunRejectedError(f"{caps.name} cannot choose a model (asked for {run.model!r})")
        if caps.available_models and run.model not in caps.available_models:
            raise RunRejectedError(
                f"{caps.name} has no model {run.model!r} "
                f"(available: {', '.join(caps.available_models)})"
            )
    unknown = [g for g in run.requested_policy if g not in GUARANTEES]
    if unknown:
        raise RunRejectedError(f"unknown guarantees: {', '.join(sorted(unknown))}")
    missing = [g for g in sorted(run.requested_policy) if not caps.enforces(g)]
    if missing:
        raise RunRejectedError(f"{caps.name} cannot enforce: {', '.join(missing)}")
    if run.read_only and "writable_workspace" in run.requested_policy:
        raise RunRejectedError("a read-only run cannot also require a writable workspace")
    if run.bash_guard is not None and not caps.command_guard:
        raise RunRejectedError(f"{caps.name} cannot run cpe's bash guard on its commands")
    if run.counted_budget_usd is not None and (
        not caps.live_token_usage or run.token_price is None
    ):
        raise RunRejectedError(f"{caps.name} cannot count a budget without live usage and a price")
    if run.max_turns is not None and not caps.supports_max_turns:
        raise RunRejectedError(f"{caps.name} has no turn limit (asked for max_turns)")
    for name, value in (("wall_timeout", run.wall_timeout), ("idle_timeout", run.idle_timeout)):
        if value is not None and value <= 0:
            raise RunRejectedError(f"{name} must be positive")

"""A ``RuntimeAdapter`` over a CLI runner (``runner.CliRunner``), so any role can run on any
agent CLI (``claude-cli``, ``codex-cli``): vendor-neutral, each vendor's package builds it over
its own runner with its own signals.

It is a ``AgentRuntime`` (``adapters/runtime/agent_runtime.py``), as the SDK runtime is: the run
table, the worktree (implementor), the context assembly, the agent definition, the sandbox, the
deadline (``max_agent_duration``: the base has the runner stop the run as
``killed_timeout``), cancel and the reaper; with the SDK runtime's allowlisted environment, the
output-schema validation and the patch extraction. The runner does the rest: the process group,
the idle timeout, the normalized artifacts in ``<logs_dir>/../runs/<session_id>``.

What a run asks of its runner is intent, derived from the role and the runner's declared
capabilities (S004-02, S004-03), never a flag: every run needs a non-interactive structured event
stream; an implementor needs a writable workspace, a planner or reviewer runs read-only
(``read_only``: codex gets ``--sandbox read-only``). The agent must be confined one way or the
other: by its definition's tool lists and cpe's Bash guard where the runner can enforce them
(claude-cli), by the CLI's own sandbox otherwise (codex-cli); a runner that can do neither is
refused when the runtime is built, and a guarantee the runner cannot give fails the run
before anything starts (S004-04).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import structlog

from adapters.runtime.agent_runtime import AgentRuntime, AgentRuntimeConfig, Run, Start
from adapters.runtime.cli.jsonl import CliOutcome
from adapters.runtime.cli.process import PIDFILE, kill_group
from adapters.runtime.cli.request import (
    AgentProfile,
    Guarantee,
    RunRejectedError,
    RunRequest,
)
from adapters.runtime.cli.runner import CliRunHandle, CliRunner
from adapters.runtime.pricing import main_model, token_cost
from adapters.runtime.process.agent_env import run_env
from adapters.runtime.prompt.agents import (
    AgentSpec,
    effective_disallowed_tools,
    effective_tools,
)
from adapters.runtime.signals import RunSignals, SignalsFactory
from domain.errors import AgentFailure, AgentFailureKind
from domain.models import RunUsage, SessionId
from domain.ports import RuntimeAdapterDeps
from domain.results import (
    AgentResult,
    output_schema,
)

__all__ = ["CliRuntime", "CliRuntimeConfig"]

log = structlog.get_logger("cpe.runtime.cli")

# How a run stopped by [budget] per_run_usd, or for making no progress, says so.
OWN_DOING = ("budget: ", "no progress: ")

_FAILURE_KIND: dict[str, AgentFailureKind] = {
    "killed_timeout": "timed-out",
    "killed_idle": "timed-out",
    "killed_policy": "cancelled",
}


class CliRuntimeConfig(AgentRuntimeConfig):
    """A CLI runtime's config: all of it is every runtime's (``AgentRuntimeConfig``)."""


@dataclass(kw_only=True)
class _Run(Run):
    handle: CliRunHandle | None = None
    signals: RunSignals | None = None  # reads what its CLI says of the model API
    texts: Callable[[Mapping[str, Any]], list[str]] = lambda _: []  # what the agent says

    def event(self, event: dict[str, Any]) -> None:  # a reader thread
        for text in self.texts(event):
            self.loop.call_soon_threadsafe(self.output.put_nowait, text)
        if self.signals is not None:
            self.signals.event(event)


class CliRuntime(AgentRuntime[CliRuntimeConfig, _Run]):
    """``signals``: how the CLI's events tell of the model API (``adapters/runtime/signals.py``,
    each vendor's own); None: the runtime reports nothing while a run goes on."""

    def __init__(
        self,
        runner: CliRunner,
        config: CliRuntimeConfig,
        deps: RuntimeAdapterDeps,
        *,
        signals: SignalsFactory | None = None,
    ):
        super().__init__(config, deps)
        self.runner = runner
        self.signals = signals
        caps = runner.get_capabilities()
        if not (caps.tool_allow_deny and caps.command_guard) and not caps.sandboxed_execution:
            raise ValueError(
                f"{caps.name} can neither enforce the agents' tool lists and cpe's bash guard "
                "nor sandbox the agent's commands: cpe will not run an unconfined agent"
            )

    # ------------------------------------------------------------------ the base's hooks

    async def _begin(self, start: Start) -> _Run:
        run = _Run.starting(start, texts=self.runner.text_chunks)
        if self.signals is not None:
            sid, report = start.session_id, self.deps.report_signal
            run.signals = self.signals(lambda signal: report(sid, signal))
        request = self._request(
            run, start.session_id, start.provisioned.prompt, start.provisioned.spec
        )
        run.handle = await anyio.to_thread.run_sync(self._start, run, request)
        return run

    def _cancel(self, run: _Run) -> None:
        if run.handle is not None:
            run.handle.stop()

    def _kill(self, run: _Run) -> None:
        if run.handle is not None:
            run.handle.stop("killed_timeout", self.timed_out().reason)

    def _log_file_path(self, run: _Run) -> str | None:
        """Where the runner keeps the run's human-readable transcript (None when session
        transcripts are off)."""
        if not self.config.logging.agent_sessions:
            return None
        return str(self.state_dir / "runs" / run.session_id / "transcript.log")

    def _sandbox_home(self, session_id: SessionId) -> str | None:
        return self._env(session_id).get("HOME")

    def _pidfiles(self) -> Iterable[Path]:
        return sorted((self.state_dir / "runs").glob(f"*/{PIDFILE}"))

    def _kill_group(self, pgid: int) -> None:
        kill_group(pgid, grace=5.0)

    # ------------------------------------------------------------------ the run

    def policy(self, role: str) -> tuple[frozenset[Guarantee], bool]:
        """The guarantees a run of ``role`` requires of this runner, and whether cpe's Bash
        guard goes with them (only where the runner can hook every shell command)."""
        caps = self.runner.get_capabilities()
        policy: set[Guarantee] = {"interactive_prompt_suppression", "structured_event_stream"}
        if role == "implementor":
            policy.add("writable_workspace")
        confined_by_tools = caps.tool_allow_deny and caps.command_guard
        policy.add("tool_allow_deny" if confined_by_tools else "sandboxed_execution")
        return frozenset(policy), confined_by_tools

    def _request(self, run: _Run, session_id: str, prompt: str, spec: AgentSpec) -> RunRequest:
        tools = effective_tools(spec, structured_output=True)
        disallowed = effective_disallowed_tools(spec, structured_output=True)
        policy, guarded = self.policy(run.params.role)
        caps = self.runner.get_capabilities()
        unenforced: dict[str, Any] = {}  # what the agent definition asks and the runner lacks
        counted = spec.max_turns if not caps.supports_max_turns else None  # cpe counts them
        budget = self.config.max_budget_usd
        model = self.config.models.get(run.params.role) or self.config.model
        price = self.config.prices.get(model) if model else None
        counted_budget = None  # cpe prices the live usage and stops the run itself
        if budget is not None and not caps.supports_max_budget:
            if caps.live_token_usage and price is not None:
                counted_budget = budget
            else:  # [budget] per_item/per_day still hold
                unenforced["max_budget_usd"] = (
                    f"{budget} (no price for model {model or 'default'})"
                    if caps.live_token_usage
                    else budget
                )
        if not guarded:
            unenforced["tools"] = None if tools is None else list(tools)
            unenforced["bash_guard"] = "the runner's sandbox confines commands instead"
        return RunRequest(
            run_id=session_id,
            worktree_path=run.worktree.path if run.worktree is not None else self.repo_root,
            prompt=prompt,
            env=self._env(session_id),
            model=model,
            requested_policy=policy,
            read_only=run.params.role != "implementor",
            prompt_reference=f".claude/agents/{spec.role}.md",
            agent=AgentProfile(
                name=spec.role,
                description=spec.description,
                instructions=spec.prompt,
                tools=None if tools is None else tuple(tools),
                disallowed_tools=None if disallowed is None else tuple(disallowed),
            ),
            output_schema=output_schema(run.params.role),
            idle_timeout=self.config.idle_timeout,
            max_turns=spec.max_turns if caps.supports_max_turns else None,
            counted_max_turns=counted,
            max_budget_usd=budget if caps.supports_max_budget else None,
            counted_budget_usd=counted_budget,
            prices=self.config.prices if budget is not None else None,
            token_price=price if counted_budget is not None else None,
            repeat_limit=self.config.repeat_limit,
            unchanged_limit=self.config.unchanged_limit,
            bash_guard=self.config.bash_guard if guarded else None,
            sandbox=run.sandbox,
            sandbox_missing=self.config.sandbox_missing,
            extra={"not_enforced": unenforced} if unenforced else {},
            transcript_log=self.config.logging.agent_sessions,
        )

    def _start(self, run: _Run, request: RunRequest) -> CliRunHandle:
        try:
            return self.runner.start(request, request.prompt, request.env, on_event=run.event)
        except RunRejectedError as exc:
            raise AgentFailure("failed", f"the runner refused the run: {exc}") from exc
        except OSError as exc:
            raise AgentFailure(
                "failed", f"the CLI could not start: {exc}", infrastructure=True
            ) from exc

    @property
    def model_variables(self) -> tuple[str, ...]:
        """The model credentials the agent gets: the config's, else those its CLI reads."""
        if self.config.model_variables is not None:
            return self.config.model_variables
        return self.runner.model_variables

    def _env(self, session_id: str) -> dict[str, str]:
        homes = self.state_dir / "homes"
        home = homes / session_id if self.config.isolated_home else None
        return run_env(self.model_variables, self.config.agent_env, home)

    def _priced(self, usage: RunUsage, result: Mapping[str, Any] | None) -> RunUsage:
        """A run the runner reported tokens for but no cost (codex) is priced by its model."""
        if usage.cost_usd is not None or result is None or not _tokens(result):
            return usage
        model = result.get("model") if isinstance(result.get("model"), str) else None
        cost = token_cost(model or self.config.model, _tokens(result), self.config.prices)
        return usage.model_copy(update={"cost_usd": cost})

    async def _drive(self, run: _Run) -> AgentResult:
        assert run.handle is not None
        try:
            try:
                outcome = await anyio.to_thread.run_sync(run.handle.wait, abandon_on_cancel=True)
            except BaseException:  # the task was cancelled: the process goes first
                run.handle.stop()
                with anyio.CancelScope(shield=True):
                    await anyio.to_thread.run_sync(run.handle.wait)
                raise
            run.usage = self._priced(_usage(outcome.result), outcome.result)
            if run.usage.cost_usd is None and outcome.live is not None:
                run.usage = outcome.live.priced(self.config.prices, run.usage)
            if run.usage.model is None and outcome.live is not None and outcome.live.model:
                run.usage = run.usage.model_copy(update={"model": outcome.live.model})
            return await self._result(run, outcome)
        finally:
            await self._release(run)

    async def _result(self, run: _Run, outcome: CliOutcome) -> AgentResult:
        if run.timed_out and outcome.termination == "killed_timeout":
            raise self.timed_out()  # the base's deadline stopped it (_kill)
        if outcome.termination != "completed" or outcome.result is None:
            # A run that failed under the agent (outcome.infrastructure: codex's sandbox could
            # not run commands, the model API refused or could not be reached) spends no
            # attempt: the failure says so.
            kind = _FAILURE_KIND.get(outcome.termination, "failed")
            if (outcome.reason or "").startswith(OWN_DOING):
                kind = "failed"  # stopped for its budget or a loop: its own doing, an attempt
            if outcome.infrastructure is not None:
                log.warning(
                    "the agent run failed under the agent",
                    cause=outcome.infrastructure,
                    session_id=run.params.session_id,
                    reason=outcome.reason,
                )
            raise AgentFailure(
                kind,
                f"{outcome.termination}: {outcome.reason}",
                infrastructure=outcome.infrastructure is not None,
            )
        structured = outcome.result.get("structured_output")
        return await self.provisioner.result(run.params.role, structured, run.worktree)


def _tokens(result: Mapping[str, Any] | None) -> dict[str, int]:
    usage = (result or {}).get("usage") or {}
    return {k: v for k, v in usage.items() if isinstance(v, int) and not isinstance(v, bool)}


def _usage(result: Mapping[str, Any] | None) -> RunUsage:
    result = result or {}
    usage = result.get("usage") or {}
    model = result.get("model")  # codex's, set by its runner
    return RunUsage(
        model=model if isinstance(model, str) else main_model(result.get("modelUsage")),
        cost_usd=result.get("total_cost_usd"),
        turns=result.get("num_turns"),
        input_tokens=usage.get("input_tokens"),
        output_tokens=usage.get("output_tokens"),
    )

"""The Claude SDK runtime adapter: with ``sdk_run.py`` (a run's state), the only modules that
import ``claude_agent_sdk``.

``create_claude_adapter(config, deps)`` returns a ``RuntimeAdapter``, a ``AgentRuntime``
(``agent_runtime.py``: the run table, the worktree (implementor), the context and the agent
definition, the sandbox, the deadline, cancel and the reaper). What is its own: it starts the
CLI through ``ClaudeSDKClient``; ``handle.result`` drives the session to its end: structured
output validated, the patch extracted (implementor), the process tree killed, the worktree and
branch removed, the artifacts finished. Timeouts and cancels are anyio scopes so the SDK's own
shielded teardown runs; the CLI runs in its own process group (see ``launcher``) so nothing it
started outlives the run.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterable, Sequence
from functools import partial
from pathlib import Path
from typing import Any, cast

import anyio
import structlog
from claude_agent_sdk import (
    AgentDefinition,
    AssistantMessage,
    ClaudeAgentOptions,
    ClaudeSDKClient,
    HookCallback,
    HookMatcher,
    RateLimitEvent,
    ResultMessage,
    SystemMessage,
    TextBlock,
)
from claude_agent_sdk import ClaudeSDKError as _SDKError
from pydantic import Field

from adapters.bash_guard import check_bash
from adapters.runtime.agent_runtime import AgentRuntime, AgentRuntimeConfig, Start
from adapters.runtime.artifacts.store import RunArtifacts, Termination
from adapters.runtime.claude.sdk_run import SdkRun
from adapters.runtime.claude.signals import ClaudeSignals
from adapters.runtime.claude.vendor import CLAUDE_MODEL_VARIABLES, bundled_cli
from adapters.runtime.pricing import main_model
from adapters.runtime.process.agent_env import run_env
from adapters.runtime.process.launcher import (
    LAUNCHER,
    kill_group,
    kill_tree,
    read_pid,
    stamp_pid,
    wait_for_exit,
    write_launch_script,
)
from adapters.runtime.process.progress import ProgressWatch
from adapters.runtime.prompt.agents import (
    AgentSpec,
    effective_disallowed_tools,
    effective_tools,
)
from adapters.runtime.sandbox.guard_hook import (
    FILE_MATCHER,
    FILE_TOOLS_POLICY,
    BashCheck,
    sdk_hook,
)
from adapters.runtime.sandbox.runs import sandbox_record
from domain.errors import AgentFailure
from domain.models import (
    RunUsage,
    SessionId,
)
from domain.ports import RuntimeAdapterDeps
from domain.results import (
    AgentResult,
    output_schema,
)

log = structlog.get_logger("cpe.runtime.claude")

_APPLIES_TO = "every Bash command: cpe's PreToolUse hook rewrites it to run in bwrap"


class ClaudeAdapterConfig(AgentRuntimeConfig):
    cli_path: str | None = Field(default=None, description="another claude executable")
    kill_grace: float = Field(default=5, gt=0)
    idle_timeout: float | None = Field(
        default=600, gt=0, description="no message and no tool at work for this long: killed"
    )


def create_claude_adapter(
    config: ClaudeAdapterConfig, deps: RuntimeAdapterDeps, *, bash_check: BashCheck = check_bash
) -> ClaudeAdapter:
    """``bash_check`` is the guard's verdict function; only tests give another one (one that
    fails, to show that the hook fails closed)."""
    return ClaudeAdapter(config, deps, bash_check=bash_check)


class ClaudeAdapter(AgentRuntime[ClaudeAdapterConfig, SdkRun]):
    def __init__(
        self,
        config: ClaudeAdapterConfig,
        deps: RuntimeAdapterDeps,
        *,
        bash_check: BashCheck = check_bash,
    ):
        super().__init__(config, deps)
        self.bash_check = bash_check

    # ------------------------------------------------------------------ the base's hooks

    async def _begin(self, start: Start) -> SdkRun:
        params, worktree, spec = start.params, start.provisioned.worktree, start.provisioned.spec
        cwd = worktree.path if worktree is not None else self.repo_root
        files = RunArtifacts.open(
            self.state_dir,  # RunArtifacts adds runs/<session_id>
            start.session_id,
            agent_family="claude_sdk",
            invocation_mode="sdk",
            command=[self.config.cli_path or bundled_cli(), "--agent", params.role],
            working_directory=cwd,
            prompt=start.provisioned.prompt,
            prompt_reference=f".claude/agents/{params.role}.md",
            requested_policy={"permission_mode": "bypassPermissions", "bash_guard": "deny"},
            effective_policy={
                **_effective_policy(params.role, spec),
                "os_sandbox": sandbox_record(
                    start.sandbox, self.config.sandbox_missing, _APPLIES_TO
                ),
            },
            capture_format="sdk-messages",
            transcript_log=self.config.logging.agent_sessions,
        )
        run = SdkRun.starting(
            start,
            files=files,
            prompt=start.provisioned.prompt,
            spec=spec,
            kill_grace=self.config.kill_grace,
            repeat_limit=self.config.repeat_limit,
            max_turns=spec.max_turns,
        )
        if worktree is not None and self.config.unchanged_limit is not None:
            run.progress = ProgressWatch(worktree.path, self.config.unchanged_limit)
        sid, report = start.session_id, self.deps.report_signal
        run.signals = ClaudeSignals(lambda signal: report(sid, signal))
        return run

    def _cancel(self, run: SdkRun) -> None:
        run.loop.call_soon_threadsafe(run.cancel, "cancelled")

    def _kill(self, run: SdkRun) -> None:
        run._stop()

    def _log_file_path(self, run: SdkRun) -> str | None:
        return run.files.log_file_path

    def _sandbox_home(self, session_id: SessionId) -> str | None:
        return str(self._home(session_id)) if self.config.isolated_home else os.environ.get("HOME")

    def _pidfiles(self) -> Iterable[Path]:
        return sorted(Path(self.config.logging.logs_dir).glob("*/cli.pid"))

    def _kill_group(self, pgid: int) -> None:
        kill_tree(pgid, grace=self.config.kill_grace)

    # ------------------------------------------------------------------ the run

    def _home(self, session_id: str) -> Path:
        """A run's throwaway HOME (``isolated_home``)."""
        return Path(self.config.logging.logs_dir) / session_id / "home"

    async def _drive(self, run: SdkRun) -> AgentResult:
        termination: Termination = "error"
        exit_code: int | None = None
        final: ResultMessage | None = None
        run.last_activity = run.loop.time()
        if self.config.idle_timeout is not None:
            run.watch_idle(self.config.idle_timeout)
        try:
            with anyio.CancelScope() as scope:
                run.scope = scope
                if run.cancel_reason is not None or run.timed_out:
                    scope.cancel()
                final = await self._session(run, run.prompt, run.spec)
            if run.timed_out:
                termination = "killed_timeout"
                raise self.timed_out()
            if run.looping is not None:
                termination = "killed_policy"
                raise AgentFailure("failed", run.looping)
            if run.over_budget and final is None:  # stopped by cpe: the CLI did not stop it
                raise AgentFailure("failed", self._budget_reason(run))
            if run.idle:
                termination = "killed_idle"
                raise AgentFailure(
                    "timed-out",
                    f"no message and no tool at work for {self.config.idle_timeout:g}s "
                    "(idle_timeout)",
                )
            if final is None:
                termination = "killed_policy"
                raise AgentFailure("cancelled", run.cancel_reason or "cancelled")
            result = await self._result(run, final)
            termination, exit_code = "completed", 0
            return result
        finally:
            if run.over_budget or run.looping is not None:
                termination = "killed_policy"
            run.end()
            pid = read_pid(_pidfile(run))
            await anyio.to_thread.run_sync(partial(kill_tree, pid, grace=self.config.kill_grace))
            await self._release(run)
            if run.usage.cost_usd is None:  # stopped before the CLI said: its tokens, priced
                run.usage = run.live.priced(self.config.prices, run.usage)
            if run.usage.model is None and run.live.model is not None:
                run.usage = run.usage.model_copy(update={"model": run.live.model})
            run.files.finish(termination, exit_code, final_response=final, usage=run.usage)

    async def _session(self, run: SdkRun, prompt: str, spec: AgentSpec) -> ResultMessage:
        options = self._options(run, spec)
        final: ResultMessage | None = None
        try:
            async with ClaudeSDKClient(options) as client:
                leftovers = self._kill_leftovers_on_exit(run)
                try:
                    await client.query(prompt)
                    async for message in client.receive_response():
                        run.active(message)
                        run.files.record_native(message)
                        if run.signals is not None:
                            run.signals.event(_native(message))
                        if isinstance(message, AssistantMessage):
                            run.live.add(message.message_id, message.model, message.usage)
                            self._check_budget(run)
                            for block in message.content:
                                if isinstance(block, TextBlock) and block.text:
                                    run.output.put_nowait(block.text)
                        elif isinstance(message, ResultMessage):
                            final = message
                            run.usage = _usage(message)
                finally:
                    if leftovers is not None:
                        leftovers.cancel()
        except _SDKError as exc:
            if final is None:
                raise AgentFailure("failed", f"the claude CLI failed: {exc}") from exc
            # an error after the result (a non-zero exit that follows an error result) is
            # judged by the result itself below
        if final is None:
            raise AgentFailure("failed", "the claude CLI ended without a result")
        return final

    def _kill_leftovers_on_exit(self, run: SdkRun) -> asyncio.Task[None] | None:
        """Once the CLI has ended, kill what is left of its process group. A command it started
        (a crash left it running) may hold the CLI's stdout open, and the SDK reads until EOF:
        without this the session would end only at ``max_agent_duration``. The wrapper has
        written the pid file before the CLI answered ``initialize``, so it is there now."""
        pid = read_pid(_pidfile(run))
        if pid is None:
            return None
        stamp_pid(_pidfile(run), pid)  # for the reaper of a later start (see reap)
        grace = self.config.kill_grace

        async def watch() -> None:
            try:
                await wait_for_exit(pid)
                await anyio.to_thread.run_sync(partial(kill_group, pid, grace))
            except Exception:  # the run's own teardown kills the tree anyway
                log.exception("watching the claude CLI failed", pid=pid)

        return run.loop.create_task(watch())

    def _check_budget(self, run: SdkRun) -> None:
        """The CLI holds ``max_budget_usd`` itself, checking after each message; should it
        start another message past the budget, cpe stops the run (its streamed usage, priced)."""
        budget = self.config.max_budget_usd
        if budget is None or run.over_budget:
            return
        if run.live.overrun(self.config.prices, budget) is not None:
            run.over_budget = True
            run._stop()

    def _budget_reason(self, run: SdkRun) -> str:
        cost = run.live.cost(self.config.prices) or 0.0
        return (
            f"budget: the run reached [budget] per_run_usd (${self.config.max_budget_usd}) and "
            f"the CLI went on: stopped by cpe at ${cost:.4f} counted from its streamed usage"
        )

    async def _result(self, run: SdkRun, final: ResultMessage) -> AgentResult:
        role = run.params.role
        if final.subtype == "error_max_budget_usd":
            run.over_budget = True
            raise AgentFailure(
                "failed",
                f"budget: the run reached [budget] per_run_usd (${self.config.max_budget_usd})",
            )
        if final.subtype == "error_max_turns":
            run.looping = f"no progress: the run reached max_turns ({run.max_turns})"
            raise AgentFailure("failed", run.looping)
        if final.subtype != "success" or final.is_error:
            detail = "; ".join(final.errors or []) or (final.result or final.subtype)
            if final.terminal_reason == "api_error" or final.api_error_status is not None:
                status = f" (HTTP {final.api_error_status})" if final.api_error_status else ""
                raise AgentFailure(
                    "failed", f"the model API failed{status}: {detail}", infrastructure=True
                )
            # "success" with is_error is how the CLI reports an error it ended on: not a label
            # to show (cpe status once printed "success: Not logged in")
            label = (
                "the claude CLI reported an error" if final.subtype == "success" else final.subtype
            )
            raise AgentFailure("failed", f"{label}: {detail}")
        if final.structured_output is None:
            raise AgentFailure("failed", "the run succeeded without structured output")
        return await self.provisioner.result(role, final.structured_output, run.worktree)

    def _options(self, run: SdkRun, spec: AgentSpec) -> ClaudeAgentOptions:
        cwd = run.worktree.path if run.worktree is not None else self.repo_root
        # sdk_hook answers plain dicts of the shape HookJSONOutput describes
        bash_hook = cast(
            HookCallback,
            sdk_hook(
                cwd,
                self.config.bash_guard,
                run.files.note,
                check=self.bash_check,
                sandbox=run.sandbox,
            ),
        )
        definition = AgentDefinition(
            description=spec.description,
            prompt=spec.prompt,
            tools=_list(effective_tools(spec, structured_output=True)),
            disallowedTools=_list(effective_disallowed_tools(spec, structured_output=True)),
            model=spec.model,
        )
        options = ClaudeAgentOptions(
            agents={spec.role: definition},
            extra_args={"agent": spec.role},
            cwd=str(cwd),
            output_format={"type": "json_schema", "schema": output_schema(run.params.role)},
            setting_sources=[],
            # on_failure="block": should the callback ever fail (it catches everything itself),
            # the CLI blocks the command; a CLI too old to honour it refuses to connect.
            hooks={
                "PreToolUse": [
                    HookMatcher(matcher=matcher, hooks=[bash_hook], on_failure="block")
                    for matcher in ("Bash", FILE_MATCHER)
                ]
            },
            permission_mode="bypassPermissions",
            # The SDK executes the launcher, which runs the run's script (see launcher.py)
            cli_path=str(LAUNCHER),
            env=self._launch_script(run),
            stderr=lambda line: run.files.note(f"stderr: {line}"),
        )
        if spec.max_turns is not None:
            options.max_turns = spec.max_turns
        if self.config.max_budget_usd is not None:
            options.max_budget_usd = self.config.max_budget_usd
        model = self.config.models.get(run.params.role) or self.config.model
        if model:
            options.model = model
        return options

    def _launch_script(self, run: SdkRun) -> dict[str, str]:
        home = self._home(run.session_id) if self.config.isolated_home else None
        variables = self.config.model_variables
        env = run_env(
            CLAUDE_MODEL_VARIABLES if variables is None else variables, self.config.agent_env, home
        )
        cli = self.config.cli_path or bundled_cli()
        return write_launch_script(run.files.run_dir / "claude.sh", cli, env, _pidfile(run))


def _usage(result: ResultMessage) -> RunUsage:
    usage = result.usage or {}
    return RunUsage(
        model=main_model(result.model_usage),
        cost_usd=result.total_cost_usd,
        turns=result.num_turns,
        input_tokens=usage.get("input_tokens"),
        output_tokens=usage.get("output_tokens"),
    )


def _list(values: Sequence[str] | None) -> list[str] | None:
    return None if values is None else list(values)


def _effective_policy(role: str, spec: AgentSpec) -> dict[str, Any]:
    """What this runtime enforces for the run (the same keys as the CLI runtimes record)."""
    tools = effective_tools(spec, structured_output=True)
    disallowed = effective_disallowed_tools(spec, structured_output=True)
    return {
        "permission_mode": "bypassPermissions",
        "setting_sources": [],
        "bash_guard": "deny: an in-process PreToolUse hook that blocks when it fails",
        "file_tools": FILE_TOOLS_POLICY,
        "tools": None if tools is None else list(tools),
        "disallowed_tools": None if disallowed is None else list(disallowed),
        "max_turns": spec.max_turns,
        "workspace": "writable" if role == "implementor" else "read-only by the agent's tools",
    }


def _native(message: object) -> dict[str, Any]:
    """The stream-json event an SDK message was parsed from, as far as ``ClaudeSignals``
    reads it (the SDK keeps a system message's and a rate-limit event's raw dict)."""
    if isinstance(message, SystemMessage):
        return dict(message.data)
    if isinstance(message, RateLimitEvent):
        return {"type": "rate_limit_event", "rate_limit_info": message.rate_limit_info.raw}
    if isinstance(message, AssistantMessage):
        return {"type": "assistant"}
    if isinstance(message, ResultMessage):
        return {"type": "result", "is_error": message.is_error, "result": message.result}
    return {}


def _pidfile(run: SdkRun) -> Path:
    return run.files.run_dir / "cli.pid"

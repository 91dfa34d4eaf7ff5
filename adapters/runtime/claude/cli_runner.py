"""The ``claude-cli`` runner (S003-09, S004-09): ``claude -p`` in stream-json mode.

The command, as the CLI really accepts it (observed on CLI 2.1.330)::

    claude -p --output-format stream-json --verbose --permission-mode bypassPermissions
           [--model M] [--json-schema S] [--agents J --agent NAME] [--max-turns N]
           [--setting-sources ""] -- PROMPT

``stream-json`` needs ``--verbose``; the variadic tool flags would swallow a positional prompt,
so the prompt comes last, after ``--``; stdin is ``/dev/null`` (no PTY, no further input). A
prompt too long for an argv string goes on stdin instead, from a file (never a pipe).
Every stdout line is a JSON event, kept as ``runner_transcript``; the ``result`` event is the
``runner_final_response``; the metadata, with the prompt, is written before the process starts
(S003-05). A line that is not JSON, or a run without a ``result``, is a malformed required
capture: ``error`` (S004-11), whatever the exit code.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from adapters.runtime.artifacts.store import RunArtifacts
from adapters.runtime.claude.signals import ClaudeSignals
from adapters.runtime.claude.vendor import CLAUDE_MODEL_VARIABLES, bundled_cli
from adapters.runtime.cli.cli_runtime import CliRuntime, CliRuntimeConfig
from adapters.runtime.cli.jsonl import MODEL_API, CliOutcome, EventCallback, JsonlRun
from adapters.runtime.cli.process import ProcessHandle, ProcessOutcome
from adapters.runtime.cli.request import RunnerCapabilities, RunRequest
from adapters.runtime.cli.runner import ARGV_PROMPT_BYTES, JsonlCliRunner, Prepared
from adapters.runtime.pricing import LiveUsage
from adapters.runtime.sandbox.guard_hook import FILE_TOOLS_POLICY, hook_settings
from adapters.runtime.sandbox.runs import sandbox_record
from domain.ports import RuntimeAdapterDeps

__all__ = [
    "CLAUDE_CAPABILITIES",
    "ClaudeCliRun",
    "ClaudeCliRunner",
    "create_claude_cli_runtime",
    "model_api_failed",
]

CLAUDE_CAPABILITIES = RunnerCapabilities(
    name="claude-cli",
    supports_model=True,
    supports_non_interactive=True,
    supports_prompt_file_inclusion=False,
    available_models=("sonnet", "opus", "haiku"),
    writable_workspace=True,
    sandboxed_execution=False,  # the CLI's own sandbox is not switched on by a flag here
    approval_controls=True,  # --permission-mode
    tool_allow_deny=True,  # the agent definition's tools and disallowedTools
    structured_event_stream=True,  # --output-format stream-json
    interactive_prompt_suppression=True,  # --print, stdin /dev/null
    command_guard=True,  # a PreToolUse hook in --settings
    supports_max_turns=True,  # --max-turns
    supports_max_budget=True,  # --max-budget-usd
)


def model_api_failed(result: dict[str, Any]) -> bool:
    """A ``result`` event of a run that the model API ended (the CLI's ``terminal_reason``
    ``api_error``, or an HTTP status it reports): the credential, the network, the API."""
    return bool(result.get("is_error")) and (
        result.get("terminal_reason") == "api_error" or result.get("api_error_status") is not None
    )


@dataclass
class ClaudeCliRun(JsonlRun):
    """The process handle of one ``claude-cli`` run."""

    kind_of_event: ClassVar[str] = "stream-json event"

    request: RunRequest
    artifacts: RunArtifacts
    process: ProcessHandle
    on_event: EventCallback | None = None
    result: dict[str, Any] | None = None
    malformed: list[str] = field(default_factory=list)
    live: LiveUsage = field(default_factory=LiveUsage)
    over_budget: str | None = None  # why cpe stopped the run: its streamed usage, priced
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _outcome: CliOutcome | None = None

    def _event(self, event: dict[str, Any]) -> None:
        kind = event.get("type")
        if kind == "result":
            self.result = event
        elif kind in ("assistant", "user"):  # tool calls open and close: activity
            message = event.get("message")
            if kind == "assistant" and isinstance(message, dict):
                self.live.add(message.get("id"), message.get("model"), message.get("usage"))
                self._check_budget()
            content = message.get("content") if isinstance(message, dict) else None
            for block in content if isinstance(content, list) else ():
                if not isinstance(block, dict):
                    continue
                if block.get("type") == "tool_use" and isinstance(block.get("id"), str):
                    self.process.tool_started(block["id"])
                    self.count_repeats(str(block.get("name")), block.get("input"))
                    self.count_progress()
                elif block.get("type") == "tool_result" and isinstance(
                    block.get("tool_use_id"), str
                ):
                    self.process.tool_ended(block["tool_use_id"])

    def _check_budget(self) -> None:
        """The CLI holds ``--max-budget-usd`` itself, checking after each message; should it
        start another message past the budget, cpe stops the run (its streamed usage, priced)."""
        budget, prices = self.request.max_budget_usd, self.request.prices
        if budget is None or prices is None or self.over_budget is not None:
            return
        spent = self.live.overrun(prices, budget)
        if spent is not None:
            self.over_budget = (
                f"budget: the run reached [budget] per_run_usd (${budget}) and the CLI went "
                f"on: stopped by cpe at ${spent:.4f} counted from its streamed usage"
            )
            self.artifacts.note(self.over_budget)
            self.process.stop("killed_policy", self.over_budget)

    def _finish(self, ended: ProcessOutcome) -> CliOutcome:
        termination, reason = ended.termination, ended.reason
        infrastructure = None
        if termination == "completed":
            if self.malformed:
                termination, reason = "error", f"{len(self.malformed)} malformed stdout line(s)"
            elif self.result is None:
                termination, reason = "error", "the CLI ended without a result event"
            elif self.result.get("is_error") or self.result.get("subtype") != "success":
                subtype = self.result.get("subtype")
                said = self.result.get("result") or "; ".join(self.result.get("errors") or [])
                label = "the CLI reported an error" if subtype == "success" else f"result {subtype}"
                termination, reason = "error", f"{label}: {said}" if said else label
        if self.looping is not None and ended.cancelled_at is not None:
            termination, reason = "killed_policy", self.looping
        if self.over_budget is not None and ended.cancelled_at is not None and not self.result:
            termination, reason = "killed_policy", self.over_budget
        if self.result is not None and self.result.get("subtype") == "error_max_turns":
            termination = "killed_policy"  # the CLI ends the run itself (exit 1)
            reason = f"no progress: the run reached max_turns ({self.request.max_turns})"
        if self.result is not None and self.result.get("subtype") == "error_max_budget_usd":
            termination = "killed_policy"
            reason = (
                f"budget: the run reached [budget] per_run_usd (${self.request.max_budget_usd})"
            )
        if self.result is not None and model_api_failed(self.result):
            # no credential, refused, unreachable …: the CLI also exits 1 then
            termination, infrastructure = "error", MODEL_API
            reason = f"the model API failed: {self.result.get('result')}"
        if ended.cancelled_at is not None:
            self.artifacts.annotate(cancelled_at=ended.cancelled_at.isoformat())
        finished = self.artifacts.finish(
            termination, ended.exit_code, final_response=self.result, reason=reason
        )
        if finished.termination != termination:  # a required artifact was lost
            termination = "error"
            reason = reason or "required artifacts missing"
        return CliOutcome(
            termination,
            ended.exit_code,
            reason,
            self.result,
            finished,
            ended,
            infrastructure,
            self.live,
        )


class ClaudeCliRunner(JsonlCliRunner[ClaudeCliRun]):
    """The runner of the ``claude`` CLI; runs land in ``<state_dir>/runs/<run_id>``."""

    agent_family = "claude_cli"
    invocation_mode = "print"
    capture_format = "claude_stream_json"
    model_variables = CLAUDE_MODEL_VARIABLES

    def __init__(
        self,
        state_dir: Path,
        *,
        cli_path: str = "claude",
        kill_grace: float = 5.0,
        wall_timeout: float | None = None,
        idle_timeout: float | None = None,
        capabilities: RunnerCapabilities = CLAUDE_CAPABILITIES,
        argv_prompt_bytes: int = ARGV_PROMPT_BYTES,
    ) -> None:
        self.argv_prompt_bytes = argv_prompt_bytes
        self.state_dir = Path(state_dir)
        self.cli_path = cli_path
        self.kill_grace = kill_grace
        self.wall_timeout = wall_timeout
        self.idle_timeout = idle_timeout
        self.capabilities = capabilities

    def get_capabilities(self) -> RunnerCapabilities:
        return self.capabilities

    def command(self, run: RunRequest, prompt: str | None) -> list[str]:
        """The argv; prompt None: the CLI reads it from stdin (a file, never a pipe)."""
        argv = [self.cli_path, "-p", "--output-format", "stream-json", "--verbose"]
        argv += ["--permission-mode", "bypassPermissions", "--setting-sources", ""]
        if run.model is not None:
            argv += ["--model", run.model]
        if run.output_schema is not None:
            argv += ["--json-schema", json.dumps(run.output_schema)]
        if run.max_turns is not None:
            argv += ["--max-turns", str(run.max_turns)]
        if run.max_budget_usd is not None:
            argv += ["--max-budget-usd", f"{run.max_budget_usd:g}"]
        if run.agent is not None:
            definition: dict[str, Any] = {
                "description": run.agent.description,
                "prompt": run.agent.instructions,
            }
            if run.agent.tools is not None:
                definition["tools"] = list(run.agent.tools)
            if run.agent.disallowed_tools is not None:
                definition["disallowedTools"] = list(run.agent.disallowed_tools)
            argv += ["--agents", json.dumps({run.agent.name: definition})]
            argv += ["--agent", run.agent.name]
        if run.bash_guard is not None:
            settings = hook_settings(Path(run.worktree_path), run.bash_guard, run.sandbox)
            argv += ["--settings", json.dumps(settings)]
        return argv if prompt is None else [*argv, "--", prompt]

    def _argv(self, run: RunRequest, prompt: str | None) -> list[str]:
        return self.command(run, prompt)

    def effective_policy(self, run: RunRequest, via_stdin: bool) -> dict[str, Any]:
        return {
            "permission_mode": "bypassPermissions",
            "non_interactive": "--print, stdin "
            + ("the prompt file" if via_stdin else "/dev/null"),
            "enforced": sorted(run.requested_policy),
            "bash_guard": "deny" if run.bash_guard is not None else "off",
            "file_tools": FILE_TOOLS_POLICY if run.bash_guard is not None else "unchecked",
            "workspace": "read-only by the agent's tools" if run.read_only else "writable",
            **({"tools": list(run.agent.tools or [])} if run.agent else {}),
            "os_sandbox": sandbox_record(
                run.sandbox if run.bash_guard is not None else None,
                run.sandbox_missing,
                "every Bash command: cpe's PreToolUse hook rewrites it to run in bwrap",
            ),
        }

    def _prepare(
        self,
        run: RunRequest,
        argv: list[str],
        env: Mapping[str, str] | None,
        artifacts: RunArtifacts,
        on_event: EventCallback | None,
    ) -> Prepared[ClaudeCliRun]:
        return Prepared(argv, env, lambda process: ClaudeCliRun(run, artifacts, process, on_event))

    @staticmethod
    def text_chunks(event: Mapping[str, Any]) -> list[str]:
        """The text blocks of an ``assistant`` message."""
        if event.get("type") != "assistant":
            return []
        message = event.get("message")
        blocks = message.get("content") if isinstance(message, dict) else None
        return [
            str(block["text"])
            for block in (blocks if isinstance(blocks, list) else ())
            if isinstance(block, dict) and block.get("type") == "text" and block.get("text")
        ]


def create_claude_cli_runtime(
    config: CliRuntimeConfig,
    deps: RuntimeAdapterDeps,
    *,
    cli_path: str | None = None,
    kill_grace: float = 5.0,
) -> CliRuntime:
    """The ``claude-cli`` runtime: the runs land where the SDK runtime puts its own."""
    runner = ClaudeCliRunner(
        Path(config.logging.logs_dir).parent,
        cli_path=cli_path or bundled_cli(),
        kill_grace=kill_grace,
    )
    return CliRuntime(runner, config, deps, signals=ClaudeSignals)

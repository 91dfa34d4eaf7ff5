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
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, TypeVar

from adapters.bash_guard.hook import FILE_TOOLS_POLICY, hook_settings
from adapters.runtime.pricing import LiveUsage
from adapters.runtime.records.artifacts import FinishedArtifacts, RunArtifacts, Termination
from adapters.runtime.runners.base import (
    RunnerCapabilities,
    RunRequest,
    check_request,
)
from adapters.runtime.runners.process import (
    KillReason,
    ProcessHandle,
    ProcessOutcome,
    Stream,
    start_process,
)
from adapters.runtime.sandbox.runs import sandbox_record
from adapters.runtime.workspace.progress import ProgressWatch

__all__ = [
    "CLAUDE_CAPABILITIES",
    "ClaudeCliRun",
    "ClaudeCliRunner",
    "CliOutcome",
    "JsonlRun",
    "launch",
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
ARGV_PROMPT_BYTES = 100_000  # an argv string is at most 128 KiB on Linux; longer: on stdin

EventCallback = Callable[[dict[str, Any]], None]


MODEL_API = "model-api"  # CliOutcome.infrastructure of a run the model API failed


def model_api_failed(result: dict[str, Any]) -> bool:
    """A ``result`` event of a run that the model API ended (the CLI's ``terminal_reason``
    ``api_error``, or an HTTP status it reports): the credential, the network, the API."""
    return bool(result.get("is_error")) and (
        result.get("terminal_reason") == "api_error" or result.get("api_error_status") is not None
    )


@dataclass(frozen=True)
class CliOutcome:
    """How a CLI run ended: the termination, the ``result`` event, the finished artifacts.

    ``infrastructure`` names what failed under the agent when that, not the agent's work,
    ended the run (``"sandbox"``: codex's sandbox could not run commands); None otherwise."""

    termination: Termination
    exit_code: int | None
    reason: str | None
    result: dict[str, Any] | None
    artifacts: FinishedArtifacts
    process: ProcessOutcome | None
    infrastructure: str | None = None
    live: LiveUsage | None = None  # the tokens the run streamed (priced when no cost came)


class JsonlRun(ABC):
    """What every CLI run shares: stop it, wait for its outcome once, and read its stdout as
    JSON lines into the artifacts (stderr becomes transcript notes; a line that is not a JSON
    object is kept as malformed). Subclasses say what an event means (``_event``) and what the
    ending means (``_finish``)."""

    kind_of_event: ClassVar[str] = "JSON event"
    request: RunRequest
    process: ProcessHandle
    last_call: tuple[str, str] | None = None  # the last tool call: name, input
    repeats: int = 0
    looping: str | None = None  # why the run was stopped for making no progress
    progress: ProgressWatch | None = None  # an implementor's tool calls since its last change
    artifacts: RunArtifacts
    on_event: EventCallback | None
    malformed: list[str]
    _lock: threading.Lock
    _outcome: CliOutcome | None

    def stop(
        self, reason: KillReason = "killed_policy", detail: str = "stopped by the engine"
    ) -> None:
        self.process.stop(reason, detail)

    def count_repeats(self, name: str, arguments: object) -> None:
        """The same tool call with the same input ``request.repeat_limit`` times in a row is
        a loop: the run is stopped (``killed_policy``), saying so."""
        call = (name, json.dumps(arguments, sort_keys=True, default=str))
        self.repeats = self.repeats + 1 if call == self.last_call else 1
        self.last_call = call
        limit = self.request.repeat_limit
        if limit is not None and self.repeats >= limit and self.looping is None:
            self.looping = f"no progress: the same {name} call {self.repeats} times in a row"
            self.artifacts.note(self.looping)
            self.process.stop("killed_policy", self.looping)

    def count_progress(self) -> None:
        """An implementor's tool calls that change nothing in its worktree,
        ``request.unchanged_limit`` of them in a row: the run is stopped, saying so."""
        if self.request.read_only or self.request.unchanged_limit is None or self.looping:
            return
        if self.progress is None:
            self.progress = ProgressWatch(self.request.worktree_path, self.request.unchanged_limit)
        stuck = self.progress.tool_call()
        if stuck is not None:
            self.looping = stuck
            self.artifacts.note(stuck)
            self.process.stop("killed_policy", stuck)

    def wait(self, timeout: float | None = None) -> CliOutcome:
        ended = self.process.wait(timeout)
        with self._lock:
            if self._outcome is None:
                self._outcome = self._finish(ended)
            return self._outcome

    def line(self, stream: Stream, text: str) -> None:  # a reader thread
        if stream == "stderr":
            self.artifacts.note(f"stderr: {text}")
            return
        if not text.strip():
            return
        try:
            event = json.loads(text)
        except ValueError:
            event = None
        if not isinstance(event, dict):
            self.malformed.append(text[:200])
            self.artifacts.note(f"not a {self.kind_of_event}: {text[:200]}")
            return
        self.artifacts.record_native(event)
        self._event(event)
        if self.on_event is not None:
            self.on_event(event)

    @abstractmethod
    def _event(self, event: dict[str, Any]) -> None:
        """What one event means for the run."""

    @abstractmethod
    def _finish(self, ended: ProcessOutcome) -> CliOutcome: ...


R = TypeVar("R", bound=JsonlRun)


def launch(
    argv: list[str],
    run: RunRequest,
    env: Mapping[str, str] | None,
    artifacts: RunArtifacts,
    make_handle: Callable[[ProcessHandle], R],
    *,
    stdin_prompt: str | None,
    wall_timeout: float | None,
    idle_timeout: float | None,
    kill_grace: float,
) -> R:
    """Start a CLI run whose artifacts are open: the process in its own group, its stdout and
    stderr lines fed to the handle ``make_handle`` builds (lines that come before the handle
    exists are held, then replayed in order). ``stdin_prompt``: a prompt too long for argv,
    given on stdin from a file that is gone once the process holds it. A CLI that cannot start
    ends its artifacts as ``error`` and raises ``OSError`` (S003-12)."""
    holder: list[R] = []
    pending: list[tuple[Stream, str]] = []
    gate = threading.Lock()

    def on_line(stream: Stream, text: str) -> None:
        with gate:
            if not holder:
                pending.append((stream, text))
                return
        holder[0].line(stream, text)

    stdin = artifacts.run_dir / ".prompt-stdin" if stdin_prompt is not None else None
    if stdin is not None:
        stdin.write_text(stdin_prompt or "")
    try:
        process = start_process(
            argv,
            cwd=Path(run.worktree_path),
            env=dict(env or {}),
            log_dir=artifacts.run_dir,
            on_line=on_line,
            wall_timeout=wall_timeout,
            idle_timeout=idle_timeout,
            kill_grace=kill_grace,
            stdin=stdin,
        )
    except OSError as exc:  # command not found, not executable (S003-12)
        artifacts.finish("error", None, reason=f"could not start {argv[0]}: {exc}")
        raise
    finally:
        if stdin is not None:
            stdin.unlink(missing_ok=True)  # the process holds it open; the metadata has it
    handle = make_handle(process)
    artifacts.annotate(pid=process.pid, pgid=process.pid)
    with gate:
        holder.append(handle)
        for stream, text in pending:
            handle.line(stream, text)
    return handle


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


class ClaudeCliRunner:
    """``RunnerAdapter`` for the ``claude`` CLI; runs land in ``<state_dir>/runs/<run_id>``."""

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

    def start(
        self,
        run: RunRequest,
        prompt: str | None = None,
        env: Mapping[str, str] | None = None,
        *,
        on_event: EventCallback | None = None,
    ) -> ClaudeCliRun:
        """Check, record, then start; raises ``RunRejectedError`` before anything runs."""
        prompt = run.prompt if prompt is None else prompt
        env = run.env if env is None else env
        check_request(self.capabilities, run)
        via_stdin = len(prompt.encode()) > self.argv_prompt_bytes
        argv = self.command(run, None if via_stdin else prompt)
        artifacts = RunArtifacts.open(
            self.state_dir,
            run.run_id,
            agent_family="claude_cli",
            invocation_mode="print",
            command=argv if via_stdin else argv[:-1],  # the prompt is in the metadata
            working_directory=Path(run.worktree_path),
            prompt=prompt,
            prompt_reference=run.prompt_reference,
            requested_policy=run.policy_dict(),
            effective_policy={
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
            },
            capture_format="claude_stream_json",
            transcript_log=run.transcript_log,
        )
        return launch(
            argv,
            run,
            env,
            artifacts,
            lambda process: ClaudeCliRun(run, artifacts, process, on_event),
            stdin_prompt=prompt if via_stdin else None,
            wall_timeout=run.wall_timeout or self.wall_timeout,
            idle_timeout=run.idle_timeout or self.idle_timeout,
            kill_grace=self.kill_grace,
        )

    def stop(self, handle: ClaudeCliRun) -> None:
        handle.stop()

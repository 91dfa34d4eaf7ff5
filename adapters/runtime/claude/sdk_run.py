"""One Claude SDK run's state (``SdkRun``): what it is watched by while its messages come
(activity, open tool calls, the same call repeated, calls that change nothing) and how it is
stopped (its CLI's process tree killed, the SDK session's scope cancelled)."""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field

import anyio
from claude_agent_sdk import ToolResultBlock, ToolUseBlock

from adapters.runtime.agent_runtime import Run
from adapters.runtime.artifacts.store import RunArtifacts
from adapters.runtime.claude.signals import ClaudeSignals
from adapters.runtime.pricing import LiveUsage
from adapters.runtime.process.launcher import kill_tree, read_pid
from adapters.runtime.process.progress import ProgressWatch
from adapters.runtime.prompt.agents import AgentSpec

__all__ = ["SdkRun"]


@dataclass(kw_only=True)
class SdkRun(Run):
    """One SDK run: its artifacts, its prompt and agent, and what watches it: activity and open
    tool calls (idle), repeated calls and calls changing nothing (no progress), the budget."""

    files: RunArtifacts
    prompt: str
    spec: AgentSpec
    scope: anyio.CancelScope | None = None
    cancel_reason: str | None = None
    idle: bool = False
    over_budget: bool = False
    looping: str | None = None  # why the run was stopped for making no progress
    repeat_limit: int | None = None
    max_turns: int | None = None  # the agent definition's, held by the CLI
    progress: ProgressWatch | None = None  # an implementor's tool calls since its last change
    live: LiveUsage = field(default_factory=LiveUsage)  # the tokens streamed so far
    last_call: tuple[str, str] | None = None  # the last tool call: name, input
    repeats: int = 0
    last_activity: float = 0.0  # the loop's clock at the last message
    tools_open: set[str] = field(default_factory=set)  # tool calls without a result yet
    kill_grace: float = 5.0
    signals: ClaudeSignals | None = None  # what the CLI says of the model API

    def cancel(self, reason: str) -> None:  # on the run's loop
        self.cancel_reason = self.cancel_reason or reason
        self._stop()

    def active(self, message: object) -> None:
        """A message came: the run is alive; a tool call opens or closes."""
        self.last_activity = self.loop.time()
        blocks = getattr(message, "content", None)
        for block in blocks if isinstance(blocks, list) else ():
            if isinstance(block, ToolUseBlock):
                self.tools_open.add(block.id)
                self._count_repeats(block.name, block.input)
                self._count_progress()
            elif isinstance(block, ToolResultBlock):
                self.tools_open.discard(block.tool_use_id)

    def _count_repeats(self, name: str, arguments: object) -> None:
        """The same tool call with the same input ``repeat_limit`` times in a row is a loop:
        the run is stopped."""
        call = (name, json.dumps(arguments, sort_keys=True, default=str))
        self.repeats = self.repeats + 1 if call == self.last_call else 1
        self.last_call = call
        limit = self.repeat_limit
        if limit is not None and self.repeats >= limit and self.looping is None:
            self.looping = f"no progress: the same {name} call {self.repeats} times in a row"
            self._stop()

    def _count_progress(self) -> None:
        """An implementor's tool calls that change nothing in its worktree, too many in a row:
        the run is stopped (``ProgressWatch``)."""
        if self.progress is None or self.looping is not None:
            return
        stuck = self.progress.tool_call()
        if stuck is not None:
            self.looping = stuck
            self._stop()

    def watch_idle(self, seconds: float) -> None:  # on the run's loop
        """End the run as idle once nothing came for ``seconds`` while no tool was at work."""
        if self.ended or self.idle or self.timed_out or self.cancel_reason is not None:
            return
        quiet = self.loop.time() - self.last_activity
        if not self.tools_open and quiet >= seconds:
            self.idle = True
            self._stop()
            return
        wait = seconds - quiet if not self.tools_open else seconds
        self.loop.call_later(max(wait, 0.05), self.watch_idle, seconds)

    def _stop(self) -> None:
        # Kill the CLI's process tree first (in a thread: it waits out the grace): the SDK's
        # own shielded close would otherwise wait on the CLI before signalling it.
        pid = read_pid(self.files.run_dir / "cli.pid")
        threading.Thread(
            target=kill_tree, args=(pid,), kwargs={"grace": self.kill_grace}, daemon=True
        ).start()
        if self.scope is not None:
            self.scope.cancel()

"""What every JSONL agent CLI run shares (S003, S004): its outcome (``CliOutcome``), reading
its stdout as JSON lines into the run's artifacts (``JsonlRun``) and starting it in its own
process group with its output fed to the run (``launch``).

A vendor's run (``adapters/runtime/claude/cli_runner.py``, ``adapters/runtime/codex/run.py``)
says what one of its events means (``_event``) and what the ending means (``_finish``).
"""

from __future__ import annotations

import json
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, TypeVar

from adapters.runtime.artifacts.store import FinishedArtifacts, RunArtifacts, Termination
from adapters.runtime.cli.process import (
    KillReason,
    ProcessHandle,
    ProcessOutcome,
    Stream,
    start_process,
)
from adapters.runtime.cli.request import RunRequest
from adapters.runtime.pricing import LiveUsage
from adapters.runtime.process.progress import ProgressWatch

__all__ = ["MODEL_API", "CliOutcome", "EventCallback", "JsonlRun", "launch"]

EventCallback = Callable[[dict[str, Any]], None]


MODEL_API = "model-api"  # CliOutcome.infrastructure of a run the model API failed


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

"""The process handle of one ``codex-cli`` run: what its JSONL events and its end mean.

Termination (``adapters.runtime.artifacts.store.Termination``): exit 0 with a
``turn.completed`` is ``completed``; a ``turn.failed``, a non-zero exit, an exit 0 without
``turn.completed`` or without the last-message file, and a stdout line that is not a JSON
object are ``error``; the
timeouts are the process layer's. So is a run whose commands all failed in codex's sandbox
before they started (``sandbox.py``): its outcome says ``infrastructure="sandbox"``. The
events are read leniently: unknown types are kept and ignored, ``error`` items are non-fatal. A
run's own ``CODEX_HOME`` (``home.py``) is released when the run ends.

**The model API failing** is an infrastructure failure too (``infrastructure="model-api"``):
codex retries an HTTP error five times, then fails the turn with ``unexpected status 401
Unauthorized: …`` (or ``exceeded retry limit, last status: 429 …``), which
:func:`model_api_message` recognises. An API it cannot connect to at all it retries forever,
saying ``Reconnecting... waiting for network (Connection failed: …)`` every few seconds: after
:data:`NETWORK_WAITS` of those in a row, with nothing else between, the run is stopped and
classed the same way, instead of holding its slot until the duration limit.
"""

from __future__ import annotations

import contextlib
import json
import re
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, TypeGuard

from adapters.runtime.artifacts.store import RunArtifacts
from adapters.runtime.cli.jsonl import MODEL_API, CliOutcome, EventCallback, JsonlRun
from adapters.runtime.cli.process import ProcessHandle, ProcessOutcome
from adapters.runtime.cli.request import RunRequest
from adapters.runtime.codex.home import CodexHome
from adapters.runtime.codex.sandbox import INFRASTRUCTURE, check_run, find_session_log
from adapters.runtime.pricing import token_cost

__all__ = ["LAST_MESSAGE_FILE", "NETWORK_WAITS", "SESSION_LOG_FILE", "CodexCliRun"]

LAST_MESSAGE_FILE = "codex-last-message.txt"
SESSION_LOG_FILE = "codex-session.jsonl"  # attached when the run's home is removed
NETWORK_WAITS = 3  # "waiting for network" events in a row that end a run (one every ~25 s)

# What codex says when the model API, not the agent, ended the turn: an HTTP status that is the
# credential's, the rate limit's or the server's, its retries spent, or no connection at all.
_MODEL_API = re.compile(
    r"unexpected status (?:401|403|404|408|429|5\d\d)\b|exceeded retry limit"
    r"|stream disconnected|error sending request|Connection failed|waiting for network"
    # what codex 0.169 says for a 500 (its retries spent), an overloaded model, a ChatGPT plan's
    # spent usage window and an account out of credits (observed against the scripted model)
    r"|experiencing high demand|model is at capacity|hit your usage limit|Quota exceeded",
    re.IGNORECASE,
)
_NETWORK_WAIT = re.compile(r"^Reconnecting\.\.\. waiting for network", re.IGNORECASE)


def model_api_message(message: str) -> bool:
    """Whether codex's error ``message`` says the model API failed (not the agent's work)."""
    return _MODEL_API.search(message) is not None


@dataclass
class CodexCliRun(JsonlRun):
    """The process handle of one ``codex-cli`` run."""

    kind_of_event: ClassVar[str] = "codex JSONL event"

    request: RunRequest
    artifacts: RunArtifacts
    process: ProcessHandle
    last_message_path: Path
    on_event: EventCallback | None = None
    codex_home: Path | None = None  # where codex keeps this run's session log
    isolated_home: CodexHome | None = None  # the run's own home, released when it ends
    thread_id: str | None = None
    turns_completed: int = 0
    turn_failed: str | None = None
    usage: dict[str, int] = field(default_factory=dict)
    malformed: list[str] = field(default_factory=list)
    commands: list[dict[str, Any]] = field(default_factory=list)
    tool_calls: int = 0  # item.started events that are not messages
    network_waits: int = 0  # "waiting for network" error events since the last other event
    unreachable: str | None = None  # why the run was stopped: the model API cannot be reached
    over_budget: str | None = None  # why the run was stopped: its live usage reached the budget
    live_cost: float = 0.0  # the live usage so far, priced (counted_budget_usd)
    meter: SessionLogMeter | None = None
    limits: RateLimitReader | None = None  # the account's rate limits, from the session log
    result: dict[str, Any] | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _outcome: CliOutcome | None = None

    def _event(self, event: dict[str, Any]) -> None:
        self._rate_limits()
        kind = event.get("type")
        message = event.get("message")
        if kind == "error" and isinstance(message, str) and _NETWORK_WAIT.match(message):
            self.network_waits += 1
            if self.network_waits >= NETWORK_WAITS and self.unreachable is None:
                self.unreachable = f"codex cannot reach the model API: {message}"
                self.artifacts.note(f"{self.network_waits} network waits in a row: stopping")
                self.process.stop("killed_policy", self.unreachable)
            return
        self.network_waits = 0
        self._meter()
        if kind == "thread.started" and isinstance(event.get("thread_id"), str):
            self.thread_id = event["thread_id"]
        elif kind == "turn.completed":
            self.turns_completed += 1
            usage = event.get("usage")
            for key, value in usage.items() if isinstance(usage, dict) else ():
                if isinstance(value, int) and not isinstance(value, bool):
                    self.usage[key] = self.usage.get(key, 0) + value
        elif kind == "turn.failed":
            error = event.get("error")
            message = error.get("message") if isinstance(error, dict) else None
            self.turn_failed = str(message or "turn failed")
        elif kind == "item.started" and isinstance(item := event.get("item"), dict):
            if isinstance(item.get("id"), str):  # a command, a patch …: activity
                self.process.tool_started(item["id"])
            if _is_command(item):
                self.count_repeats("command", item.get("command"))
            self._count_turn(str(item.get("type")))
        elif kind == "item.completed" and isinstance(item := event.get("item"), dict):
            if isinstance(item.get("id"), str):
                self.process.tool_ended(item["id"])
            if _is_command(item):
                self.commands.append(item)  # sandbox.py tells whether any really ran

    def _rate_limits(self) -> None:
        """codex prints its account's rate limits only in its session log (a ``token_count``
        event after each model response, from the API's ``x-codex-*`` headers): each new
        reading is passed on as that event, so the runtime reads them with the stdout ones."""
        if self.on_event is None:
            return
        if self.limits is None:
            log = self._session_log()
            if log is None:
                return
            self.limits = RateLimitReader(log)
        for reading in self.limits.read():
            self.on_event({"type": "token_count", "rate_limits": reading})

    def _meter(self) -> None:
        """With a counted budget: the usage codex logged since the last event (a
        ``token_count`` after each model response), priced; at the budget the run is stopped.
        Read on each stdout event, so a run is stopped at most one model response late."""
        budget, price = self.request.counted_budget_usd, self.request.token_price
        if budget is None or price is None or self.over_budget is not None:
            return
        if self.meter is None:
            log = self._session_log()
            if log is None:
                return
            self.meter = SessionLogMeter(log)
        usage = self.meter.read()
        if usage is None:
            return
        self.live_cost = token_cost("priced", usage, {"priced": price}) or 0.0
        if self.live_cost >= budget:
            self.over_budget = (
                f"budget: the run reached [budget] per_run_usd (${budget:g}; "
                f"${self.live_cost:.4f} counted from codex's token usage)"
            )
            self.artifacts.note(self.over_budget)
            self.process.stop("killed_policy", self.over_budget)

    def _count_turn(self, kind: str) -> None:
        """codex has no turn limit: each tool call it starts (a command, a patch, a search) is
        counted, and past ``counted_max_turns`` the run is stopped, saying so."""
        if kind == "agent_message":
            return
        self.tool_calls += 1
        self.count_progress()
        limit = self.request.counted_max_turns
        if limit is not None and self.tool_calls > limit and self.looping is None:
            self.looping = f"no progress: past max_turns ({limit} tool calls)"
            self.artifacts.note(self.looping)
            self.process.stop("killed_policy", self.looping)

    def _last_message(self) -> str | None:
        try:
            text = self.last_message_path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return None
        self.artifacts.attach("codex_last_message", LAST_MESSAGE_FILE, text)
        self.last_message_path.unlink(missing_ok=True)
        return text

    def _finish(self, ended: ProcessOutcome) -> CliOutcome:
        try:
            return self._conclude(ended)
        finally:
            if self.isolated_home is not None:
                self.isolated_home.release()

    def _session_log(self) -> Path | None:
        """codex's own log of this run, in its ``CODEX_HOME``."""
        if self.codex_home is None or self.thread_id is None:
            return None
        return find_session_log(self.codex_home, self.thread_id)

    def _keep_session_log(self, log: Path | None) -> None:
        """A home removed at the end would take codex's session log (the tool outputs the
        model got) with it: keep a copy with the run's artifacts."""
        if log is None or self.isolated_home is None or not self.isolated_home.removable:
            return
        with contextlib.suppress(OSError):
            text = log.read_text(encoding="utf-8", errors="replace")
            self.artifacts.attach("codex_session_log", SESSION_LOG_FILE, text)

    def _conclude(self, ended: ProcessOutcome) -> CliOutcome:
        self._rate_limits()  # the last reading: a spent window is written just before the end
        termination, reason = ended.termination, ended.reason
        infrastructure: str | None = None
        last = self._last_message()
        session_log = self._session_log()
        if self.unreachable is not None and ended.cancelled_at is not None:
            termination, reason, infrastructure = "error", self.unreachable, MODEL_API
        elif self.looping is not None and ended.cancelled_at is not None:
            termination, reason = "killed_policy", self.looping
        elif self.over_budget is not None and ended.cancelled_at is not None:
            termination, reason = "killed_policy", self.over_budget
        if termination == "completed":
            if self.malformed:
                termination, reason = "error", f"{len(self.malformed)} malformed stdout line(s)"
            elif self.turn_failed is not None:
                termination, reason = "error", f"turn.failed: {self.turn_failed}"
            elif self.turns_completed == 0:
                termination, reason = "error", "codex ended without a turn.completed event"
            elif last is None:
                termination, reason = "error", "codex wrote no --output-last-message file"
            elif (sandbox := check_run(session_log, self.commands, ended)) is not None:
                termination, reason, infrastructure = "error", sandbox.reason, INFRASTRUCTURE
                self.artifacts.annotate(infrastructure_failure=INFRASTRUCTURE)
        elif self.turn_failed is not None and infrastructure is None:
            reason = f"{reason}; turn.failed: {self.turn_failed}"
        if self.turn_failed is not None and model_api_message(self.turn_failed):
            termination, infrastructure = "error", MODEL_API
            reason = f"the model API failed: {self.turn_failed}"
        if infrastructure == MODEL_API:
            self.artifacts.annotate(infrastructure_failure=MODEL_API)
        if self.turns_completed or self.turn_failed is not None or self._live_usage():
            self.result = self._result(last, termination == "completed")
        if ended.cancelled_at is not None:
            self.artifacts.annotate(cancelled_at=ended.cancelled_at.isoformat())
        self._keep_session_log(session_log)
        finished = self.artifacts.finish(
            termination,
            ended.exit_code,
            final_response=self.result if self.result is not None else last,
            reason=reason,
        )
        if finished.termination != termination:  # a required artifact was lost
            termination = "error"
            reason = reason or "required artifacts missing"
        return CliOutcome(
            termination, ended.exit_code, reason, self.result, finished, ended, infrastructure
        )

    def _live_usage(self) -> dict[str, int]:
        """A run stopped before its turn completed reports no usage on stdout: what its session
        log counted so far (the tokens were spent all the same)."""
        if self.meter is None and (log := self._session_log()) is not None:
            self.meter = SessionLogMeter(log)
        return dict(self.meter.read() or {}) if self.meter is not None else {}

    def _result(self, last: str | None, success: bool) -> dict[str, Any]:
        """The run's result in the shape ``CliRuntime`` reads (``structured_output``, usage)."""
        structured: Any = None
        if last and self.request.output_schema is not None:
            try:
                structured = json.loads(last)
            except ValueError:
                self.artifacts.note("the last message is not the JSON the schema asks for")
        return {
            "type": "result",
            "subtype": "success"
            if success
            else ("error_turn_failed" if self.turn_failed is not None else "error"),
            "is_error": not success,
            "result": last,
            "structured_output": structured,
            "num_turns": self.turns_completed,
            "usage": dict(self.usage) or self._live_usage(),
            "model": self.request.model,
            "session_id": self.thread_id,
            "source": "codex exec --output-last-message",
        }


class _LogTail:
    """The complete lines a growing JSONL file gained since the last read, as JSON objects,
    those holding ``needle`` only (a cheap filter before parsing)."""

    def __init__(self, path: Path, needle: bytes) -> None:
        self.path = path
        self.needle = needle
        self.offset = 0

    def entries(self) -> list[dict[str, Any]]:
        try:
            with self.path.open("rb") as log:
                log.seek(self.offset)
                data = log.read()
        except OSError:
            return []
        end = data.rfind(b"\n") + 1
        self.offset += end
        found = []
        for line in data[:end].splitlines():
            if self.needle in line:
                with contextlib.suppress(ValueError):
                    entry = json.loads(line)
                    if isinstance(entry, dict):
                        found.append(entry)
        return found


class SessionLogMeter:
    """The running token usage of one codex run, read from its session log as it grows: the
    ``total_token_usage`` of the last ``token_count`` event (complete lines only)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._tail = _LogTail(path, b'"token_count"')
        self.usage: dict[str, int] | None = None

    def read(self) -> dict[str, int] | None:
        for entry in self._tail.entries():
            total = _total_usage(entry)
            if total is not None:
                self.usage = total
        return self.usage


class RateLimitReader:
    """The ``rate_limits`` of one codex run's session log as it grows: each reading that
    differs from the one before (complete lines only)."""

    def __init__(self, path: Path) -> None:
        self._tail = _LogTail(path, b'"rate_limits"')
        self.last: dict[str, Any] | None = None

    def read(self) -> list[dict[str, Any]]:
        readings = []
        for entry in self._tail.entries():
            payload = entry.get("payload")
            limits = payload.get("rate_limits") if isinstance(payload, dict) else None
            if isinstance(limits, dict) and limits != self.last:
                self.last = limits
                readings.append(limits)
        return readings


def _total_usage(entry: Any) -> dict[str, int] | None:
    payload = entry.get("payload") if isinstance(entry, dict) else None
    info = payload.get("info") if isinstance(payload, dict) else None
    total = info.get("total_token_usage") if isinstance(info, dict) else None
    if not isinstance(total, dict):
        return None
    return {k: v for k, v in total.items() if isinstance(v, int) and not isinstance(v, bool)}


def _is_command(item: Any) -> TypeGuard[dict[str, Any]]:
    return isinstance(item, dict) and item.get("type") == "command_execution"

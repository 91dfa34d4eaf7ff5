"""A codex run whose sandbox could not run its commands, told from one whose commands failed.

codex 0.169.0 reports a command its sandbox could not start to the model, and on ``exec
--json``'s stdout only now and then (a ``command_execution`` item whose output is the error, or
nothing at all); the run still ends with ``turn.completed`` and exit 0, the model having
concluded what it liked (observed with a system bubblewrap and no helper alias: see
``home.py``). The evidence is in codex's own session log,
``$CODEX_HOME/sessions/YYYY/MM/DD/rollout-<time>-<thread id>.jsonl``: the outputs of the tool
calls, as the model got them (a ``function_call_output`` text, or in code mode a
``custom_tool_call_output`` whose texts may be JSON with an ``output``).

An output carries a sandbox-level error when a line of it is one of bubblewrap's own errors
(``bwrap: …``: no namespace, no helper to exec, no ``/proc``) or a panic of codex's Linux sandbox
helper. A run whose outputs carry such errors and in which no command ran (no
``command_execution`` item free of them) could not run anything: it is a failure of the machine
codex runs on, not of the agent's work, and says so, with what codex said at start about its
helpers when it said something.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from adapters.runtime.cli.process import ProcessOutcome

__all__ = [
    "INFRASTRUCTURE",
    "SandboxFailure",
    "check_run",
    "find_session_log",
    "sandbox_errors",
    "sandbox_failure",
]

INFRASTRUCTURE = "sandbox"  # CliOutcome.infrastructure of such a run

_BWRAP_ERROR = re.compile(r"^bwrap: .+$", re.MULTILINE)
_HELPER_PANIC = re.compile(r"panicked at [^\n]*linux-sandbox/[^\n]*\n([^\n]+)")
_HELPER_WARNING = re.compile(
    r"WARNING: proceeding, even though we could not (?:create|update) "
    r"PATH(?: aliases)?: (.+)"
)


@dataclass(frozen=True)
class SandboxFailure:
    """``failed`` commands failed before they started, with these distinct ``errors``; none
    ran. ``helpers`` is why codex made no helper aliases, when it said so at start."""

    failed: int
    errors: tuple[str, ...]
    helpers: str | None = None

    @property
    def reason(self) -> str:
        said = "; ".join(self.errors)
        commands = "command" if self.failed == 1 else "commands"
        reason = (
            f"codex's sandbox could not run commands: {self.failed} {commands} failed before "
            f"starting ({said}) and none ran"
        )
        if self.helpers:
            reason += f"; at start codex could not create its helper aliases: {self.helpers}"
        return reason


def sandbox_errors(text: str) -> list[str]:
    """The sandbox-level errors in one command's output, in order."""
    found = [match.group(0).strip() for match in _BWRAP_ERROR.finditer(text)]
    found += [f"codex-linux-sandbox: {m.group(1).strip()}" for m in _HELPER_PANIC.finditer(text)]
    return found


def find_session_log(codex_home: Path, thread_id: str) -> Path | None:
    """codex's session log of thread ``thread_id`` under ``codex_home``, if there is one."""
    return next(iter(sorted(codex_home.glob(f"sessions/**/rollout-*{thread_id}.jsonl"))), None)


def sandbox_failure(
    session_log: Path | None,
    commands: Sequence[Mapping[str, Any]],
    stderr: str = "",
) -> SandboxFailure | None:
    """The run's sandbox failure, or None. ``commands``: its completed ``command_execution``
    items from stdout; ``stderr``: what codex printed there."""
    shown = [str(c.get("aggregated_output") or "") for c in commands]
    if any(not sandbox_errors(output) for output in shown):
        return None  # a command ran
    # The session log has every tool output; stdout shows some of them (when codex reports a
    # command it could not start there at all, which depends on timing): one or the other.
    logged = list(_tool_outputs(session_log)) if session_log is not None else []
    failing = [errors for errors in map(sandbox_errors, logged or shown) if errors]
    if not failing:
        return None
    distinct = tuple(dict.fromkeys(error for errors in failing for error in errors))
    warning = _HELPER_WARNING.search(stderr)
    return SandboxFailure(len(failing), distinct, warning.group(1).strip() if warning else None)


def check_run(
    session_log: Path | None, commands: Sequence[Mapping[str, Any]], ended: ProcessOutcome
) -> SandboxFailure | None:
    """:func:`sandbox_failure` of a finished run, its stderr read from the process's log."""
    try:
        stderr = ended.stderr_path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        stderr = ""
    return sandbox_failure(session_log, commands, stderr)


def _tool_outputs(session_log: Path) -> Iterator[str]:
    """Every tool call's output in the session log, as text (unreadable lines are skipped)."""
    try:
        lines = session_log.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return
    for line in lines:
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        payload = entry.get("payload") if isinstance(entry, dict) else None
        if not isinstance(payload, dict) or entry.get("type") != "response_item":
            continue
        if payload.get("type") in ("function_call_output", "custom_tool_call_output"):
            yield "\n".join(_texts(payload.get("output")))


def _texts(output: Any) -> Iterable[str]:
    """The text of a tool output: a string, or a list of ``{"text": …}`` items; a text that is
    a JSON object with an ``output`` (code mode's ``exec_command`` result) yields that too."""
    items = [output] if isinstance(output, str) else output if isinstance(output, list) else []
    for item in items:
        text = item.get("text") if isinstance(item, dict) else item
        if not isinstance(text, str):
            continue
        yield text
        try:
            parsed = json.loads(text)
        except ValueError:
            continue
        if isinstance(parsed, dict) and isinstance(parsed.get("output"), str):
            yield parsed["output"]

"""What an agent run does, as lines a person reads: the one renderer behind ``cpe runs show``
(with and without ``--follow``) and the dashboard's live box.

:func:`activity_lines` is pure: one record of the run's normalized transcript
(``runner_transcript.jsonl``: claude's stream-json messages, codex's ``exec --json`` events)
becomes display lines: the assistant's text, each tool call with what it acts on (``tool Bash:
<command>``, ``tool Edit: <path>``), a tool result's first line, the CLI's retries of the model
API in ``cpe status``'s words (``retrying: the model API is overloaded (…), retry 4/10 in 8 s``),
other system events. Paths under the run's working directory are shown relative to it.

:class:`TranscriptTail` reads the transcript as it grows, from its start: each ``read`` gives the
lines of the records completed since the last one (a record half-written waits for the next
read) and says, through ``finished``, when the run's artifacts are final (nothing is written
after). :func:`run_activity` is the whole of it at once.

The engine's own agent stream is prose only (what the runtimes' ``output`` carries); these
lines are what the run did, read from its record. The transcript was redacted when it was
written; each record is redacted again here, since these lines reach a web page.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from adapters.runtime.artifacts.files import CANONICAL_FILES, MANIFEST
from adapters.runtime.artifacts.native_messages import render
from adapters.runtime.artifacts.redaction import redact
from adapters.runtime.claude.signals import ClaudeSignals
from domain.signals import describe_signal

__all__ = ["FIRST_LINE_CHARS", "TRANSCRIPT", "TranscriptTail", "activity_lines", "run_activity"]

TRANSCRIPT = CANONICAL_FILES["runner_transcript"]
_METADATA = CANONICAL_FILES["runner_metadata"]
FIRST_LINE_CHARS = 200  # of a tool result's first line
INDENT = "  "  # before the continuation lines of a record (an assistant's long answer)


def activity_lines(wire: Mapping[str, Any], cwd: str | None = None) -> list[str]:
    """The lines one transcript record shows; ``cwd``: the run's working directory."""
    wire = redact(wire)  # the record's data, not the lines (``tokens=1/2`` is no secret)
    kind = wire.get("type")
    if (kind == "system" and wire.get("subtype") == "api_retry") or kind == "rate_limit_event":
        signal = ClaudeSignals(lambda _: None).signal(wire)
        texts = [describe_signal(signal)] if signal is not None else render(wire)
    elif kind == "user":
        texts = _user(wire)
    elif kind == "item.completed" and _item(wire).get("type") == "command_execution":
        item = _item(wire)
        output = _first_line(item.get("aggregated_output"))
        texts = [f"tool result (exit {item.get('exit_code')}): {output}"]
    else:
        texts = render(wire)
    prefix = cwd.rstrip("/") + "/" if cwd else None
    lines: list[str] = []
    for text in texts:
        shown = text.replace(prefix, "") if prefix else text
        first, *rest = shown.splitlines() or [""]
        lines.append(first)
        lines.extend(INDENT + line for line in rest)
    return lines


def _user(wire: Mapping[str, Any]) -> list[str]:
    """Tool results by their first line; anything else as the transcript log gives it."""
    message = wire.get("message")
    content = message.get("content") if isinstance(message, Mapping) else None
    if not isinstance(content, list):
        return render(wire)
    texts = []
    for block in content:
        if isinstance(block, Mapping) and block.get("type") == "tool_result":
            label = "tool error" if block.get("is_error") else "tool result"
            texts.append(f"{label}: {_first_line(block.get('content'))}")
        elif isinstance(block, Mapping) and block.get("type") == "text":
            texts.extend(render({"type": "user", "message": {"content": [block]}}))
    return texts


def _first_line(value: Any) -> str:
    """The first line of an output that says something, cut to FIRST_LINE_CHARS, and how many
    lines follow it."""
    if isinstance(value, list):  # content blocks
        value = "\n".join(
            str(part.get("text", "")) if isinstance(part, Mapping) else str(part) for part in value
        )
    lines = [line.strip() for line in str(value or "").splitlines() if line.strip()]
    if not lines:
        return "(no output)"
    first = lines[0] if len(lines[0]) <= FIRST_LINE_CHARS else lines[0][: FIRST_LINE_CHARS - 1]
    first += "…" if first != lines[0] else ""
    more = len(lines) - 1
    return first + (f" (+{more} line{'s' if more != 1 else ''})" if more else "")


def _item(wire: Mapping[str, Any]) -> Mapping[str, Any]:
    item = wire.get("item")
    return item if isinstance(item, Mapping) else {}


class TranscriptTail:
    """A run's activity as its transcript grows (``run_dir``: ``<state_dir>/runs/<session>``).
    Not thread-safe: one reader."""

    def __init__(self, run_dir: Path):
        self.run_dir = run_dir
        self.finished = False  # the run's artifacts are final: a read after adds nothing
        self._offset = 0
        self._cwd: str | None = None

    @property
    def exists(self) -> bool:
        return (self.run_dir / TRANSCRIPT).is_file()

    def read(self) -> list[str]:
        """The lines of the records completed since the last read."""
        self.finished = self.finished or _manifest_state(self.run_dir) == "finished"
        try:
            with (self.run_dir / TRANSCRIPT).open("rb") as transcript:
                if transcript.seek(0, 2) < self._offset:  # written again from the start
                    self._offset = 0
                transcript.seek(self._offset)
                data = transcript.read()
        except OSError:
            return []
        complete = data.rfind(b"\n") + 1  # a record still being written waits
        self._offset += complete
        if self._cwd is None:
            self._cwd = _working_directory(self.run_dir)
        lines: list[str] = []
        for raw in data[:complete].splitlines():
            lines.extend(self._record(raw))
        return lines

    def _record(self, raw: bytes) -> list[str]:
        if not raw.strip():
            return []
        try:
            wire = json.loads(raw)
        except ValueError:
            return ["(a transcript record that is not JSON)"]
        if not isinstance(wire, dict):
            return []
        if self._cwd is None and wire.get("type") == "system" and isinstance(wire.get("cwd"), str):
            self._cwd = wire["cwd"]
        return activity_lines(wire, self._cwd)


def run_activity(run_dir: Path) -> list[str] | None:
    """A run's whole activity so far; None when it has no transcript (never started, or
    from before the normalized artifacts)."""
    tail = TranscriptTail(run_dir)
    return tail.read() if tail.exists else None


def _manifest_state(run_dir: Path) -> str | None:
    try:
        manifest = json.loads((run_dir / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    state = manifest.get("state") if isinstance(manifest, dict) else None
    return state if isinstance(state, str) else None


def _working_directory(run_dir: Path) -> str | None:
    try:
        metadata = json.loads((run_dir / _METADATA).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    cwd = metadata.get("working_directory") if isinstance(metadata, dict) else None
    return cwd if isinstance(cwd, str) and cwd not in ("", "/") else None

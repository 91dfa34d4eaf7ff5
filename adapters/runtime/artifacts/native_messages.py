"""Native agent messages as wire dicts, and as lines of the human-readable ``transcript.log``.

:func:`to_wire` turns what a runner adapter holds into the CLI's wire shape: a dict from the
stream (``claude`` stream-json, ``codex exec --json``) is kept as it is; a claude-agent-sdk
message object (``AssistantMessage``, ``ResultMessage``…) is turned back into the stream-json
dict it was parsed from (the SDK's message parser, inverted), recognised by its class name so
this module never imports the SDK (only the SDK adapter may). The SDK does not expose the raw
lines, so what comes back is the parsed content, not the bytes.

:func:`render` gives the transcript lines of one wire dict: assistant text in full, each tool
call with a one-line summary of its input, tool results cut to :data:`RESULT_CHARS`, the
result with its cost and turns; the same for codex items. Unknown messages get one line naming
their type.

:class:`Digest` watches the (redacted) wire messages as they are recorded and keeps what the
final artifacts need: the last ``result`` (cost, turns, token usage, permission denials,
structured output), the last assistant text (the final response when there is no result, as
with codex), the native session id, model and CLI version, and codex's per-turn token usage.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Mapping
from typing import Any

from domain.models import RunUsage

__all__ = [
    "RESULT_CHARS",
    "Digest",
    "SUMMARY_CHARS",
    "one_line",
    "render",
    "summarize_tool_input",
    "to_wire",
]

SUMMARY_CHARS = 200
RESULT_CHARS = 400

# Block classes whose wire type is not their snake-cased name (message_parser.py).
_BLOCK_TYPES = {"ServerToolResultBlock": "advisor_tool_result"}

# Which input field says what a tool call does, by tool name.
_TOOL_FIELDS = {
    "Bash": "command",
    "Read": "file_path",
    "Write": "file_path",
    "Edit": "file_path",
    "MultiEdit": "file_path",
    "NotebookEdit": "notebook_path",
    "Glob": "pattern",
    "Grep": "pattern",
    "WebFetch": "url",
    "WebSearch": "query",
    "Task": "description",
    "Agent": "description",
}


# ----------------------------------------------------------------------------- to_wire


def to_wire(message: object) -> dict[str, Any]:
    """``message`` as a stream-json dict (see the module docstring)."""
    if isinstance(message, Mapping):
        return {str(key): value for key, value in message.items()}
    if not dataclasses.is_dataclass(message) or isinstance(message, type):
        return {"type": "unknown", "repr": repr(message)[:RESULT_CHARS]}
    name = type(message).__name__
    data = {f.name: _plain(getattr(message, f.name)) for f in dataclasses.fields(message)}
    if isinstance(data.get("data"), Mapping) and "subtype" in data:
        # SystemMessage and its subclasses keep the whole wire dict in ``data``.
        wire = dict(data["data"])
        wire.setdefault("type", "system")
        wire.setdefault("subtype", data["subtype"])
        return wire
    if name == "AssistantMessage":
        inner = {
            "id": data.pop("message_id", None),
            "role": "assistant",
            "model": data.pop("model", None),
            "content": data.pop("content", []),
            "stop_reason": data.pop("stop_reason", None),
            "usage": data.pop("usage", None),
        }
        return {"type": "assistant", "message": _compact(inner), **_compact(data)}
    if name == "UserMessage":
        inner = {"role": "user", "content": data.pop("content", "")}
        return {"type": "user", "message": inner, **_compact(data)}
    if name == "ResultMessage":
        if "model_usage" in data:
            data["modelUsage"] = data.pop("model_usage")
        return {"type": "result", **_compact(data)}
    return {"type": _snake(name.removesuffix("Message")), **_compact(data)}


def _plain(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
        name = type(value).__name__
        if name.endswith("Block"):
            kind = _BLOCK_TYPES.get(name) or _snake(name.removesuffix("Block"))
            return {"type": kind, **fields}
        return fields
    if isinstance(value, Mapping):
        return {str(key): _plain(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(item) for item in value]
    return value


def _compact(data: Mapping[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in data.items() if value is not None}


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


# ----------------------------------------------------------------------------- digest


class Digest:
    """Not thread-safe on its own: ``RunArtifacts`` calls it under its lock."""

    def __init__(self) -> None:
        self.last_result: dict[str, Any] | None = None
        self.last_text: str | None = None
        self.native: dict[str, Any] = {}
        self.turn_usage: dict[str, int] = {}  # codex: summed over turn.completed

    def track(self, wire: Mapping[str, Any]) -> None:
        kind = wire.get("type")
        if kind == "result":
            self.last_result = dict(wire)
        elif kind == "system" and wire.get("subtype") == "init":
            for key in ("session_id", "model", "claude_code_version"):
                if wire.get(key) is not None:
                    self.native[key] = wire[key]
        elif kind == "thread.started":
            self.native["session_id"] = wire.get("thread_id")
        elif kind == "assistant":
            texts = [
                block["text"]
                for block in _list(_mapping(wire.get("message")).get("content"))
                if isinstance(block, Mapping) and isinstance(block.get("text"), str)
            ]
            self.last_text = texts[-1] if texts else self.last_text
        elif kind == "item.completed":
            item = _mapping(wire.get("item"))
            if item.get("type") == "agent_message" and isinstance(item.get("text"), str):
                self.last_text = item["text"]
        elif kind == "turn.completed":
            for key, value in _mapping(wire.get("usage")).items():
                if isinstance(value, int):
                    self.turn_usage[key] = self.turn_usage.get(key, 0) + value

    def final_response(self, final: Mapping[str, Any] | None) -> dict[str, Any]:
        """The ``runner_final_response`` document for a final result, a text, or nothing."""
        if final is None:
            text = self.last_text
            return {"available": text is not None, "text": text, "structured_output": None}
        if final.get("type") == "text":
            return {"available": True, "text": final.get("text"), "structured_output": None}
        text = final.get("result")
        return {
            "available": True,
            "text": text if text is not None else self.last_text,
            "structured_output": final.get("structured_output"),
            "is_error": final.get("is_error"),
            "subtype": final.get("subtype"),
            "native": dict(final),
        }

    def outcome(self, result: Mapping[str, Any] | None, usage: RunUsage | None) -> dict[str, Any]:
        """Metadata fields: cost, turns, token usage, denials, native ids. ``result`` defaults
        to the last one seen; the set fields of ``usage`` win over it."""
        result = result if result is not None else (self.last_result or {})
        tokens = dict(_mapping(result.get("usage")) or self.turn_usage)
        fields: dict[str, Any] = {
            "cost_usd": result.get("total_cost_usd"),
            "num_turns": result.get("num_turns"),
            "usage": tokens,
            "permission_denials": _list(result.get("permission_denials")),
            "native": dict(self.native),
        }
        if usage is not None:
            if usage.cost_usd is not None:
                fields["cost_usd"] = usage.cost_usd
            if usage.turns is not None:
                fields["num_turns"] = usage.turns
            if usage.input_tokens is not None:
                tokens["input_tokens"] = usage.input_tokens
            if usage.output_tokens is not None:
                tokens["output_tokens"] = usage.output_tokens
        return fields


# ----------------------------------------------------------------------------- render


def render(wire: Mapping[str, Any]) -> list[str]:
    """The ``transcript.log`` lines (without timestamps) for one wire message."""
    kind = str(wire.get("type", "unknown"))
    if kind == "assistant":
        return _assistant(wire)
    if kind == "user":
        return _user(wire)
    if kind == "system":
        return [_system(wire)]
    if kind == "result":
        return _result(wire)
    if kind.startswith(("item.", "turn.", "thread.")) or kind == "error":
        return _codex(kind, wire)
    return [f"event {kind}"]


def _assistant(wire: Mapping[str, Any]) -> list[str]:
    message = _mapping(wire.get("message"))
    lines = []
    for block in _blocks(message.get("content")):
        kind = block.get("type")
        if kind == "text":
            lines.append(f"assistant: {block.get('text', '')}")
        elif kind == "thinking":
            lines.append(f"thinking: {one_line(str(block.get('thinking', '')), SUMMARY_CHARS)}")
        elif kind in ("tool_use", "server_tool_use"):
            name = str(block.get("name", "?"))
            lines.append(f"tool {name}: {summarize_tool_input(name, block.get('input'))}")
        else:
            lines.append(f"assistant {kind}")
    if wire.get("error"):
        lines.append(f"assistant error: {wire['error']}")
    return lines


def _user(wire: Mapping[str, Any]) -> list[str]:
    content = _mapping(wire.get("message")).get("content")
    if isinstance(content, str):
        return [f"user: {one_line(content, RESULT_CHARS)}"]
    lines = []
    for block in _blocks(content):
        if block.get("type") == "tool_result":
            label = "tool error" if block.get("is_error") else "tool result"
            lines.append(f"{label}: {one_line(_text_of(block.get('content')), RESULT_CHARS)}")
        elif block.get("type") == "text":
            lines.append(f"user: {one_line(str(block.get('text', '')), RESULT_CHARS)}")
    return lines


def _system(wire: Mapping[str, Any]) -> str:
    subtype = wire.get("subtype", "?")
    if subtype != "init":
        return f"system {subtype}"
    tools = wire.get("tools")
    return (
        f"system init: model={wire.get('model')} cwd={wire.get('cwd')} "
        f"tools={len(tools) if isinstance(tools, list) else '?'} "
        f"cli={wire.get('claude_code_version')} session={wire.get('session_id')}"
    )


def _result(wire: Mapping[str, Any]) -> list[str]:
    usage = _mapping(wire.get("usage"))
    denials = wire.get("permission_denials") or []
    head = (
        f"result {wire.get('subtype')}{' (error)' if wire.get('is_error') else ''}: "
        f"turns={wire.get('num_turns')} cost_usd={wire.get('total_cost_usd')} "
        f"tokens={usage.get('input_tokens')}/{usage.get('output_tokens')} "
        f"denials={len(denials) if isinstance(denials, list) else '?'}"
    )
    lines = [head]
    if wire.get("result"):
        lines.append(f"result text: {one_line(str(wire['result']), RESULT_CHARS)}")
    for error in wire.get("errors") or []:
        lines.append(f"result error: {one_line(str(error), RESULT_CHARS)}")
    return lines


def _codex(kind: str, wire: Mapping[str, Any]) -> list[str]:
    item = _mapping(wire.get("item"))
    item_type = item.get("type")
    if kind == "item.completed" and item_type == "agent_message":
        return [f"assistant: {item.get('text', '')}"]
    if item_type == "command_execution":
        command = one_line(str(item.get("command", "")), SUMMARY_CHARS)
        if kind == "item.started":
            return [f"tool command: {command}"]
        output = one_line(str(item.get("aggregated_output", "")), RESULT_CHARS)
        return [f"tool result (exit {item.get('exit_code')}): {output}"]
    if item_type == "file_change" and kind == "item.completed":
        changes = ", ".join(
            f"{c.get('kind')} {c.get('path')}" for c in _blocks(item.get("changes"))
        )
        return [f"file change: {one_line(changes, SUMMARY_CHARS)}"]
    if item_type in ("reasoning", "error") and kind == "item.completed":
        text = item.get("text") or item.get("message") or ""
        return [f"{item_type}: {one_line(str(text), SUMMARY_CHARS)}"]
    if kind == "turn.completed":
        usage = _mapping(wire.get("usage"))
        return [f"turn completed: tokens={usage.get('input_tokens')}/{usage.get('output_tokens')}"]
    if kind in ("turn.failed", "error"):
        error = _mapping(wire.get("error")).get("message") or wire.get("message") or ""
        return [f"{kind}: {one_line(str(error), RESULT_CHARS)}"]
    if kind == "thread.started":
        return [f"thread started: {wire.get('thread_id')}"]
    if kind == "item.started" or (kind == "item.completed" and item_type):
        return [f"{kind} {item_type}"]
    return [f"event {kind}"]


def summarize_tool_input(tool: str, tool_input: Any) -> str:
    """One line saying what a tool call does: its command, path or pattern, else its JSON."""
    if isinstance(tool_input, Mapping):
        field = _TOOL_FIELDS.get(tool)
        if field and isinstance(tool_input.get(field), str):
            summary = str(tool_input[field])
            if tool == "Write" and isinstance(tool_input.get("content"), str):
                summary += f" ({len(tool_input['content'])} chars)"
            return one_line(summary, SUMMARY_CHARS)
    return one_line(json.dumps(tool_input, ensure_ascii=False, default=str), SUMMARY_CHARS)


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(
            str(part.get("text", "")) if isinstance(part, Mapping) else str(part)
            for part in content
        )
    return json.dumps(content, ensure_ascii=False, default=str)


def one_line(text: str, limit: int) -> str:
    """One line of at most ``limit`` characters: newlines shown as ⏎, the rest cut with …."""
    flat = " ⏎ ".join(line.strip() for line in text.strip().splitlines())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _blocks(value: Any) -> list[Mapping[str, Any]]:
    if not isinstance(value, list):
        return []
    return [block for block in value if isinstance(block, Mapping)]


def _list(value: Any) -> list[Any]:
    return list(value) if isinstance(value, list) else []

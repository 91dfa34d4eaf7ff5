"""Scenario blocks as OpenAI Responses output items: the codex mapping.

The mapping is documented in the package docstring (``adapters.runtime.scripted_model``):
text and ``StructuredOutput`` become ``message`` items, ``Bash`` the shell function the request
offers, ``Write``/``Edit`` an ``apply_patch`` call carrying a codex patch, any other tool a
``function_call`` of its name.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from adapters.runtime.scripted_model import wire
from adapters.runtime.scripted_model.scenario import Block, ScriptError, TextBlock, ToolBlock

# The shell-like function codex offers, in order of preference, and how a command goes in it.
_SHELLS = ("exec_command", "shell_command", "shell")


def output_items(
    blocks: Sequence[Block], *, tools: Sequence[Mapping[str, Any]], cwd: str | None
) -> list[dict[str, Any]]:
    """The Responses output items of a turn's blocks (a hang has none)."""
    items: list[dict[str, Any]] = []
    for block in blocks:
        if isinstance(block, TextBlock):
            items.append(_message(block.text))
        elif isinstance(block, ToolBlock):
            items.append(_tool_item(block, tools, cwd))
    return items


def add_file_patch(path: str, content: str) -> str:
    """A codex patch creating ``path``; every line gets a newline (``+`` lines)."""
    lines = "".join(f"+{line}\n" for line in content.splitlines())
    return f"*** Begin Patch\n*** Add File: {path}\n{lines}*** End Patch\n"


def update_file_patch(path: str, old: str, new: str) -> str:
    """A codex patch replacing the whole lines ``old`` by ``new`` in ``path`` (one ``@@`` hunk)."""
    removed = "".join(f"-{line}\n" for line in old.splitlines())
    added = "".join(f"+{line}\n" for line in new.splitlines())
    return f"*** Begin Patch\n*** Update File: {path}\n@@\n{removed}{added}*** End Patch\n"


def _message(text: str) -> dict[str, Any]:
    return {
        "type": "message",
        "id": wire.new_id("msg"),
        "status": "completed",
        "role": "assistant",
        "content": [{"type": "output_text", "text": text, "annotations": []}],
    }


def _call(name: str, arguments: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "type": "function_call",
        "id": wire.new_id("fc"),
        "call_id": wire.new_id("call"),
        "name": name,
        "arguments": json.dumps(arguments),
        "status": "completed",
    }


def _tool_item(
    block: ToolBlock, tools: Sequence[Mapping[str, Any]], cwd: str | None
) -> dict[str, Any]:
    given = block.input
    if block.tool == "StructuredOutput":
        # codex has no such tool: the last message is the output, checked by --output-schema.
        return _message(json.dumps(given))
    if block.tool == "Bash":
        command = _string(given, "command", block.tool)
        offered = {str(t.get("name")) for t in tools}
        shell = next((name for name in _SHELLS if name in offered), "shell")
        if shell == "exec_command":
            return _call(shell, {"cmd": command})
        if shell == "shell_command":
            return _call(shell, {"command": command})
        return _call(shell, {"command": ["bash", "-lc", command]})
    if block.tool in ("Write", "Edit"):
        path = _relative(_string(given, "file_path", block.tool), cwd)
        if block.tool == "Write":
            patch = add_file_patch(path, _string(given, "content", block.tool))
        else:
            old, new = _string(given, "old_string", "Edit"), _string(given, "new_string", "Edit")
            patch = update_file_patch(path, old, new)
        kind = next((t.get("type") for t in tools if t.get("name") == "apply_patch"), "custom")
        if kind == "function":
            return _call("apply_patch", {"input": patch})
        return {
            "type": "custom_tool_call",
            "id": wire.new_id("ctc"),
            "call_id": wire.new_id("call"),
            "name": "apply_patch",
            "input": patch,
            "status": "completed",
        }
    return _call(block.tool, given)


def _string(given: Mapping[str, Any], key: str, tool: str) -> str:
    value = given.get(key)
    if not isinstance(value, str):
        raise ScriptError(f"scripted model: a {tool} block needs a string {key!r} for codex")
    return value


def _relative(path: str, cwd: str | None) -> str:
    # apply_patch paths are relative to the working directory codex runs in.
    prefix = (cwd or "").rstrip("/") + "/"
    return path[len(prefix) :] if cwd and path.startswith(prefix) else path

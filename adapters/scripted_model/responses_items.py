"""Scenario blocks as OpenAI Responses output items: the codex mapping.

The mapping is documented in docs/scripted-model-wire.md:
text and ``StructuredOutput`` become ``message`` items, ``Bash`` the shell function the request
offers, ``Write``/``Edit`` a codex patch (an ``apply_patch`` call when that tool is offered,
else an ``apply_patch`` heredoc through the shell), any other tool a ``function_call`` of its
name. In codex's *code mode* (the request offers the custom ``exec`` tool and no shell) ``Bash``
and ``Write``/``Edit`` become ``exec`` calls whose JavaScript calls the nested
``tools.exec_command`` / ``tools.apply_patch``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from adapters.scripted_model import wire
from adapters.scripted_model.scenario import Block, ScriptError, TextBlock, ToolBlock

# The shell-like function codex offers, in order of preference, and how a command goes in it.
_SHELLS = ("exec_command", "shell_command", "shell")
# Code mode's one model-facing tool: a freeform (custom) tool taking JavaScript.
CODE_MODE_TOOL = "exec"
_HEREDOC = "PATCH"


def output_items(
    blocks: Sequence[Block], *, tools: Sequence[Mapping[str, Any]], cwd: str | None
) -> list[dict[str, Any]]:
    """The Responses output items of a turn's blocks (a hang has none).

    ``tools``: the tools the request offers, namespaces already flattened.
    """
    offered = _offered(tools)
    items: list[dict[str, Any]] = []
    for block in blocks:
        if isinstance(block, TextBlock):
            items.append(_message(block.text))
        elif isinstance(block, ToolBlock):
            items.append(_tool_item(block, offered, cwd))
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


def apply_patch_heredoc(patch: str) -> str:
    """The shell command ``apply_patch <<'PATCH'`` … ``PATCH`` that codex intercepts and applies
    itself; the delimiter is one no line of ``patch`` equals."""
    lines = set(patch.splitlines())
    delimiter, n = _HEREDOC, 0
    while delimiter in lines:
        n += 1
        delimiter = f"{_HEREDOC}_{n}"
    body = patch.rstrip("\n")
    return f"apply_patch <<'{delimiter}'\n{body}\n{delimiter}"


def exec_command_js(command: str) -> str:
    """Code mode: the ``exec`` source running ``command`` and returning what it gave."""
    return (
        f"const r = await tools.exec_command({{cmd: {json.dumps(command)}}});\n"
        "text(JSON.stringify(r));\n"
    )


def apply_patch_js(patch: str) -> str:
    """Code mode: the ``exec`` source applying ``patch`` and returning what codex said."""
    return f"const r = await tools.apply_patch({json.dumps(patch)});\ntext(r);\n"


def _offered(tools: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    """Offered tool name → its type (``function``, ``custom`` …); the first of a name wins."""
    offered: dict[str, str] = {}
    for tool in tools:
        name = tool.get("name")
        if isinstance(name, str):
            offered.setdefault(name, str(tool.get("type", "function")))
    return offered


def _code_mode(offered: Mapping[str, str]) -> bool:
    return offered.get(CODE_MODE_TOOL) == "custom" and not any(s in offered for s in _SHELLS)


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


def _custom(name: str, text: str) -> dict[str, Any]:
    return {
        "type": "custom_tool_call",
        "id": wire.new_id("ctc"),
        "call_id": wire.new_id("call"),
        "name": name,
        "input": text,
        "status": "completed",
    }


def _shell(command: str, offered: Mapping[str, str]) -> dict[str, Any]:
    """``command`` through the shell the request offers (code mode: ``exec``)."""
    if _code_mode(offered):
        return _custom(CODE_MODE_TOOL, exec_command_js(command))
    shell = next((name for name in _SHELLS if name in offered), "shell")
    if shell == "exec_command":
        return _call(shell, {"cmd": command})
    if shell == "shell_command":
        return _call(shell, {"command": command})
    return _call(shell, {"command": ["bash", "-lc", command]})


def _tool_item(block: ToolBlock, offered: Mapping[str, str], cwd: str | None) -> dict[str, Any]:
    given = block.input
    if block.tool == "StructuredOutput":
        # codex has no such tool: the last message is the output, checked by --output-schema.
        return _message(json.dumps(given))
    if block.tool == "Bash":
        return _shell(_string(given, "command", block.tool), offered)
    if block.tool in ("Write", "Edit"):
        path = _relative(_string(given, "file_path", block.tool), cwd)
        if block.tool == "Write":
            patch = add_file_patch(path, _string(given, "content", block.tool))
        else:
            old, new = _string(given, "old_string", "Edit"), _string(given, "new_string", "Edit")
            patch = update_file_patch(path, old, new)
        kind = offered.get("apply_patch")
        if kind == "function":
            return _call("apply_patch", {"input": patch})
        if kind is not None:
            return _custom("apply_patch", patch)
        if _code_mode(offered):
            return _custom(CODE_MODE_TOOL, apply_patch_js(patch))
        # No apply_patch tool (codex 0.169.0 with a custom provider): codex still intercepts
        # an apply_patch heredoc run through its shell and applies the patch itself.
        return _shell(apply_patch_heredoc(patch), offered)
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

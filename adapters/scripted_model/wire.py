"""The Anthropic Messages API as the ``claude`` CLI speaks it: reading requests, writing replies.

Shapes follow what the CLI was observed to send and accept (CLI 2.1.330): a streamed reply
is ``message_start``, per block ``content_block_start`` / ``content_block_delta`` /
``content_block_stop``, then ``message_delta`` (stop reason, usage) and ``message_stop``, each
as an SSE ``event:``/``data:`` pair.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from adapters.scripted_model.scenario import Block, Conversation, TextBlock, ToolBlock

# The CLI puts its working directory in an "# Environment" text (observed in a system-role
# entry of ``messages``, not in ``system``), so every text of the request is searched.
_CWD = re.compile(r"Primary working directory: *(\S[^\n]*)")
_REMINDER = "<system-reminder>"
# Split streamed text and JSON so the CLI's delta accumulation is exercised, as with the API.
_CHUNK = 48

Event = tuple[str, dict[str, Any]]


@dataclass(frozen=True)
class ToolResult:
    """A ``tool_result`` the client sent back: what the CLI's tool run told the model."""

    tool_use_id: str
    is_error: bool
    content: str


def read_conversation(body: Mapping[str, Any]) -> Conversation:
    """What a scenario is selected and rendered by, from a ``/v1/messages`` request body."""
    messages = _messages(body)
    system = "\n\n".join(_texts(body.get("system")))
    first_user = next((m for m in messages if m.get("role") == "user"), None)
    prompt = "\n\n".join(
        text
        for text in _texts(first_user.get("content") if first_user else None)
        if not text.lstrip().startswith(_REMINDER)
    )
    cwd = None
    for text in [system, *(t for m in messages for t in _texts(m.get("content")))]:
        found = _CWD.search(text)
        if found:
            cwd = found.group(1).strip()
            break
    return Conversation(
        system=system,
        prompt=prompt,
        role=_schema_role(body.get("tools")),
        cwd=cwd,
        assistant_turns=sum(1 for m in messages if m.get("role") == "assistant"),
    )


def tool_names(body: Mapping[str, Any]) -> tuple[str, ...]:
    tools = body.get("tools")
    if not isinstance(tools, list):
        return ()
    return tuple(str(t["name"]) for t in tools if isinstance(t, dict) and "name" in t)


def last_tool_results(body: Mapping[str, Any]) -> tuple[ToolResult, ...]:
    """The ``tool_result`` blocks of the last user message (the results of the last turn)."""
    messages = _messages(body)
    last = next((m for m in reversed(messages) if m.get("role") == "user"), None)
    content = last.get("content") if last else None
    if not isinstance(content, list):
        return ()
    return tuple(
        ToolResult(
            tool_use_id=str(block.get("tool_use_id", "")),
            is_error=bool(block.get("is_error", False)),
            content="\n".join(_texts(block.get("content"))),
        )
        for block in content
        if isinstance(block, dict) and block.get("type") == "tool_result"
    )


def stop_reason(blocks: Sequence[Block]) -> str:
    return "tool_use" if any(isinstance(b, ToolBlock) for b in blocks) else "end_turn"


def content_blocks(blocks: Sequence[Block]) -> list[dict[str, Any]]:
    """The API content of ``blocks`` (text and tool_use; a hang has no content)."""
    content: list[dict[str, Any]] = []
    for block in blocks:
        if isinstance(block, TextBlock):
            content.append({"type": "text", "text": block.text})
        elif isinstance(block, ToolBlock):
            tool_id = new_id("toolu")
            content.append(
                {"type": "tool_use", "id": tool_id, "name": block.tool, "input": block.input}
            )
    return content


def stream_events(
    content: Sequence[Mapping[str, Any]],
    *,
    model: str,
    input_tokens: int,
    stop: str | None,
    output: int | None = None,
) -> list[Event]:
    """The SSE events of one assistant message; with ``stop=None`` the message is left open.
    ``output``: the output tokens reported (None: estimated from ``content``)."""
    out = output_tokens(content) if output is None else output
    events: list[Event] = [
        (
            "message_start",
            {
                "type": "message_start",
                "message": {
                    "id": new_id("msg"),
                    "type": "message",
                    "role": "assistant",
                    "model": model,
                    "content": [],
                    "stop_reason": None,
                    "stop_sequence": None,
                    "usage": _usage(input_tokens, min(1, out)),
                },
            },
        )
    ]
    for index, block in enumerate(content):
        if block["type"] == "text":
            start: dict[str, Any] = {"type": "text", "text": ""}
            deltas = [{"type": "text_delta", "text": part} for part in _chunks(block["text"])]
        else:
            start = {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}
            deltas = [
                {"type": "input_json_delta", "partial_json": part}
                for part in _chunks(json.dumps(block["input"]))
            ]
        events.append(
            (
                "content_block_start",
                {"type": "content_block_start", "index": index, "content_block": start},
            )
        )
        events.extend(
            ("content_block_delta", {"type": "content_block_delta", "index": index, "delta": d})
            for d in deltas
        )
        events.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
    if stop is not None:
        events.append(
            (
                "message_delta",
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": stop, "stop_sequence": None},
                    "usage": {"output_tokens": out},
                },
            )
        )
        events.append(("message_stop", {"type": "message_stop"}))
    return events


def encode_sse(events: Iterable[Event]) -> bytes:
    return b"".join(
        f"event: {name}\ndata: {json.dumps(data, separators=(',', ':'))}\n\n".encode()
        for name, data in events
    )


def message_json(
    content: Sequence[Mapping[str, Any]],
    *,
    model: str,
    input_tokens: int,
    stop: str,
    output: int | None = None,
) -> dict[str, Any]:
    """A non-streaming ``/v1/messages`` reply (``output`` as for ``stream_events``)."""
    return {
        "id": new_id("msg"),
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": list(content),
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": _usage(input_tokens, output_tokens(content) if output is None else output),
    }


def error_json(kind: str, message: str, *, request_id: str | None = None) -> dict[str, Any]:
    """The API's error body (``kind``: ``invalid_request_error``, ``not_found_error`` …); the
    API adds the ``request-id`` header's value as ``request_id``."""
    body: dict[str, Any] = {"type": "error", "error": {"type": kind, "message": message}}
    if request_id is not None:
        body["request_id"] = request_id
    return body


def estimate_tokens(raw: bytes) -> int:
    # A rough four bytes a token keeps the CLI's cost and context bookkeeping plausible.
    return max(1, len(raw) // 4)


def output_tokens(content: Sequence[Mapping[str, Any]]) -> int:
    return estimate_tokens(json.dumps(list(content)).encode())


def new_id(prefix: str) -> str:
    return f"{prefix}_scripted_{uuid.uuid4().hex[:20]}"


def _usage(input_tokens: int, output: int) -> dict[str, int]:
    return {
        "input_tokens": input_tokens,
        "output_tokens": output,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
    }


def _chunks(text: str) -> list[str]:
    return [text[i : i + _CHUNK] for i in range(0, len(text), _CHUNK)] or [""]


def _messages(body: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    messages = body.get("messages")
    if not isinstance(messages, list):
        return []
    return [m for m in messages if isinstance(m, dict)]


def _texts(content: object) -> list[str]:
    """The text of a ``system`` value, a message's content, or a tool_result's content."""
    if isinstance(content, str):
        return [content]
    if not isinstance(content, list):
        return []
    return [
        block["text"]
        for block in content
        if isinstance(block, dict)
        and block.get("type") == "text"
        and isinstance(block.get("text"), str)
    ]


def _schema_role(tools: object) -> str | None:
    """The role the ``StructuredOutput`` tool's schema pins, as ``output_schema`` writes it."""
    if not isinstance(tools, list):
        return None
    for tool in tools:
        if isinstance(tool, dict) and tool.get("name") == "StructuredOutput":
            role = tool.get("input_schema", {}).get("properties", {}).get("role", {})
            if not isinstance(role, dict):
                return None
            value = role.get("const", role.get("default"))
            if value is None and isinstance(role.get("enum"), list) and len(role["enum"]) == 1:
                value = role["enum"][0]
            return value if isinstance(value, str) else None
    return None

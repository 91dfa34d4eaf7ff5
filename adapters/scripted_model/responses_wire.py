"""The OpenAI Responses API as ``codex exec`` speaks it: reading requests, writing replies.

Shapes follow what codex 0.169.0 was observed to send and accept: a streamed reply is
``response.created`` and ``response.in_progress``, then per output item
``response.output_item.added``, its deltas (``response.content_part.added`` /
``response.output_text.delta`` / ``.done`` / ``response.content_part.done`` for a ``message``,
``response.function_call_arguments.delta`` / ``.done`` for a ``function_call``,
``response.custom_tool_call_input.delta`` / ``.done`` for a ``custom_tool_call``) and
``response.output_item.done``, then ``response.completed`` with the whole output and usage.
Every event carries its ``type`` and a rising ``sequence_number``; frames are SSE
``event:``/``data:`` pairs. How scenario blocks map onto items is in docs/scripted-model-wire.md.
"""

from __future__ import annotations

import itertools
import re
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from adapters.scripted_model import wire
from adapters.scripted_model.responses_items import output_items
from adapters.scripted_model.scenario import (
    Block,
    Conversation,
    HangBlock,
    Scenario,
    ScriptError,
    TextBlock,
    next_turn,
)
from adapters.scripted_model.scenario import select as select_scenario
from adapters.scripted_model.wire import Event, ToolResult

PATH = "/v1/responses"
# codex sends its environment as ``<environment_context><cwd>/abs</cwd>…`` in a user message.
_CWD_TAG = re.compile(r"<cwd>\s*([^<\n]+?)\s*</cwd>")
_CWD_LINE = re.compile(r"Primary working directory: *(\S[^\n]*)")
# User-role texts codex adds around the task prompt; the prompt match rule skips them.
_CONTEXT = (
    "<environment_context>",
    "<user_instructions>",
    "<permissions instructions>",
    "# AGENTS.md instructions",
)
_CALL_ITEMS = frozenset({"function_call", "custom_tool_call", "local_shell_call", "reasoning"})
_OUTPUT_ITEMS = frozenset({"function_call_output", "custom_tool_call_output"})
_ADDITIONAL_TOOLS = "additional_tools"  # an input item offering tools (code mode)
_SCRIPT_FAILED = "Script failed"
_CHUNK = 48


@dataclass(frozen=True)
class Answer:
    """What the server records and sends for one ``POST /v1/responses``.

    ``stream`` (SSE bytes) or ``payload`` (a JSON body) is sent, or neither (a hang that has
    nothing to stream first); with ``hang`` the connection is then held open.
    """

    kind: Literal["turn", "side"]
    status: int
    conversation: Conversation
    tool_results: tuple[ToolResult, ...]
    scenario: str | None = None
    reply: tuple[str, ...] = ()
    error: str | None = None
    stream: bytes | None = None
    payload: Mapping[str, Any] | None = None
    hang: bool = False

    def record_fields(self) -> dict[str, Any]:
        """The keyword arguments of the server's _record for this answer."""
        return {
            "conversation": self.conversation,
            "scenario": self.scenario,
            "reply": self.reply,
            "error": self.error,
            "tool_results": self.tool_results,
        }


def answer(
    book: Sequence[Scenario],
    body: Mapping[str, Any],
    raw: bytes,
    *,
    side_reply: str,
    report_usage: bool = True,
) -> Answer:
    """Play the turn ``body`` asks for from ``book`` (or refuse it with a 400); without
    ``report_usage`` the answer reports no tokens."""
    conversation = read_conversation(body)
    results = last_tool_results(body)
    scenario: str | None = None
    try:
        if not offered_tool_names(body):
            # Not an agent loop (those always offer tools): a side request.
            kind: Literal["turn", "side"] = "side"
            blocks: tuple[Block, ...] = (TextBlock(text=side_reply),)
        else:
            kind = "turn"
            chosen, variables = select_scenario(book, conversation)
            blocks = next_turn(chosen, conversation, variables)
            scenario = chosen.name
        items = output_items(blocks, tools=offered_tools(body), cwd=conversation.cwd)
    except ScriptError as exc:
        refusal = error_json("invalid_request_error", str(exc))
        return Answer("turn", 400, conversation, results, error=str(exc), payload=refusal)
    hang = isinstance(blocks[-1], HangBlock)
    reply = tuple(_describe(item) for item in items) + (("hang",) if hang else ())
    model = str(body.get("model") or "scripted-model")
    tokens = wire.estimate_tokens(raw) if report_usage else 0
    output = None if report_usage else 0
    stream: bytes | None = None
    payload: Mapping[str, Any] | None = None
    if body.get("stream") is True and (items or not hang):
        events = stream_events(
            items, model=model, input_tokens=tokens, done=not hang, output=output
        )
        stream = wire.encode_sse(events)
    elif not hang:
        payload = response_json(items, model=model, input_tokens=tokens, output=output)
    return Answer(
        kind, 200, conversation, results, scenario, reply, stream=stream, payload=payload, hang=hang
    )


def read_conversation(body: Mapping[str, Any]) -> Conversation:
    """What a scenario is selected and rendered by, from a ``/v1/responses`` request body."""
    items = _items(body)
    system = str(body.get("instructions") or "")
    prompt = body["input"] if isinstance(body.get("input"), str) else ""
    for item in items:
        if _is_message(item, "user"):
            texts = [t for t in _texts(item.get("content")) if not t.lstrip().startswith(_CONTEXT)]
            if texts:
                prompt = "\n\n".join(texts)
                break
    cwd = None
    for text in [system, *(t for item in items for t in _texts(item.get("content")))]:
        found = _CWD_TAG.search(text) or _CWD_LINE.search(text)
        if found:
            cwd = found.group(1).strip()
            break
    return Conversation(
        system=system,
        prompt=prompt,
        role=_pinned_role(body),
        cwd=cwd,
        assistant_turns=_assistant_turns(items),
    )


def offered_tools(body: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The tools a request offers: its top-level ``tools`` and those of its
    ``additional_tools`` input items (codex's code mode), ``namespace`` s flattened."""
    tools = list(_flatten(body.get("tools")))
    for item in _items(body):
        if item.get("type") == _ADDITIONAL_TOOLS:
            tools.extend(_flatten(item.get("tools")))
    return tools


def offered_tool_names(body: Mapping[str, Any]) -> tuple[str, ...]:
    """The names of ``offered_tools`` (a tool without a name, ``web_search``, has none)."""
    return tuple(str(t["name"]) for t in offered_tools(body) if "name" in t)


def last_tool_results(body: Mapping[str, Any]) -> tuple[ToolResult, ...]:
    """The tool outputs after the last assistant turn (the results of that turn)."""
    trailing: list[Mapping[str, Any]] = []
    for item in reversed(_items(body)):
        if item.get("type") not in _OUTPUT_ITEMS:
            break
        trailing.insert(0, item)
    results = []
    for item in trailing:
        output = item.get("output")
        failed = isinstance(output, dict) and output.get("success") is False
        if isinstance(output, dict):
            output = output.get("content", "")
        text = output if isinstance(output, str) else "\n".join(_texts(output))
        # Code mode's exec reports a script that threw as "Script failed\n…" (codex 0.169.0).
        failed = failed or text.startswith(_SCRIPT_FAILED)
        results.append(ToolResult(str(item.get("call_id", "")), failed, text))
    return tuple(results)


def stream_events(
    items: Sequence[Mapping[str, Any]],
    *,
    model: str,
    input_tokens: int,
    done: bool,
    output: int | None = None,
) -> list[Event]:
    """The SSE events of one response; with ``done=False`` it is left open (no completion).
    ``output``: the output tokens reported (None: estimated from ``items``)."""
    sequence = itertools.count()
    response_id = wire.new_id("resp")

    def event(name: str, **fields: Any) -> Event:
        return name, {"type": name, "sequence_number": next(sequence), **fields}

    opened = _response(response_id, model, "in_progress", [], None)
    events = [event("response.created", response=opened)]
    events.append(event("response.in_progress", response=opened))
    for index, item in enumerate(items):
        at = {"output_index": index}
        events.append(event("response.output_item.added", **at, item=_opening(item)))
        events.extend(event(name, **at, **fields) for name, fields in _deltas(item))
        events.append(event("response.output_item.done", **at, item=dict(item)))
    if done:
        usage = usage_json(input_tokens, wire.output_tokens(items) if output is None else output)
        closed = _response(response_id, model, "completed", list(items), usage)
        events.append(event("response.completed", response=closed))
    return events


def response_json(
    items: Sequence[Mapping[str, Any]],
    *,
    model: str,
    input_tokens: int,
    output: int | None = None,
) -> dict[str, Any]:
    """A non-streaming ``/v1/responses`` reply (``output`` as for ``stream_events``)."""
    usage = usage_json(input_tokens, wire.output_tokens(items) if output is None else output)
    return _response(wire.new_id("resp"), model, "completed", list(items), usage)


def usage_json(input_tokens: int, output_tokens: int) -> dict[str, Any]:
    # The API's fields, plus the two extra counters codex reports (observed on codex 0.169.0).
    return {
        "input_tokens": input_tokens,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": output_tokens,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": input_tokens + output_tokens,
        "cache_write_input_tokens": 0,
        "reasoning_output_tokens": 0,
    }


def error_json(
    kind: str, message: str, *, code: str | None = None, **fields: Any
) -> dict[str, Any]:
    """The OpenAI error body (``kind``: ``invalid_request_error`` …); ``fields`` are more
    members of its error object (``usage_limit_reached`` has ``resets_at`` …)."""
    error = {"message": message, "type": kind, "param": None, "code": code, **fields}
    return {"error": error}


def codex_overrides(base_url: str, provider: str = "scripted") -> list[str]:
    """The ``codex exec -c`` values that send its model traffic to ``base_url`` (this server)."""
    entry = f'{{ name = "{provider}", base_url = "{base_url}/v1", wire_api = "responses" }}'
    return [f'model_provider="{provider}"', f"model_providers.{provider}={entry}"]


# -- stream


def _opening(item: Mapping[str, Any]) -> dict[str, Any]:
    """The item as ``output_item.added`` announces it: in progress, its payload still empty."""
    opening = {**item, "status": "in_progress"}
    if item["type"] == "message":
        opening["content"] = []
    elif item["type"] == "function_call":
        opening["arguments"] = ""
    elif item["type"] == "custom_tool_call":
        opening["input"] = ""
    return opening


def _deltas(item: Mapping[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    ids = {"item_id": item["id"]}
    if item["type"] == "message":
        part = item["content"][0]
        text = part["text"]
        at = {**ids, "content_index": 0}
        yield "response.content_part.added", {**at, "part": {**part, "text": ""}}
        for chunk in _chunks(text):
            yield "response.output_text.delta", {**at, "delta": chunk}
        yield "response.output_text.done", {**at, "text": text}
        yield "response.content_part.done", {**at, "part": dict(part)}
    elif item["type"] == "function_call":
        for chunk in _chunks(item["arguments"]):
            yield "response.function_call_arguments.delta", {**ids, "delta": chunk}
        yield "response.function_call_arguments.done", {**ids, "arguments": item["arguments"]}
    elif item["type"] == "custom_tool_call":
        for chunk in _chunks(item["input"]):
            yield "response.custom_tool_call_input.delta", {**ids, "delta": chunk}
        yield "response.custom_tool_call_input.done", {**ids, "input": item["input"]}


def _response(
    response_id: str,
    model: str,
    status: str,
    output: list[Any],
    usage: Mapping[str, Any] | None,
) -> dict[str, Any]:
    return {
        "id": response_id,
        "object": "response",
        "created_at": int(time.time()),
        "status": status,
        "model": model,
        "output": output,
        "usage": usage,
    }


def _describe(item: Mapping[str, Any]) -> str:
    return "text" if item["type"] == "message" else f"{item['type']}:{item['name']}"


# -- reading


def _items(body: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    items = body.get("input")
    return [i for i in items if isinstance(i, dict)] if isinstance(items, list) else []


def _flatten(tools: object) -> Iterator[Mapping[str, Any]]:
    for tool in tools if isinstance(tools, list) else ():
        if not isinstance(tool, dict):
            continue
        if tool.get("type") == "namespace":
            yield from _flatten(tool.get("tools"))
        else:
            yield tool


def _is_message(item: Mapping[str, Any], role: str) -> bool:
    return item.get("type", "message") == "message" and item.get("role") == role


def _assistant_turns(items: Sequence[Mapping[str, Any]]) -> int:
    """Runs of consecutive model-made items (a turn's message and calls come out together)."""
    turns, inside = 0, False
    for item in items:
        made = item.get("type") in _CALL_ITEMS or _is_message(item, "assistant")
        turns += made and not inside
        inside = made
    return turns


def _texts(content: object) -> list[str]:
    if isinstance(content, str):
        return [content]
    if not isinstance(content, list):
        return []
    return [
        part["text"]
        for part in content
        if isinstance(part, dict)
        and part.get("type") in ("input_text", "output_text", "text")
        and isinstance(part.get("text"), str)
    ]


def _pinned_role(body: Mapping[str, Any]) -> str | None:
    """The role the ``--output-schema`` (``text.format.schema``) pins, as for StructuredOutput."""
    text = body.get("text")
    schema = text.get("format", {}).get("schema") if isinstance(text, dict) else None
    role = schema.get("properties", {}).get("role") if isinstance(schema, dict) else None
    if not isinstance(role, dict):
        return None
    value = role.get("const", role.get("default"))
    if value is None and isinstance(role.get("enum"), list) and len(role["enum"]) == 1:
        value = role["enum"][0]
    return value if isinstance(value, str) else None


def _chunks(text: str) -> list[str]:
    return [text[i : i + _CHUNK] for i in range(0, len(text), _CHUNK)] or [""]

"""The scripted model's HTTP side: each request routed to its wire, recorded, and answered.

``RequestHandler`` reads a request, asks the book (``scenario``) or the fault the server holds,
and writes the answer in the wire's shape (``wire`` for the Anthropic Messages API,
``responses_wire`` for the OpenAI Responses API); every request becomes a ``RecordedRequest``.
``ModelHTTPServer`` is the threading HTTP server it runs under, owned by a
``ScriptedModelServer`` (``server``), which starts, stops and refuses.
"""

from __future__ import annotations

import json
import logging
import socket
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal, Protocol
from urllib.parse import urlsplit

from adapters.scripted_model import responses_wire, wire
from adapters.scripted_model.faults import Fault
from adapters.scripted_model.quota import Wire
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
from adapters.scripted_model.wire import ToolResult

# stdlib logging: silent unless the application routes it (structlog's ProcessorFormatter).
log = logging.getLogger(__name__)

RequestKind = Literal["turn", "side", "count_tokens", "probe", "unknown"]
SIDE_REPLY = "OK."
_MESSAGES = "/v1/messages"
_COUNT_TOKENS = "/v1/messages/count_tokens"
_MODEL_ROUTES = (_MESSAGES, _COUNT_TOKENS, responses_wire.PATH)


@dataclass(frozen=True)
class RecordedRequest:
    """One request as the server saw and answered it.

    ``kind``: ``turn`` (a conversation request played from a scenario, or refused with
    ``error``), ``side`` (a Messages request without tools, answered ``SIDE_REPLY``),
    ``count_tokens``, ``probe`` (GET/HEAD) or ``unknown`` (404). ``reply`` names what was sent:
    ``"text"``, ``"tool_use:<name>"``, ``"hang"``. A request answered by a ``Fault`` has its
    kind as usual, the fault's ``status``, its message as ``error`` and the fault as ``fault``.
    """

    method: str
    path: str
    kind: RequestKind
    status: int
    body: Mapping[str, Any] | None = None
    stream: bool = False
    model: str | None = None
    max_tokens: int | None = None
    tools: tuple[str, ...] = ()
    conversation: Conversation | None = None
    tool_results: tuple[ToolResult, ...] = ()
    scenario: str | None = None
    turn: int | None = None
    reply: tuple[str, ...] = ()
    error: str | None = None
    fault: Fault | None = None


class Owner(Protocol):
    """What the handler asks of the server that owns it (``ScriptedModelServer``): the book and
    usage setting, and the shared state it records into and reads under the server's lock."""

    book: tuple[Scenario, ...]
    report_usage: bool

    def _record(self, record: RecordedRequest) -> None: ...

    def _track(self, connection: socket.socket, opened: bool) -> None: ...

    def _take_fault(self) -> Fault | None: ...

    def _headroom(self, wire_name: Wire) -> dict[str, str]: ...

    def _hold(self, connection: socket.socket) -> None: ...


class ModelHTTPServer(ThreadingHTTPServer):
    # Non-daemon handler threads are joined by server_close(): close() leaves nothing running.
    daemon_threads = False
    block_on_close = True
    # The port is held while refusing by a second socket bound to it (``server._hold_port``).
    allow_reuse_port = True

    def __init__(
        self,
        address: tuple[str, int],
        handler: type[BaseHTTPRequestHandler],
        *,
        owner: Owner,
    ) -> None:
        self.owner = owner
        super().__init__(address, handler)

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client killed mid-response (the hang and cancel tests do it) is expected here.
        log.debug("scripted model: connection to %s failed", client_address, exc_info=True)


class RequestHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: ModelHTTPServer
    # The quota headers a good answer to the current request carries (model routes only).
    headroom: Mapping[str, str]

    def setup(self) -> None:
        super().setup()
        self.headroom = {}
        self.server.owner._track(self.connection, opened=True)

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            self.server.owner._track(self.connection, opened=False)

    def log_message(self, format: str, *args: Any) -> None:
        # Every request is recorded (``requests``); stderr lines would only add noise.
        log.debug("scripted model: " + format, *args)

    def do_HEAD(self) -> None:
        self._probe()

    def do_GET(self) -> None:
        self._probe()

    def do_POST(self) -> None:
        path = urlsplit(self.path).path.rstrip("/")
        raw = self._read_body()
        try:
            body = json.loads(raw)
        except (UnicodeDecodeError, json.JSONDecodeError):
            body = None
        self.headroom = {}
        if path in _MODEL_ROUTES:
            wire_name: Wire = "openai" if path == responses_wire.PATH else "anthropic"
            fault = self.server.owner._take_fault()
            if fault is not None:
                self._fail(fault, wire_name, path, body)
                return
            self.headroom = self.server.owner._headroom(wire_name)
        if path not in _MODEL_ROUTES:
            message = f"scripted model: no route {path}"
            self._refuse("unknown", 404, "not_found_error", message, body)
        elif not isinstance(body, dict):
            message = "scripted model: the request body is not a JSON object"
            self._refuse("turn", 400, "invalid_request_error", message, None)
        elif path == responses_wire.PATH:
            self._responses(body, raw)
        elif path.endswith("/count_tokens"):
            self._record("count_tokens", 200, body)
            self._send_json(200, {"input_tokens": wire.estimate_tokens(raw)})
        else:
            self._messages(body, raw)

    def _messages(self, body: dict[str, Any], raw: bytes) -> None:
        conversation = wire.read_conversation(body)
        scenario: str | None = None
        if not wire.tool_names(body):
            # Not an agent loop (those always offer tools): a side request such as a title.
            kind: RequestKind = "side"
            blocks: tuple[Block, ...] = (TextBlock(text=SIDE_REPLY),)
        else:
            kind = "turn"
            try:
                chosen, variables = select_scenario(self.server.owner.book, conversation)
                blocks = next_turn(chosen, conversation, variables)
            except ScriptError as exc:
                self._refuse(
                    kind, 400, "invalid_request_error", str(exc), body, conversation=conversation
                )
                return
            scenario = chosen.name
        hang = isinstance(blocks[-1], HangBlock)
        content = wire.content_blocks(blocks)
        reply = tuple(
            "text" if block["type"] == "text" else f"tool_use:{block['name']}" for block in content
        ) + (("hang",) if hang else ())
        # Recorded before replying, so a test waiting for this request never races the reply.
        self._record(kind, 200, body, conversation=conversation, scenario=scenario, reply=reply)
        model = str(body.get("model") or "scripted-model")
        usage = self.server.owner.report_usage
        tokens, output = (wire.estimate_tokens(raw), None) if usage else (0, 0)
        stop = None if hang else wire.stop_reason(blocks)
        if body.get("stream") is True and (content or stop):
            events = wire.stream_events(
                content, model=model, input_tokens=tokens, stop=stop, output=output
            )
            self._send_stream(wire.encode_sse(events))
        elif stop:
            message = wire.message_json(
                content, model=model, input_tokens=tokens, stop=stop, output=output
            )
            self._send_json(200, message)
        if hang:
            self.close_connection = True
            self.server.owner._hold(self.connection)

    def _responses(self, body: dict[str, Any], raw: bytes) -> None:
        # The OpenAI Responses API (codex): same book, wire in responses_wire.
        owner = self.server.owner
        got = responses_wire.answer(
            owner.book, body, raw, side_reply=SIDE_REPLY, report_usage=owner.report_usage
        )
        self._record(got.kind, got.status, body, **got.record_fields())
        if got.stream is not None:
            self._send_stream(got.stream)
        elif got.payload is not None:
            self._send_json(got.status, got.payload)
        if got.hang:
            self.close_connection = True
            self.server.owner._hold(self.connection)

    def _fail(self, fault: Fault, wire_name: Wire, path: str, body: Any) -> None:
        """Answer with ``fault`` in the wire's shape; recorded with the kind it would have."""
        request_id = wire.new_id("req")
        reply = fault.reply(wire_name, now=datetime.now(UTC), request_id=request_id)
        kind: RequestKind = "turn"
        conversation: Conversation | None = None
        if path == _COUNT_TOKENS:
            kind = "count_tokens"
        elif isinstance(body, dict) and wire_name == "openai":
            conversation = responses_wire.read_conversation(body)
            kind = "turn" if responses_wire.offered_tool_names(body) else "side"
        elif isinstance(body, dict):
            conversation = wire.read_conversation(body)
            kind = "turn" if wire.tool_names(body) else "side"
        tool_results = None  # _record reads a Messages body's itself
        if wire_name == "openai" and isinstance(body, dict):
            tool_results = responses_wire.last_tool_results(body)
        self._record(
            kind,
            reply.status,
            body,
            conversation=conversation,
            error=reply.message,
            fault=fault,
            tool_results=tool_results,
        )
        self._send_json(reply.status, reply.body, headers=reply.headers, request_id=request_id)

    def _probe(self) -> None:
        # The CLI probes reachability (observed: HEAD /api/hello); any 200 satisfies it.
        self._record("probe", 200, None)
        self._send_json(200, {})

    def _refuse(
        self,
        kind: RequestKind,
        status: int,
        error_type: str,
        message: str,
        body: Any,
        *,
        conversation: Conversation | None = None,
    ) -> None:
        self._record(kind, status, body, conversation=conversation, error=message)
        self._send_json(status, wire.error_json(error_type, message))

    def _record(
        self,
        kind: RequestKind,
        status: int,
        body: Any,
        *,
        conversation: Conversation | None = None,
        scenario: str | None = None,
        reply: tuple[str, ...] = (),
        error: str | None = None,
        tool_results: tuple[ToolResult, ...] | None = None,
        fault: Fault | None = None,
    ) -> None:
        if not isinstance(body, dict):
            body = None
        max_tokens = body.get("max_tokens") if body else None
        if tool_results is None:
            tool_results = wire.last_tool_results(body) if body else ()
        path = urlsplit(self.path).path
        tool_names = (
            responses_wire.offered_tool_names if path == responses_wire.PATH else wire.tool_names
        )
        self.server.owner._record(
            RecordedRequest(
                method=self.command,
                path=path,
                kind=kind,
                status=status,
                body=body,
                stream=bool(body and body.get("stream") is True),
                model=str(body["model"]) if body and "model" in body else None,
                max_tokens=max_tokens if isinstance(max_tokens, int) else None,
                tools=tool_names(body) if body else (),
                conversation=conversation,
                tool_results=tool_results,
                scenario=scenario,
                turn=conversation.assistant_turns if conversation else None,
                reply=reply,
                error=error,
                fault=fault,
            )
        )

    def _read_body(self) -> bytes:
        # The CLI always sends Content-Length (observed); chunked bodies are not supported.
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def _send_json(
        self,
        status: int,
        payload: Mapping[str, Any],
        *,
        headers: Mapping[str, str] | None = None,
        request_id: str | None = None,
    ) -> None:
        """Send ``payload`` with ``headers``; a 200 also carries the quota headers."""
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("request-id", request_id or wire.new_id("req"))
        for name, value in {**(self.headroom if status == 200 else {}), **(headers or {})}.items():
            self.send_header(name, value)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def _send_stream(self, data: bytes) -> None:
        # Closing the connection ends the stream, so no chunked encoding is needed.
        self.close_connection = True
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.send_header("request-id", wire.new_id("req"))
        for name, value in self.headroom.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()

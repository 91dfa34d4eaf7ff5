"""The loopback HTTP server: answers the ``claude`` CLI from a book of scenarios, records all.

It also plays the API's bad days on demand: a ``Fault`` answering every model request
(``fail``/``heal``), a dead address (``refuse_connections``/``accept_connections``) and a
subscription's headroom on good answers (``set_quota``).
"""

from __future__ import annotations

import contextlib
import json
import logging
import select
import socket
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, Literal, Self
from urllib.parse import urlsplit

from adapters.scripted_model import responses_wire, wire
from adapters.scripted_model.faults import Fault, Quota, Wire
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


class ScriptedModelServer:
    """A Messages API on ``127.0.0.1`` that plays ``book``; a context manager that starts it.

    The port is bound on construction (``port=0``: any free port), so ``base_url`` is known
    before ``start()``. ``close()`` stops serving, ends held (``hang``) responses and open
    connections, and joins every handler thread; it is idempotent, in every state (refusing
    connections too).

    ``report_usage=False``: every answer reports 0 tokens, so the claude CLI (and cpe's pricing
    of codex runs, where the model has a price) counts a cost of $0: what ``cpe scripted-model
    serve`` and ``cpe run --scripted`` use, so that a scripted run never looks like money spent.
    By default answers report a rough estimate (four bytes a token), which keeps the CLIs'
    bookkeeping plausible.
    """

    def __init__(
        self,
        book: Scenario | Sequence[Scenario],
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        report_usage: bool = True,
    ) -> None:
        self.book: tuple[Scenario, ...] = (book,) if isinstance(book, Scenario) else tuple(book)
        self.report_usage = report_usage
        self._changed = threading.Condition()  # guards everything below; notified on change
        self._records: list[RecordedRequest] = []
        self._hanging = 0
        self._connections: set[socket.socket] = set()
        self._closed = False
        self._started = False
        self._listening = True
        self._fault: Fault | None = None
        self._fault_left: int | None = None  # answers left before the fault heals itself
        self._quota: Quota | None = None
        self._thread: threading.Thread | None = None
        self._holder: socket.socket | None = None  # the port, held while refusing
        # Serialises start, close, refuse_connections and accept_connections (which block on
        # the serving thread, so they cannot hold ``_changed``, which the handlers need).
        self._control = threading.Lock()
        # Held responses wait on this socket pair as well as their connection: ``close()``
        # writes one byte and never drains it, so every hang, now or later, sees it readable.
        self._wake_reader, self._wake_writer = socket.socketpair()
        self._httpd = _HTTPServer((host, port), _Handler, owner=self)

    @property
    def base_url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}"

    def client_env(self) -> dict[str, str]:
        """The environment the ``claude`` CLI needs to talk to this server (no vendor traffic)."""
        return {
            "ANTHROPIC_BASE_URL": self.base_url,
            "ANTHROPIC_API_KEY": "scripted-model",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        }

    def start(self) -> Self:
        with self._control:
            with self._changed:
                if self._closed:
                    raise RuntimeError("the scripted model server is closed")
                self._started = True
                serve = self._thread is None and self._listening
            if serve:
                self._serve()
        return self

    def close(self) -> None:
        with self._control:
            with self._changed:
                if self._closed:
                    return
                self._closed = True
                connections = list(self._connections)
                thread, self._thread = self._thread, None
            if thread is not None:
                self._httpd.shutdown()
            self._wake_writer.send(b"x")
            for connection in connections:
                _hang_up(connection)
            # Closes the listening socket (again, when refusing: harmless) and joins the
            # handler threads (block_on_close).
            self._httpd.server_close()
            holder, self._holder = self._holder, None
            if holder is not None:
                holder.close()
            if thread is not None:
                thread.join()
            self._wake_reader.close()
            self._wake_writer.close()
            with self._changed:
                self._changed.notify_all()

    # -- bad days

    def fail(self, fault: Fault) -> None:
        """Answer every model request with ``fault`` from now on: ``fault.times`` of them, or
        all until ``heal()``. Replaces the fault in place, if any."""
        with self._changed:
            self._fault, self._fault_left = fault, fault.times
            self._changed.notify_all()

    def heal(self) -> None:
        """Answer model requests from the book again."""
        with self._changed:
            self._fault = self._fault_left = None
            self._changed.notify_all()

    @property
    def fault(self) -> Fault | None:
        """The fault answering model requests now (None once healed, by itself too)."""
        with self._changed:
            return self._fault

    def set_quota(self, quota: Quota | None) -> None:
        """Report ``quota``'s headroom in the headers of every good model answer (the
        Anthropic unified rate-limit headers, codex's ``x-codex-*``); None: report none."""
        with self._changed:
            self._quota = quota

    @property
    def quota(self) -> Quota | None:
        with self._changed:
            return self._quota

    def refuse_connections(self) -> None:
        """Stop listening, as a dead model address: connecting to the port is refused
        (ECONNREFUSED) until ``accept_connections()``. Open connections are hung up (idle
        keep-alive ones and held responses too), so no client is answered meanwhile."""
        with self._control:
            with self._changed:
                if self._closed:
                    raise RuntimeError("the scripted model server is closed")
                if not self._listening:
                    return
                self._listening = False
                connections = list(self._connections)
                thread, self._thread = self._thread, None
            if thread is not None:
                self._httpd.shutdown()  # serve_forever returns; it can run again later
                thread.join()
            # The port stays this server's: a socket bound to it but not listening (connects
            # are refused all the same), taken before the listener goes, so that no other
            # process (another test binding port 0) gets it meanwhile.
            self._holder = _hold_port(self._httpd)
            self._httpd.socket.close()
            for connection in connections:
                _hang_up(connection)

    def accept_connections(self) -> None:
        """Listen again on the same address (``base_url`` is unchanged), and serve if started.

        Raises ``OSError`` if the port was taken meanwhile (the server then stays refusing)."""
        with self._control:
            with self._changed:
                if self._closed:
                    raise RuntimeError("the scripted model server is closed")
                if self._listening:
                    return
            httpd = self._httpd
            httpd.socket = socket.socket(httpd.address_family, httpd.socket_type)
            try:
                # SO_REUSEADDR: the hung-up connections' TIME_WAIT is fine; SO_REUSEPORT: the
                # port's holder is still bound, and goes once this one listens.
                httpd.server_bind()
                httpd.server_activate()
            except OSError:
                httpd.socket.close()
                raise
            holder, self._holder = self._holder, None
            if holder is not None:
                holder.close()
            with self._changed:
                self._listening = True
                serve = self._started
            if serve:
                self._serve()

    @property
    def listening(self) -> bool:
        """False while refusing connections, or once closed."""
        with self._changed:
            return self._listening and not self._closed

    def _serve(self) -> None:
        # Called with ``_control`` held.
        thread = threading.Thread(
            target=self._httpd.serve_forever,
            kwargs={"poll_interval": 0.05},
            name=f"scripted-model:{self._httpd.server_address[1]}",
            daemon=True,
        )
        with self._changed:
            self._thread = thread
        thread.start()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    @property
    def requests(self) -> tuple[RecordedRequest, ...]:
        with self._changed:
            return tuple(self._records)

    @property
    def hanging(self) -> int:
        """How many responses are being held open right now."""
        with self._changed:
            return self._hanging

    def wait_until(self, condition: Callable[[ScriptedModelServer], bool], timeout: float) -> bool:
        """Block until ``condition(self)`` holds (re-checked on every request and hang end)."""
        with self._changed:
            return self._changed.wait_for(lambda: condition(self), timeout)

    # -- called by the handler threads

    def _record(self, record: RecordedRequest) -> None:
        with self._changed:
            self._records.append(record)
            self._changed.notify_all()

    def _track(self, connection: socket.socket, opened: bool) -> None:
        with self._changed:
            if not opened:
                self._connections.discard(connection)
                return
            self._connections.add(connection)
            gone = self._closed or not self._listening
        if gone:  # accepted while closing or refusing, after the snapshot of connections
            _hang_up(connection)

    def _take_fault(self) -> Fault | None:
        """The fault answering this request, counting it against ``times``."""
        with self._changed:
            fault = self._fault
            if fault is not None and self._fault_left is not None:
                self._fault_left -= 1
                if self._fault_left <= 0:
                    self._fault = self._fault_left = None
            return fault

    def _headroom(self, wire_name: Wire) -> dict[str, str]:
        with self._changed:
            quota = self._quota
        return {} if quota is None else quota.headers(wire_name, datetime.now(UTC))

    def _hold(self, connection: socket.socket) -> None:
        """Send nothing until the client disconnects or the server closes."""
        with self._changed:
            self._hanging += 1
            self._changed.notify_all()
        try:
            while True:
                readable, _, _ = select.select([connection, self._wake_reader], [], [])
                if self._wake_reader in readable:
                    return
                try:
                    if not connection.recv(65536):
                        return  # the client hung up
                except OSError:
                    return
        finally:
            with self._changed:
                self._hanging -= 1
                self._changed.notify_all()


class _HTTPServer(ThreadingHTTPServer):
    # Non-daemon handler threads are joined by server_close(): close() leaves nothing running.
    daemon_threads = False
    block_on_close = True
    # The port is held while refusing by a second socket bound to it (``_hold_port``).
    allow_reuse_port = True

    def __init__(
        self,
        address: tuple[str, int],
        handler: type[BaseHTTPRequestHandler],
        *,
        owner: ScriptedModelServer,
    ) -> None:
        self.owner = owner
        super().__init__(address, handler)

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client killed mid-response (the hang and cancel tests do it) is expected here.
        log.debug("scripted model: connection to %s failed", client_address, exc_info=True)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _HTTPServer
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


def _hold_port(httpd: _HTTPServer) -> socket.socket:
    """A socket bound to ``httpd``'s address and not listening: the port cannot be taken by
    anyone else, and a connect to it is refused (no listener), as at a dead address."""
    holder = socket.socket(httpd.address_family, httpd.socket_type)
    holder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    holder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    holder.bind(httpd.server_address[:2])
    return holder


def _hang_up(connection: socket.socket) -> None:
    # shutdown() wakes a handler blocked reading the next request on a keep-alive connection;
    # close() alone would not.
    with contextlib.suppress(OSError):
        connection.shutdown(socket.SHUT_RDWR)

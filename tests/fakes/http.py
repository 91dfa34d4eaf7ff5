"""Loopback HTTP for the vendor fakes (``tests/fakes/github``, ``tests/fakes/gitlab``): routes,
replies and errors, injected faults and stalls, conditional GETs, the request log and a threaded
server on 127.0.0.1 port 0.

``HttpCore`` runs a request through the same steps whatever the vendor: admit it (who is calling,
is there budget left), find its route, build the call a handler takes, apply a fault if one
matches, run the handler, page a list, then tag the answer with an ETag (a matching
``If-None-Match`` gets ``304 Not Modified``) and the rate-limit headers, and record it. What is
the vendor's own is a hook a vendor's core overrides: how a caller is identified, how an error
or a page looks, how an ETag is made, what costs rate limit and what is recorded.
"""

from __future__ import annotations

import json
import re
import socket
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, Self
from urllib.parse import parse_qsl, unquote, urlsplit

DROP = 0  # the status ``HttpCore.handle`` answers for a dropped connection: nothing is sent


class HttpError(Exception):
    """An error answer. ``message`` and ``errors`` are laid out by the vendor's core
    (``HttpCore.error_reply``); ``body``, when given, is sent as it is instead."""

    def __init__(
        self,
        status: int,
        message: str,
        errors: list[Any] | None = None,
        *,
        body: Any = None,
        headers: Mapping[str, str] | None = None,
    ):
        super().__init__(message)
        self.status = status
        self.message = message
        self.errors = errors
        self.body = body
        self.headers = dict(headers or {})


class NoRoute(Exception):
    """No route has this path (``allowed`` False), or none for this method (``allowed`` True)."""

    def __init__(self, allowed: bool):
        super().__init__("no route")
        self.allowed = allowed


@dataclass
class Reply:
    status: int = 200
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    paginate: str | None = None  # "" paginates a list body; a key paginates body[key]


Handler = Callable[[Any], Reply]


class Router:
    def __init__(self) -> None:
        self.routes: list[tuple[str, re.Pattern[str], Handler, str | None]] = []

    def add(self, method: str, pattern: str, handler: Handler, op: str | None = None) -> None:
        """``op`` names the vendor's operation (``pulls/get``): recorded with each request."""
        self.routes.append((method, re.compile(pattern), handler, op))

    def find(self, method: str, path: str) -> tuple[Handler, dict[str, str], str | None]:
        """The handler for a raw (still percent-encoded) path, and its parameters decoded."""
        allowed = False
        for route_method, pattern, handler, op in self.routes:
            found = pattern.fullmatch(path)
            if found:
                if route_method == method:
                    return handler, {k: unquote(v) for k, v in found.groupdict().items()}, op
                allowed = True
        raise NoRoute(allowed)


@dataclass
class Fault:
    """An injected failure for requests matching ``method`` and the ``path`` regex (searched).

    ``apply_first`` runs the real handler before failing, as a vendor that did the write but
    lost the response would ("apply then fail with 502"). ``drop`` closes the connection without
    an answer instead of sending ``status``. ``times`` requests fail, then it is spent.
    ``retry_after`` adds a ``Retry-After`` header (secondary rate limits, 429).
    """

    method: str
    path: str
    status: int
    times: int = 1
    apply_first: bool = False
    retry_after: int | None = None
    message: str = "Server Error"
    hits: int = 0
    drop: bool = False


@dataclass
class Stall:
    """A slow vendor for requests matching ``method`` and the ``path`` regex (searched): the
    response is held for ``seconds`` (or until the fake closes), then served as usual. ``times``
    requests are held, then it is spent; ``holding`` is set once one is held."""

    method: str
    path: str
    seconds: float = 60.0
    times: int = 1
    hits: int = 0
    holding: threading.Event = field(default_factory=threading.Event, repr=False)


@dataclass(frozen=True)
class RecordedRequest:
    """One request as a fake saw it. ``counted``: it cost rate limit. ``connection``: the
    client's address and port (one per kept-alive connection). ``route``: the vendor operation
    that answered it (``pulls/get``), None when no route matched. ``response``: the body served,
    kept only while the core's ``keep_responses`` is set. Each fake's record adds what is its
    own (the token, the API version)."""

    method: str
    path: str
    query: str
    status: int
    counted: bool
    connection: tuple[str, int]
    if_none_match: bool
    route: str | None = None
    response: bytes | None = None


@dataclass(frozen=True)
class Incoming:
    """A request as ``HttpCore.make_call`` is given it: its route's ``params`` (decoded), its
    raw ``query`` string, its headers (lower-cased names), its parsed body, and ``who`` is
    calling (what ``HttpCore.admit`` said)."""

    method: str
    path: str
    params: dict[str, str]
    query: str
    headers: Mapping[str, str]
    body: Any
    who: Any


@dataclass(frozen=True)
class Exchange:
    """What ``HttpCore.record`` is given of one request and its answer."""

    method: str
    path: str
    query: str
    headers: Mapping[str, str]
    status: int
    counted: bool
    peer: tuple[str, int]
    route: str | None
    body: bytes


class HttpCore:
    """Faults, stalls, conditional GETs, pagination and the request log around a ``Router``.
    A vendor's core subclasses it and overrides the hooks below."""

    thread_name = "fake-http"

    def __init__(
        self, router: Router, lock: threading.RLock, now: Callable[[], float] = time.time
    ) -> None:
        self.router = router
        self.lock = lock
        self.now = now  # the clock rate limits are judged by
        self.keep_responses = False
        self.faults: list[Fault] = []
        self.stalls: list[Stall] = []
        self.released = threading.Event()  # set at close: stalled requests are answered
        self.requests: list[Any] = []
        self.base_url = ""

    # ------------------------------------------------------------------ hooks

    def admit(self, method: str, path: str, headers: Mapping[str, str]) -> Any:
        """Who is calling (raise ``HttpError`` for bad credentials or an exhausted budget)."""
        return None

    def make_call(self, incoming: Incoming) -> Any:
        """What a handler is given."""
        raise NotImplementedError

    def no_route(self, allowed: bool) -> HttpError:
        return HttpError(405 if allowed else 404, "Not Found")

    def error_reply(self, error: HttpError) -> tuple[int, dict[str, str], bytes]:
        body = error.body if error.body is not None else {"message": error.message}
        return error.status, {"Content-Type": "application/json", **error.headers}, _json(body)

    def fault_reply(self, fault: Fault) -> tuple[int, dict[str, str], bytes]:
        headers = {"Retry-After": str(fault.retry_after)} if fault.retry_after is not None else {}
        return self.error_reply(HttpError(fault.status, fault.message, headers=headers))

    def page(self, path: str, query: str, items: list[Any]) -> tuple[list[Any], dict[str, str]]:
        """One page of a list answer and the headers that link the others."""
        return items, {}

    def etag(self, body: bytes) -> str | None:
        """The ETag of a 200 answer to a GET (None: the vendor sends none)."""
        return None

    def counts(self, status: int) -> bool:
        """Whether this answer costs rate limit."""
        return True

    def rate_headers(self) -> dict[str, str]:
        return {}

    def record(self, exchange: Exchange) -> Any:
        return RecordedRequest(**self.recorded(exchange))

    def recorded(self, exchange: Exchange) -> dict[str, Any]:
        """The fields of ``RecordedRequest`` for an exchange (a vendor's record adds its own)."""
        return {
            "method": exchange.method,
            "path": exchange.path,
            "query": exchange.query,
            "status": exchange.status,
            "counted": exchange.counted,
            "connection": exchange.peer,
            "if_none_match": exchange.headers.get("if-none-match") is not None,
            "route": exchange.route,
            "response": exchange.body if self.keep_responses else None,
        }

    # ------------------------------------------------------------------ the request

    def handle(
        self, method: str, target: str, headers: dict[str, str], raw: bytes, peer: tuple[str, int]
    ) -> tuple[int, dict[str, str], bytes]:
        split = urlsplit(target)
        path = split.path
        stall = self._stall(method, path)
        if stall is not None:
            self.released.wait(stall.seconds)  # outside the lock: other requests go on
        with self.lock:
            status, out_headers, body, route = self._dispatch(
                method, path, split.query, headers, raw
            )
            counted = False
            if status != DROP:
                tag = self.etag(body) if status == 200 and method == "GET" else None
                if tag is not None:
                    out_headers["ETag"] = tag
                    if headers.get("if-none-match") == tag:
                        status, body = 304, b""
                counted = self.counts(status)
                out_headers.update(self.rate_headers())
            kept = body if self.keep_responses else b""
            exchange = Exchange(
                method, path, split.query, headers, status, counted, peer, route, kept
            )
            self.requests.append(self.record(exchange))
        return status, out_headers, body

    def _dispatch(
        self, method: str, path: str, query: str, headers: Mapping[str, str], raw: bytes
    ) -> tuple[int, dict[str, str], bytes, str | None]:
        op: str | None = None
        try:
            who = self.admit(method, path, headers)
            try:
                handler, params, op = self.router.find(method, path)
            except NoRoute as missing:
                raise self.no_route(missing.allowed) from None
            body = parse_body(raw, headers.get("content-type", ""))
            call = self.make_call(Incoming(method, path, params, query, headers, body, who))
            fault = self._fault(method, path)
            if fault is not None:
                if fault.apply_first:
                    handler(call)
                if fault.drop:
                    return DROP, {}, b"", op
                return (*self.fault_reply(fault), op)
            reply = handler(call)
        except Exception as exc:  # a bug in the fake: answer 500 with it, keep serving
            if not isinstance(exc, HttpError):
                exc = HttpError(500, f"{type(self).__name__} failed: {exc!r}")
            return (*self.error_reply(exc), op)
        out = dict(reply.headers)
        data = reply.body
        if reply.paginate is not None:
            key = reply.paginate
            items, links = self.page(path, query, data[key] if key else data)
            data = {**data, key: items} if key else items
            out.update(links)
        out["Content-Type"] = "application/json; charset=utf-8"
        if isinstance(data, bytes):  # raw content (a file as it is stored)
            out["Content-Type"] = "text/plain; charset=utf-8"
            return reply.status, out, data, op
        return reply.status, out, b"" if data is None else _json(data), op

    def _fault(self, method: str, path: str) -> Fault | None:
        for fault in self.faults:
            if fault.hits < fault.times and fault.method == method and re.search(fault.path, path):
                fault.hits += 1
                return fault
        return None

    def _stall(self, method: str, path: str) -> Stall | None:
        with self.lock:
            for stall in self.stalls:
                matches = stall.method == method and re.search(stall.path, path) is not None
                if matches and stall.hits < stall.times:
                    stall.hits += 1
                    stall.holding.set()
                    return stall
        return None


class ServedFake:
    """What every vendor fake does with its core: serves it on loopback (``start``), closes as
    a context manager, keeps the request log, and takes faults and stalls."""

    http: HttpCore
    lock: threading.RLock
    base_url: str

    def start(self, core: HttpCore) -> str:
        """Serves ``core`` on 127.0.0.1 (port 0); returns the base URL."""
        self.http = core
        self._server, self._thread = serve(core)
        core.base_url = f"http://127.0.0.1:{self._server.server_address[1]}"
        return core.base_url

    def close(self) -> None:
        self.http.released.set()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    @property
    def requests(self) -> list[Any]:
        """Every request so far (the fake's ``RecordedRequest``), oldest first."""
        return self.http.requests

    @property
    def keep_responses(self) -> bool:
        """Keep each response's body in ``requests`` (for checking payloads; off by default)."""
        return self.http.keep_responses

    @keep_responses.setter
    def keep_responses(self, keep: bool) -> None:
        self.http.keep_responses = keep

    def clear_requests(self) -> None:
        with self.lock:
            self.http.requests.clear()

    def fail(self, fault: Fault) -> Fault:
        """Matching requests fail (a status, or ``drop``: the connection closes unanswered)."""
        with self.lock:
            self.http.faults.append(fault)
        return fault

    def stall(self, stall: Stall) -> Stall:
        with self.lock:
            self.http.stalls.append(stall)
        return stall


def parse_body(raw: bytes, content_type: str) -> Any:
    """A request's body: JSON, or a form (``a=1&b[]=x``) as a dict (arrays as lists)."""
    if not raw:
        return None
    if content_type.startswith("application/x-www-form-urlencoded"):
        form: dict[str, Any] = {}
        for key, value in parse_qsl(raw.decode(), keep_blank_values=True):
            if key.endswith("[]"):
                form.setdefault(key[:-2], []).append(value)
            else:
                form[key] = value
        return form
    return json.loads(raw)


def _json(data: Any) -> bytes:
    return json.dumps(data).encode()


def serve(core: HttpCore) -> tuple[ThreadingHTTPServer, threading.Thread]:
    class RequestHandler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        timeout = 60

        def setup(self) -> None:
            super().setup()
            # Headers and body go out in two writes: without this, Nagle's algorithm and the
            # client's delayed ACK add ~40 ms to every response on a kept-alive connection.
            self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

        def _any(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            headers = {k.lower(): v for k, v in self.headers.items()}
            status, out, body = core.handle(
                self.command, self.path, headers, raw, self.client_address[:2]
            )
            if status == DROP:  # hang up without a word
                self.close_connection = True
                return
            self.send_response(status)
            for name, value in out.items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(body)))
            try:
                self.end_headers()
                if body:
                    self.wfile.write(body)
            except (BrokenPipeError, ConnectionResetError):
                # A stalled answer whose client gave up (timed out) and hung up.
                self.close_connection = True

        do_GET = do_POST = do_PATCH = do_PUT = do_DELETE = _any

        def log_message(self, format: str, *args: Any) -> None:
            pass  # the request log is core.requests

    server = ThreadingHTTPServer(("127.0.0.1", 0), RequestHandler)
    server.daemon_threads = True
    thread = threading.Thread(
        target=server.serve_forever,
        kwargs={"poll_interval": 0.05},
        name=core.thread_name,
        daemon=True,
    )
    thread.start()
    return server, thread

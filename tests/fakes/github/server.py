"""The fake GitHub's HTTP layer: a loopback ``ThreadingHTTPServer`` with GitHub's conventions.

What a client sees is what api.github.com does for the same calls: token auth (and, with a
``FakeApp``, GitHub App JWTs and installation tokens: ``app.py``), JSON errors with
``message``, weak ETags and ``304 Not Modified`` for a matching ``If-None-Match`` (a 304 does
not count against the rate limit), ``Link`` pagination (``per_page`` up to 100), and
``X-RateLimit-*`` headers on every response. Faults are injected per method and path
(``FakeGitHub.fail``), and so are slow answers (``FakeGitHub.stall``). Every request is
recorded (``RecordedRequest``) so tests and the benchmark can count calls, conditional hits and
connections.

Also as on GitHub: the ``X-GitHub-Api-Version`` a request names picks the shape of what it gets
(none means ``2022-11-28``; a version GitHub does not have is a 400); each token acts with its
``Access`` (a fine-grained token cannot read check runs, a triage user cannot create labels);
and content-creating requests (POST, PATCH, PUT, DELETE) past 80 a minute or 500 an hour per
token get GitHub's secondary rate limit, a 403 without ``Retry-After``, timed by ``now``.
"""

from __future__ import annotations

import hashlib
import json
import re
import socket
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, unquote, urlencode, urlsplit

from tests.fakes.github.payloads import error
from tests.fakes.github.records import Access, Fault, RecordedRequest, Stall

if TYPE_CHECKING:
    from tests.fakes.github.app import FakeApp

# The App's own endpoints: authenticated by the App's JWT (their handlers check it), not a token.
APP_PATHS = re.compile(r"/app(?:/.*)?")
API_VERSIONS = ("2022-11-28", "2026-03-10")
DEFAULT_API_VERSION = "2022-11-28"  # what GitHub answers a request that names none with
CONTENT_METHODS = frozenset({"POST", "PATCH", "PUT", "DELETE"})
CONTENT_LIMITS = ((60.0, 80), (3600.0, 500))  # (window in seconds, content-creating requests)
SECONDARY_LIMIT_MESSAGE = (
    "You have exceeded a secondary rate limit. Please wait a few minutes before you try again. "
    "If you reach out to GitHub Support for help, please include the request ID "
    "0000:FAKE:0000000:0000000:00000000."
)


class HttpError(Exception):
    """An error answer: ``message``, and ``errors`` as GitHub sends them (objects with
    ``resource``/``code``/``message`` for a ``Validation Failed``, or plain strings)."""

    def __init__(self, status: int, message: str, errors: list[Any] | None = None):
        super().__init__(message)
        self.status = status
        self.message = message
        self.errors = errors


@dataclass
class Call:
    method: str
    path: str
    params: dict[str, str]
    query: dict[str, str]
    body: Any
    login: str  # "" on the App's own endpoints, whose handlers check ``authorization``
    authorization: str = ""
    api_version: str = DEFAULT_API_VERSION
    access: Access | None = None  # None on the App's own endpoints

    @property
    def legacy(self) -> bool:
        """The request names an API version from before 2026-03-10, whose payloads still hold
        fields that version removed (``merge_commit_sha``, the singular ``assignee``)."""
        return self.api_version < "2026-03-10"


@dataclass
class Reply:
    status: int = 200
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    paginate: str | None = None  # "" paginates a list body; a key paginates body[key]


Handler = Callable[[Call], Reply]


class Router:
    def __init__(self) -> None:
        self.routes: list[tuple[str, re.Pattern[str], Handler, str | None]] = []

    def add(self, method: str, pattern: str, handler: Handler, op: str | None = None) -> None:
        """``op`` names GitHub's operation (``pulls/get``): recorded with each request."""
        self.routes.append((method, re.compile(pattern), handler, op))

    def find(self, method: str, path: str) -> tuple[Handler, dict[str, str], str | None]:
        allowed = False
        for route_method, pattern, handler, op in self.routes:
            found = pattern.fullmatch(path)
            if found:
                if route_method == method:
                    return handler, {k: unquote(v) for k, v in found.groupdict().items()}, op
                allowed = True
        raise HttpError(405 if allowed else 404, "Not Found")


class HttpCore:
    """Rate limits, ETags, pagination, faults and the request log around a ``Router``."""

    def __init__(
        self,
        router: Router,
        tokens: dict[str, Access],
        lock: threading.RLock,
        now: Callable[[], float] = time.time,
    ) -> None:
        self.router = router
        self.tokens = tokens
        self.lock = lock
        self.now = now
        self.keep_responses = False
        self.content_limits = CONTENT_LIMITS
        self._content: dict[str, deque[float]] = {}
        self.faults: list[Fault] = []
        self.stalls: list[Stall] = []
        self.released = threading.Event()  # set at close: stalled requests are answered
        self.requests: list[RecordedRequest] = []
        self.rate_limit = 5000
        self.rate_used = 0
        self.rate_reset = int(time.time()) + 3600
        self.base_url = ""
        self.app: FakeApp | None = None

    def handle(
        self, method: str, target: str, headers: dict[str, str], raw: bytes, peer: tuple[str, int]
    ) -> tuple[int, dict[str, str], bytes]:
        split = urlsplit(target)
        path, query = split.path, dict(parse_qsl(split.query))
        stall = self._stall(method, path)
        if stall is not None:
            self.released.wait(stall.seconds)  # outside the lock: other requests go on
        with self.lock:
            status, out_headers, body, op = self._dispatch(method, path, query, headers, raw)
            if_none_match = headers.get("if-none-match")
            if status == 200 and method == "GET":
                etag = 'W/"' + hashlib.sha256(body).hexdigest()[:40] + '"'
                out_headers["ETag"] = etag
                if if_none_match == etag:
                    status, body = 304, b""
            counted = status != 304
            if counted:
                self.rate_used += 1
            out_headers.update(self._rate_headers())
            self.requests.append(
                RecordedRequest(
                    method,
                    path,
                    split.query,
                    status,
                    counted,
                    peer,
                    if_none_match is not None,
                    headers.get("x-github-api-version"),
                    headers.get("authorization", ""),
                    op,
                    body if self.keep_responses else None,
                )
            )
        return status, out_headers, body

    def _rate_headers(self) -> dict[str, str]:
        return {
            "X-RateLimit-Limit": str(self.rate_limit),
            "X-RateLimit-Remaining": str(max(self.rate_limit - self.rate_used, 0)),
            "X-RateLimit-Reset": str(self.rate_reset),
            "X-RateLimit-Used": str(self.rate_used),
            "X-RateLimit-Resource": "core",
        }

    def _dispatch(
        self, method: str, path: str, query: dict[str, str], headers: dict[str, str], raw: bytes
    ) -> tuple[int, dict[str, str], bytes, str | None]:
        op: str | None = None
        try:
            authorization = headers.get("authorization", "")
            version = headers.get("x-github-api-version", DEFAULT_API_VERSION)
            if version not in API_VERSIONS:
                raise HttpError(400, f"API version '{version}' is not supported.")
            app_route = self.app is not None and APP_PATHS.fullmatch(path) is not None
            access = None if app_route else self._access(authorization)
            if self.rate_used >= self.rate_limit:
                raise HttpError(403, "API rate limit exceeded for user.")
            body = json.loads(raw) if raw else None
            handler, params, op = self.router.find(method, path)
            if method in CONTENT_METHODS and not app_route:
                self._create_content(authorization)
            login = "" if access is None else access.login
            call = Call(method, path, params, query, body, login, authorization, version, access)
            fault = self._fault(method, path)
            if fault is not None:
                if fault.apply_first:
                    handler(call)
                return (*self._fault_reply(fault), op)
            reply = handler(call)
        except Exception as exc:  # a bug in the fake: answer 500 with it, keep serving
            if not isinstance(exc, HttpError):
                exc = HttpError(500, f"fake GitHub failed: {exc!r}")
            payload = error(exc.message, exc.status)
            if exc.errors:
                payload["errors"] = exc.errors
            headers_out = {"Content-Type": "application/json"}
            return exc.status, headers_out, json.dumps(payload).encode(), op
        out = dict(reply.headers)
        data = reply.body
        if reply.paginate is not None:
            data, link = self._page(path, query, data, reply.paginate)
            if link:
                out["Link"] = link
        out["Content-Type"] = "application/json; charset=utf-8"
        encoded = b"" if data is None else json.dumps(data).encode()
        return reply.status, out, encoded, op

    def _create_content(self, authorization: str) -> None:
        """GitHub's secondary limit on content-creating requests, per token: past it, a 403
        without ``Retry-After`` (GitHub asks for at least a minute's wait then)."""
        now = self.now()
        log = self._content.setdefault(authorization, deque())
        longest = max(window for window, _ in self.content_limits)
        while log and log[0] <= now - longest:
            log.popleft()
        for window, limit in self.content_limits:
            if sum(1 for at in log if at > now - window) >= limit:
                raise HttpError(403, SECONDARY_LIMIT_MESSAGE)
        log.append(now)

    def _access(self, authorization: str) -> Access:
        scheme, _, token = authorization.partition(" ")
        if scheme.lower() not in ("token", "bearer"):
            raise HttpError(401, "Bad credentials")
        access = self.tokens.get(token)
        if access is None and self.app is not None:
            access = self.app.access(token)  # a live installation token
        if access is None:
            raise HttpError(401, "Bad credentials")
        return access

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
                    return stall
        return None

    def _fault_reply(self, fault: Fault) -> tuple[int, dict[str, str], bytes]:
        headers = {"Content-Type": "application/json"}
        if fault.retry_after is not None:
            headers["Retry-After"] = str(fault.retry_after)
        return fault.status, headers, json.dumps(error(fault.message, fault.status)).encode()

    def _page(
        self, path: str, query: dict[str, str], data: Any, key: str
    ) -> tuple[Any, str | None]:
        items = data[key] if key else data
        per_page = max(1, min(int(query.get("per_page", 30)), 100))
        page = max(1, int(query.get("page", 1)))
        last = max(1, -(-len(items) // per_page))
        chunk = items[(page - 1) * per_page : page * per_page]
        links = []

        def url(number: int) -> str:
            return f"{self.base_url}{path}?{urlencode({**query, 'page': str(number)})}"

        if page < last:
            links += [f'<{url(page + 1)}>; rel="next"', f'<{url(last)}>; rel="last"']
        if page > 1:
            links += [f'<{url(page - 1)}>; rel="prev"', f'<{url(1)}>; rel="first"']
        data = {**data, key: chunk} if key else chunk
        return data, ", ".join(links) or None


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
        target=server.serve_forever, kwargs={"poll_interval": 0.05}, name="fake-github", daemon=True
    )
    thread.start()
    return server, thread

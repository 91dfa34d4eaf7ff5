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
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, urlencode

from tests.fakes.github.payloads import error
from tests.fakes.github.records import Access, RecordedRequest
from tests.fakes.http import Exchange, HttpCore, HttpError, Incoming, Router

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


class GitHubCore(HttpCore):
    """GitHub's rate limits, credentials, error bodies and pages around a ``Router``."""

    thread_name = "fake-github"

    def __init__(
        self,
        router: Router,
        tokens: dict[str, Access],
        lock: threading.RLock,
        now: Callable[[], float] = time.time,
    ) -> None:
        super().__init__(router, lock, now)
        self.tokens = tokens
        self.content_limits = CONTENT_LIMITS
        self._content: dict[str, deque[float]] = {}
        self.rate_limit = 5000
        self.rate_used = 0
        self.rate_reset = int(time.time()) + 3600
        self.app: FakeApp | None = None

    # ------------------------------------------------------------------ HttpCore's hooks

    def admit(self, method: str, path: str, headers: Mapping[str, str]) -> Access | None:
        version = headers.get("x-github-api-version", DEFAULT_API_VERSION)
        if version not in API_VERSIONS:
            raise HttpError(400, f"API version '{version}' is not supported.")
        access = None if self._app_route(path) else self._access(headers.get("authorization", ""))
        if self.rate_used >= self.rate_limit:
            raise HttpError(403, "API rate limit exceeded for user.")
        return access

    def make_call(self, incoming: Incoming) -> Call:
        authorization = incoming.headers.get("authorization", "")
        if incoming.method in CONTENT_METHODS and not self._app_route(incoming.path):
            self._create_content(authorization)
        version = incoming.headers.get("x-github-api-version", DEFAULT_API_VERSION)
        who = incoming.who
        return Call(
            incoming.method,
            incoming.path,
            incoming.params,
            dict(parse_qsl(incoming.query)),
            incoming.body,
            "" if who is None else who.login,
            authorization,
            version,
            who,
        )

    def error_reply(self, exc: HttpError) -> tuple[int, dict[str, str], bytes]:
        payload = error(exc.message, exc.status)
        if exc.errors:
            payload["errors"] = exc.errors
        headers = {"Content-Type": "application/json", **exc.headers}
        return exc.status, headers, json.dumps(payload).encode()

    def etag(self, body: bytes) -> str:
        return 'W/"' + hashlib.sha256(body).hexdigest()[:40] + '"'

    def counts(self, status: int) -> bool:
        """A 304 does not count against GitHub's rate limit."""
        counted = status != 304
        if counted:
            self.rate_used += 1
        return counted

    def rate_headers(self) -> dict[str, str]:
        return {
            "X-RateLimit-Limit": str(self.rate_limit),
            "X-RateLimit-Remaining": str(max(self.rate_limit - self.rate_used, 0)),
            "X-RateLimit-Reset": str(self.rate_reset),
            "X-RateLimit-Used": str(self.rate_used),
            "X-RateLimit-Resource": "core",
        }

    def record(self, exchange: Exchange) -> RecordedRequest:
        return RecordedRequest(
            **self.recorded(exchange),
            api_version=exchange.headers.get("x-github-api-version"),
            authorization=exchange.headers.get("authorization", ""),
        )

    def page(self, path: str, query: str, items: list[Any]) -> tuple[list[Any], dict[str, str]]:
        params = dict(parse_qsl(query))
        per_page = max(1, min(int(params.get("per_page", 30)), 100))
        page = max(1, int(params.get("page", 1)))
        last = max(1, -(-len(items) // per_page))
        chunk = items[(page - 1) * per_page : page * per_page]
        links = []

        def url(number: int) -> str:
            return f"{self.base_url}{path}?{urlencode({**params, 'page': str(number)})}"

        if page < last:
            links += [f'<{url(page + 1)}>; rel="next"', f'<{url(last)}>; rel="last"']
        if page > 1:
            links += [f'<{url(page - 1)}>; rel="prev"', f'<{url(1)}>; rel="first"']
        return chunk, {"Link": ", ".join(links)} if links else {}

    # ------------------------------------------------------------------ GitHub's own

    def _app_route(self, path: str) -> bool:
        return self.app is not None and APP_PATHS.fullmatch(path) is not None

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

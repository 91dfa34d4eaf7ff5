"""The HTTP seam under githubkit: one connection pool, conditional reads, read retries.

githubkit is built with ``auto_retry=False`` and ``http_cache=False``; this transport does both
jobs the way the provider needs them:

- **One pool.** githubkit keeps its ``with gh:`` client in a ContextVar, which a fresh actor
  thread does not see, so calls from pollers would each open a connection. The pool lives here
  instead, shared by every client githubkit makes; ``close()`` from those clients is ignored
  and ``shutdown()`` closes it.
- **Conditional reads.** Every GET carries ``If-None-Match`` with the ETag last seen for its
  URL; a ``304`` is answered from the stored body as a ``200`` marked ``cpe_not_modified``
  (hishel would do this too, but honours GitHub's ``max-age=60`` and serves stale reads).
  Immutable git objects are not stored: they are cached by sha above this layer.
- **Read retries.** A GET that fails with 5xx, 429 or a rate-limit 403, or that times out, is
  retried with backoff, honouring ``Retry-After`` and ``X-RateLimit-Reset`` up to a cap. Writes
  are sent exactly once: a lost response to a POST is resolved by looking, not by resending.
"""

from __future__ import annotations

import random
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

import httpx

NOT_MODIFIED = "cpe_not_modified"
_IMMUTABLE = re.compile(r"/git/(blobs|trees|commits)/[0-9a-f]{40}")
_RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})


@dataclass
class TransportStats:
    """What went over the wire. ``counted``: responses that cost rate limit (all but 304s)."""

    requests: int = 0
    not_modified: int = 0
    retries: int = 0
    rate_limited: int = 0  # responses that said the rate limit was hit (429, a limit 403)
    rate_remaining: int | None = None
    rate_reset: float | None = None

    @property
    def counted(self) -> int:
        return self.requests - self.not_modified


@dataclass(frozen=True)
class _Stored:
    etag: str
    headers: list[tuple[bytes, bytes]]
    body: bytes


def rate_limit_wait(response: httpx.Response, now: float, attempt: int, backoff: float) -> float:
    """How long to wait before asking again: Retry-After, else the rate-limit reset when none
    is left, else exponential backoff with jitter."""
    after = response.headers.get("retry-after")
    if after is not None:
        try:
            return max(float(after), 0.0)
        except ValueError:
            pass
    if response.headers.get("x-ratelimit-remaining") == "0":
        reset = response.headers.get("x-ratelimit-reset")
        if reset is not None and reset.isdigit():
            return max(float(reset) - now, 0.0) + 1.0
    return float(backoff * (2**attempt) * (1 + random.random() / 4))  # jitter


def is_rate_limited(response: httpx.Response) -> bool:
    if response.status_code == 429:
        return True
    if response.status_code != 403:
        return False
    headers = response.headers
    if "retry-after" in headers or headers.get("x-ratelimit-remaining") == "0":
        return True
    return b"rate limit" in response.content.lower()


class ConditionalTransport(httpx.BaseTransport):
    def __init__(
        self,
        inner: httpx.BaseTransport | None = None,
        *,
        read_attempts: int = 4,
        max_retry_wait: float = 60.0,
        backoff_initial: float = 1.0,
        cache_entries: int = 4096,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._inner = inner if inner is not None else httpx.HTTPTransport()
        self._attempts = read_attempts
        self._max_wait = max_retry_wait
        self._backoff = backoff_initial
        self._entries = cache_entries
        self._sleep = sleep
        self._clock = clock
        self._lock = threading.Lock()
        self._stored: OrderedDict[str, _Stored] = OrderedDict()
        self.stats = TransportStats()

    # githubkit closes its per-call clients, and with them their transport: the pool outlives
    # them and is closed by its owner.
    def close(self) -> None:
        pass

    def shutdown(self) -> None:
        self._inner.close()

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        if request.method != "GET":
            return self._send(request)
        key = str(request.url)
        cacheable = _IMMUTABLE.search(request.url.path) is None
        with self._lock:
            stored = self._stored.get(key) if cacheable else None
        if stored is not None:
            request.headers["If-None-Match"] = stored.etag
        attempt = 0
        while True:
            try:
                response = self._send(request)
            except httpx.TransportError:  # timeouts, resets, a kept-alive connection closed
                if attempt + 1 >= self._attempts:
                    raise
                self._wait(self._backoff * 2**attempt)
                attempt += 1
                continue
            if response.status_code == 304 and stored is not None:
                return httpx.Response(
                    200,
                    headers=stored.headers,
                    content=stored.body,
                    request=request,
                    extensions={NOT_MODIFIED: True},
                )
            retryable = response.status_code in _RETRY_STATUSES or is_rate_limited(response)
            if retryable and attempt + 1 < self._attempts:
                wait = rate_limit_wait(response, self._clock(), attempt, self._backoff)
                if wait <= self._max_wait:
                    self._wait(wait)
                    attempt += 1
                    continue
            etag = response.headers.get("etag")
            if cacheable and response.status_code == 200 and etag:
                # The body is stored decoded: drop the headers that describe its wire form.
                headers = [
                    (name, value)
                    for name, value in response.headers.raw
                    if name.lower() not in (b"content-encoding", b"content-length")
                ]
                self._store(key, _Stored(etag, headers, response.content))
            return response

    def _send(self, request: httpx.Request) -> httpx.Response:
        response = self._inner.handle_request(request)
        response.read()
        headers = response.headers
        with self._lock:
            self.stats.requests += 1
            if response.status_code == 304:
                self.stats.not_modified += 1
            if response.status_code in (403, 429) and is_rate_limited(response):
                self.stats.rate_limited += 1
            remaining = headers.get("x-ratelimit-remaining")
            if remaining is not None and remaining.isdigit():
                self.stats.rate_remaining = int(remaining)
            reset = headers.get("x-ratelimit-reset")
            if reset is not None and reset.isdigit():
                self.stats.rate_reset = float(reset)
        return response

    def _wait(self, seconds: float) -> None:
        with self._lock:
            self.stats.retries += 1
        self._sleep(seconds)

    def _store(self, key: str, stored: _Stored) -> None:
        with self._lock:
            self._stored[key] = stored
            self._stored.move_to_end(key)
            while len(self._stored) > self._entries:
                self._stored.popitem(last=False)

"""The HTTP seam under githubkit: one connection pool, conditional reads, read retries, rate
limits respected for every request, and writes paced.

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
- **Read retries.** A GET that fails with 5xx, or that times out, is retried with backoff
  (1, 2, 4 s). Writes are sent exactly once: a lost response to a POST is resolved by looking,
  not by resending.
- **Rate limits.** A rate-limited answer (429, or a 403 that says so) is waited out as GitHub
  asks: ``Retry-After`` when it is sent; the primary limit's reset when none is left; otherwise
  (a secondary limit without ``Retry-After``) at least a minute, doubling while it keeps coming.
  Until then no request is sent at all, from any thread: a read that may wait that long
  (``max_retry_wait``) waits, anything else is answered at once with a 403 the transport makes
  up (``cpe_held``), whose ``Retry-After`` says how long is left, so pollers skip their cycles
  and the executor reschedules its write.
- **Paced writes.** Content-creating requests (POST, PATCH, PUT, DELETE) take a token from the
  ``WritePacer`` first, so bursts stay under GitHub's limits on content creation.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import random
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

import httpx

from adapters.providers.github.pacing import WritePacer
from adapters.providers.pacing import WriteTurns

log = logging.getLogger(__name__)

NOT_MODIFIED = "cpe_not_modified"
HELD = "cpe_held"  # a refusal the transport made up: the request was not sent
RETRY_AFTER = "cpe_retry_after"  # seconds to wait, as the transport judged a rate-limited answer
SECONDARY_WAIT = 60.0  # GitHub: wait at least a minute after a secondary limit without a hint
SECONDARY_WAIT_MAX = 1800.0
_IMMUTABLE = re.compile(r"/git/(blobs|trees|commits)/[0-9a-f]{40}")
_RETRY_STATUSES = frozenset({500, 502, 503, 504})


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


def rate_limit_wait(
    response: httpx.Response, now: float, strikes: int = 1, secondary: float = SECONDARY_WAIT
) -> float:
    """How long a rate-limited answer asks us to wait: ``Retry-After``; else the primary
    limit's reset when none is left; else a secondary limit's ``secondary`` seconds (GitHub
    asks for a minute), doubling with each one in a row (``strikes``), up to half an hour."""
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
    return float(min(secondary * 2 ** max(strikes - 1, 0), SECONDARY_WAIT_MAX))


def backoff_wait(backoff: float, attempt: int) -> float:
    """A failed read's wait before its next attempt: exponential, with jitter."""
    return float(backoff * (2**attempt) * (1 + random.random() / 4))


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
        pacer: WritePacer | None = None,
        secondary_wait: float = SECONDARY_WAIT,
    ) -> None:
        self._inner = inner if inner is not None else httpx.HTTPTransport()
        self._attempts = read_attempts
        self._max_wait = max_retry_wait
        self._backoff = backoff_initial
        self._entries = cache_entries
        self._sleep = sleep
        self._clock = clock
        self._pacer = pacer
        self._secondary_wait = secondary_wait
        self._lock = threading.Lock()
        self._stored: OrderedDict[str, _Stored] = OrderedDict()
        self._limited_until = 0.0  # no request goes out before this (``clock`` time)
        self._strikes = 0  # secondary limits in a row
        self._turns = WriteTurns(pacer, sleep, log)
        self.stats = TransportStats()

    # githubkit closes its per-call clients, and with them their transport: the pool outlives
    # them and is closed by its owner.
    def close(self) -> None:
        pass

    def shutdown(self) -> None:
        self._inner.close()

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        held = self._hold(request)
        if held is not None:
            return held
        if request.method != "GET":
            if not request.url.path.startswith("/app/"):  # an App's token exchange makes nothing
                self._turns.pace()
            return self._judged(self._send(request))
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
                self._wait(backoff_wait(self._backoff, attempt))
                attempt += 1
                continue
            if response.status_code == 304 and stored is not None:
                self._judged(response)
                return httpx.Response(
                    200,
                    headers=stored.headers,
                    content=stored.body,
                    request=request,
                    extensions={NOT_MODIFIED: True},
                )
            response = self._judged(response)
            wait = response.extensions.get(RETRY_AFTER)
            if wait is None and response.status_code in _RETRY_STATUSES:
                wait = backoff_wait(self._backoff, attempt)
            if wait is not None and attempt + 1 < self._attempts and wait <= self._max_wait:
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

    def _judged(self, response: httpx.Response) -> httpx.Response:
        """Note what an answer says about the rate limits: a rate-limited one holds every
        request until its wait is over (and carries that wait in ``cpe_retry_after``); any
        other answer lifts the hold."""
        now = self._clock()
        with self._lock:
            if not is_rate_limited(response):
                if response.status_code < 400:
                    self._strikes, self._limited_until = 0, 0.0
                return response
            primary = response.headers.get("x-ratelimit-remaining") == "0"
            if not primary:
                self._strikes += 1
            wait = rate_limit_wait(response, now, self._strikes, self._secondary_wait)
            self._limited_until = max(self._limited_until, now + wait)
        log.warning(
            "GitHub rate limit (%s, %s): no request is sent for %.0f s",
            response.status_code,
            "primary" if primary else "secondary",
            wait,
        )
        response.extensions = {**response.extensions, RETRY_AFTER: wait}
        return response

    def _hold(self, request: httpx.Request) -> httpx.Response | None:
        """While a rate limit holds: a read that may wait that long waits; anything else gets
        a made-up 403 saying how long is left, and nothing is sent."""
        with self._lock:
            left = self._limited_until - self._clock()
        if left <= 0:
            return None
        if request.method == "GET" and left <= self._max_wait:
            self._wait(left)
            return None
        body = {
            "message": f"cpe holds its requests for {math.ceil(left)} s more: GitHub asked it "
            "to wait (a rate limit)",
            "documentation_url": "https://docs.github.com/rest/using-the-rest-api/rate-limits",
        }
        return httpx.Response(
            403,
            headers={"Retry-After": str(math.ceil(left)), "Content-Type": "application/json"},
            content=json.dumps(body).encode(),
            request=request,
            extensions={HELD: True, RETRY_AFTER: left},
        )

    def write_turn(self) -> contextlib.AbstractContextManager[None]:
        """Wait for the next write's turn now, so that the first write this thread sends
        inside the block goes out at once: what is read in between is as fresh as it can be
        when the write that depends on it is sent."""
        return self._turns.write_turn()

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

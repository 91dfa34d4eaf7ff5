"""The HTTP seam under python-gitlab: one connection pool, conditional reads, read retries, rate
limits respected for every request, and writes paced.

python-gitlab is built over our own ``requests.Session`` with its retries off (its client
retries 429s by sleeping in the calling thread, writes included: ``api.GitLabClient`` turns that
off). This adapter, mounted on the session, does the work the provider needs:

- **Conditional reads.** A GET carries ``If-None-Match`` with the ETag last seen for its URL
  (GitLab's API sends weak ETags and answers ``304`` when nothing changed); a ``304`` is
  answered from the stored body as a ``200`` with the header ``X-Cpe-Not-Modified``, so the
  caller knows nothing changed without parsing.
- **Read retries.** A GET that fails with 5xx, a connection error or a timeout is retried with
  backoff (1, 2, 4 s), up to ``read_attempts``. Writes are sent exactly once: a lost answer to a
  POST is resolved by looking, not by resending.
- **Rate limits.** A ``429`` is waited out as GitLab asks: ``Retry-After`` (seconds, or a
  date) when it is sent, else ``RateLimit-Reset`` (a Unix time), else ``RateLimit-ResetTime``
  (a date), else a backoff. Until then no request is sent at all, from any thread: a read that
  may wait that long (``max_retry_wait``) waits, anything else is answered at once with a 429
  the adapter makes up (``X-Cpe-Held``), whose ``Retry-After`` says how long is left, so pollers
  skip their cycles and the executor reschedules its write.
- **Paced writes.** POST, PUT and DELETE take a token from the ``WritePacer`` first.
"""

from __future__ import annotations

import contextlib
import email.utils
import json
import logging
import math
import random
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import requests
from requests.adapters import BaseAdapter, HTTPAdapter
from requests.structures import CaseInsensitiveDict

from adapters.providers.pacing import WritePacer, WriteTurns

log = logging.getLogger(__name__)

NOT_MODIFIED = "X-Cpe-Not-Modified"  # a 304 answered from the stored body
HELD = "X-Cpe-Held"  # a refusal the adapter made up: the request was not sent
RETRY_AFTER = "X-Cpe-Retry-After"  # seconds to wait, as the adapter judged a 429
_RETRY_STATUSES = frozenset({500, 502, 503, 504})
_DROPPED = frozenset({"content-encoding", "content-length", "transfer-encoding"})


@dataclass
class TransportStats:
    """What went over the wire. ``counted``: responses other than 304s."""

    requests: int = 0
    not_modified: int = 0
    retries: int = 0
    rate_limited: int = 0  # 429s GitLab sent
    rate_remaining: int | None = None
    rate_reset: float | None = None
    rate_limit: int | None = None

    @property
    def counted(self) -> int:
        return self.requests - self.not_modified


@dataclass(frozen=True)
class _Stored:
    etag: str
    headers: dict[str, str]
    body: bytes


def _http_date(value: str) -> float | None:
    try:
        parsed = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    return parsed.timestamp()


def rate_limit_wait(headers: Mapping[str, str], now: float, fallback: float) -> float:
    """How long a 429 asks us to wait: ``Retry-After`` (seconds or a date); else
    ``RateLimit-Reset`` (a Unix time); else ``RateLimit-ResetTime`` (a date); else
    ``fallback``."""
    after = (headers.get("retry-after") or "").strip()
    if after:
        try:
            return max(float(after), 0.0)
        except ValueError:
            when = _http_date(after)
            if when is not None:
                return max(when - now, 0.0)
    reset = (headers.get("ratelimit-reset") or "").strip()
    if reset.isdigit():
        return max(float(reset) - now, 0.0) + 1.0
    when = _http_date(headers.get("ratelimit-resettime") or "")
    if when is not None:
        return max(when - now, 0.0) + 1.0
    return fallback


def backoff_wait(backoff: float, attempt: int) -> float:
    """A failed read's wait before its next attempt: exponential, with jitter."""
    return float(backoff * (2**attempt) * (1 + random.random() / 4))


def is_read(request: requests.PreparedRequest) -> bool:
    return (request.method or "GET").upper() in ("GET", "HEAD")


class GitLabAdapter(HTTPAdapter):
    """The session's adapter for the GitLab instance (``mount`` it on its base URL)."""

    def __init__(
        self,
        *,
        read_attempts: int = 4,
        max_retry_wait: float = 60.0,
        backoff_initial: float = 1.0,
        cache_entries: int = 4096,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.time,
        pacer: WritePacer | None = None,
    ) -> None:
        super().__init__(max_retries=0, pool_maxsize=16)
        self._attempts = read_attempts
        self._max_wait = max_retry_wait
        self._backoff = backoff_initial
        self._entries = cache_entries
        self._sleep = sleep
        self._clock = clock
        self._pacer = pacer
        self._lock = threading.Lock()
        self._stored: OrderedDict[str, _Stored] = OrderedDict()
        self._limited_until = 0.0  # no request goes out before this (``clock`` time)
        self._strikes = 0  # 429s in a row without a wait named
        self._turns = WriteTurns(pacer, sleep, log)
        self._told = threading.local()  # .wait: what this thread's last answer asked to wait
        self.stats = TransportStats()

    def send(  # type: ignore[override]  # requests' stubs name the parameters loosely
        self, request: requests.PreparedRequest, **kwargs: Any
    ) -> requests.Response:
        held = self._hold(request)
        if held is not None:
            return held
        if not is_read(request):
            self._turns.pace()
            return self._judged(self._send(request, kwargs))
        key = request.url or ""
        with self._lock:
            stored = self._stored.get(key)
        if stored is not None:
            request.headers["If-None-Match"] = stored.etag
        attempt = 0
        while True:
            try:
                response = self._send(request, kwargs)
            except (requests.ConnectionError, requests.Timeout):
                if attempt + 1 >= self._attempts:
                    raise
                self._wait(backoff_wait(self._backoff, attempt))
                attempt += 1
                continue
            if response.status_code == 304 and stored is not None:
                self._judged(response)
                return self._from_store(request, response, stored)
            response = self._judged(response)
            wait: float | None = None
            if RETRY_AFTER in response.headers:
                wait = float(response.headers[RETRY_AFTER])
            elif response.status_code in _RETRY_STATUSES:
                wait = backoff_wait(self._backoff, attempt)
            if wait is not None and attempt + 1 < self._attempts and wait <= self._max_wait:
                response.close()
                self._wait(wait)
                attempt += 1
                continue
            etag = response.headers.get("etag")
            if response.status_code == 200 and etag and not kwargs.get("stream"):
                headers = {k: v for k, v in response.headers.items() if k.lower() not in _DROPPED}
                self._store(key, _Stored(etag, headers, response.content))
            return response

    def _from_store(
        self, request: requests.PreparedRequest, answer: requests.Response, stored: _Stored
    ) -> requests.Response:
        response = requests.Response()
        response.status_code = 200
        response.reason = "OK"
        response.headers = CaseInsensitiveDict(stored.headers)
        # What GitLab said this time about the limits, over the stored figures.
        for name, value in answer.headers.items():
            if name.lower().startswith("ratelimit-"):
                response.headers[name] = value
        response.headers[NOT_MODIFIED] = "1"
        response._content = stored.body  # how requests holds a read body
        response.url = request.url or ""
        response.request = request
        response.encoding = answer.encoding or "utf-8"
        answer.close()
        return response

    def _judged(self, response: requests.Response) -> requests.Response:
        """Note what an answer says about the rate limit: a 429 holds every request until its
        wait is over (and carries that wait in ``X-Cpe-Retry-After``); any other answer below
        400 lifts the hold."""
        now = self._clock()
        self._told.wait = None
        with self._lock:
            if response.status_code != 429:
                if response.status_code < 400:
                    self._strikes, self._limited_until = 0, 0.0
                return response
            self._strikes += 1
            fallback = min(self._backoff * 2 ** (self._strikes - 1), 3600.0) or 1.0
            wait = rate_limit_wait(response.headers, now, fallback)
            self._limited_until = max(self._limited_until, now + wait)
        log.warning("GitLab rate limit (429): no request is sent for %.0f s", wait)
        self._told.wait = wait
        response.headers[RETRY_AFTER] = repr(wait)
        return response

    def _hold(self, request: requests.PreparedRequest) -> requests.Response | None:
        """While a rate limit holds: a read that may wait that long waits; anything else gets
        a made-up 429 saying how long is left, and nothing is sent."""
        with self._lock:
            left = self._limited_until - self._clock()
        if left <= 0:
            return None
        if is_read(request) and left <= self._max_wait:
            self._wait(left)
            return None
        self._told.wait = left
        response = requests.Response()
        response.status_code = 429
        response.reason = "Too Many Requests"
        response.headers = CaseInsensitiveDict(
            {
                "Retry-After": str(math.ceil(left)),
                "Content-Type": "application/json",
                HELD: "1",
                RETRY_AFTER: repr(left),
            }
        )
        message = (
            f"cpe holds its requests for {math.ceil(left)} s more: GitLab asked it to wait "
            "(a rate limit)"
        )
        response._content = json.dumps({"message": message}).encode()
        response.url = request.url or ""
        response.request = request
        response.encoding = "utf-8"
        return response

    def last_retry_after(self) -> float | None:
        """The wait the last answer this thread got asked for (a 429, real or made up)."""
        return getattr(self._told, "wait", None)

    def write_turn(self) -> contextlib.AbstractContextManager[None]:
        """Wait for the next write's turn now, so that the first write this thread sends
        inside the block goes out at once: what is read in between is as fresh as it can be
        when the write that depends on it is sent."""
        return self._turns.write_turn()

    def _send(self, request: requests.PreparedRequest, kwargs: dict[str, Any]) -> requests.Response:
        response = super().send(request, **kwargs)
        headers = response.headers
        with self._lock:
            self.stats.requests += 1
            if response.status_code == 304:
                self.stats.not_modified += 1
            if response.status_code == 429:
                self.stats.rate_limited += 1
            for name, field in (
                ("ratelimit-remaining", "rate_remaining"),
                ("ratelimit-limit", "rate_limit"),
            ):
                value = (headers.get(name) or "").strip()
                if value.isdigit():
                    setattr(self.stats, field, int(value))
            reset = (headers.get("ratelimit-reset") or "").strip()
            if reset.isdigit():
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


class ForeignHostError(requests.exceptions.RequestException):
    """A request (a redirect) for a host other than the GitLab instance: not sent."""


class _Elsewhere(BaseAdapter):
    """Every URL outside the instance: refused, so the token (python-gitlab sets
    ``PRIVATE-TOKEN`` on the request, which requests keeps across a redirect to another host)
    never leaves for anywhere else."""

    def send(  # type: ignore[override]  # requests' stubs name the parameters loosely
        self, request: requests.PreparedRequest, **kwargs: Any
    ) -> requests.Response:
        host = urlsplit(request.url or "").netloc or "an unknown host"
        raise ForeignHostError(
            f"cpe sends nothing to {host}: it is not the GitLab instance (a redirect?)",
            request=request,
        )

    def close(self) -> None:
        pass


def session_for(base_url: str, adapter: GitLabAdapter) -> requests.Session:
    """A session that sends everything for ``base_url`` through ``adapter``, and nothing to
    anywhere else."""
    session = requests.Session()
    session.trust_env = False  # no proxy or .netrc from the environment decides where it goes
    elsewhere = _Elsewhere()
    session.mount("http://", elsewhere)
    session.mount("https://", elsewhere)
    session.mount(base_url.rstrip("/") + "/", adapter)
    return session

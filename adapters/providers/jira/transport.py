"""The HTTP seam to Jira: one httpx client (one connection pool), read retries, rate limits
respected for every request, writes paced and sent once, and Jira's refusals translated.

- **Reads** (GET, and the searches, which are POSTs that change nothing) failing with a 5xx, a
  connection error or a timeout are retried with backoff (1, 2, 4 s), up to ``read_attempts``;
  a 503 that names a ``Retry-After`` waits that long instead.
- **Writes** are sent exactly once, after a token from the ``WritePacer``: a lost answer to a
  POST is resolved by looking (idempotency markers), not by resending.
- **Rate limits.** Jira Cloud answers 429 with ``Retry-After`` (seconds) and
  ``X-RateLimit-Reset`` (an ISO 8601 time, ``2026-11-29T12:00Z``); Data Center's limiter sends
  ``Retry-After`` too. Until the wait is over no request goes out, from any thread: a read that
  may wait that long (``max_retry_wait``) waits, anything else fails at once with a
  ``ProviderError`` (status 429, ``retry_after``: what is left), so pollers skip their cycles and
  the executor reschedules its write.
- **Nowhere else.** Redirects are not followed (the Authorization header stays with the site),
  no proxy or ``.netrc`` comes from the environment, and no message carries the token.

Jira's refusals are ``{"errorMessages": [...], "errors": {"field": "..."}}``: both are said, in
Jira's words, after what cpe was doing.
"""

from __future__ import annotations

import contextlib
import email.utils
import logging
import random
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from urllib.parse import urlsplit

import httpx

from adapters.providers.pacing import WritePacer, WriteTurns
from domain.errors import ConflictError, NotFoundError, ProviderError

log = logging.getLogger(__name__)

_RETRY_STATUSES = frozenset({500, 502, 503, 504})


@dataclass
class TransportStats:
    """What went over the wire. Jira sends no ETags to answer 304 with: ``not_modified`` stays
    0 (the field is there for the stats every provider shows)."""

    requests: int = 0
    not_modified: int = 0
    retries: int = 0
    rate_limited: int = 0  # 429s Jira sent
    rate_remaining: int | None = None
    rate_limit: int | None = None
    rate_reset: float | None = None

    @property
    def counted(self) -> int:
        return self.requests - self.not_modified


def _when(value: str) -> float | None:
    """A time as Jira or HTTP writes it (ISO 8601, or an HTTP date), as a Unix time."""
    value = value.strip()
    if not value:
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
        if parsed.tzinfo is not None:
            return parsed.timestamp()
    except ValueError:
        pass
    try:
        return email.utils.parsedate_to_datetime(value).timestamp()
    except (TypeError, ValueError, IndexError):
        return None


def rate_limit_wait(headers: Mapping[str, str], now: float, fallback: float) -> float:
    """How long a 429 asks us to wait: ``Retry-After`` (seconds, or an HTTP date); else
    ``X-RateLimit-Reset`` (Cloud: an ISO 8601 time); else ``fallback``."""
    after = (headers.get("retry-after") or "").strip()
    if after:
        try:
            return max(float(after), 0.0)
        except ValueError:
            when = _when(after)
            if when is not None:
                return max(when - now, 0.0)
    when = _when(headers.get("x-ratelimit-reset") or "")
    if when is not None:
        return max(when - now, 0.0) + 1.0
    return fallback


def backoff_wait(backoff: float, attempt: int) -> float:
    """A failed read's wait before its next attempt: exponential, with jitter."""
    return float(backoff * (2**attempt) * (1 + random.random() / 4))


def jira_words(response: httpx.Response) -> str:
    """Jira's own words in a refusal: its ``errorMessages`` and ``errors``, else the status."""
    try:
        body: Any = response.json()
    except ValueError:
        body = None
    parts: list[str] = []
    if isinstance(body, dict):
        messages = body.get("errorMessages")
        if isinstance(messages, list):
            parts += [str(m) for m in messages if str(m).strip()]
        errors = body.get("errors")
        if isinstance(errors, dict):
            parts += [f"{k}: {v}" for k, v in errors.items()]
        if not parts and isinstance(body.get("message"), str):
            parts.append(body["message"])
    return "; ".join(parts) or f"HTTP {response.status_code} {response.reason_phrase}".strip()


class JiraTransport:
    """Every request cpe sends to one Jira site."""

    def __init__(
        self,
        base_url: str,
        authorization: str,
        *,
        timeout: float = 30.0,
        read_attempts: int = 4,
        max_retry_wait: float = 60.0,
        backoff_initial: float = 1.0,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.time,
        pacer: WritePacer | None = None,
        secrets: tuple[str, ...] = (),
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self._attempts = read_attempts
        self._max_wait = max_retry_wait
        self._backoff = backoff_initial
        self._sleep = sleep
        self._clock = clock
        self._pacer = pacer
        self._secrets = tuple(s for s in secrets if s)
        self._lock = threading.Lock()
        self._limited_until = 0.0  # no request goes out before this (``clock`` time)
        self._strikes = 0  # 429s in a row
        self._turns = WriteTurns(pacer, sleep, log)
        self.stats = TransportStats()
        self._client = httpx.Client(
            base_url=self.base_url,
            headers={
                "Authorization": authorization,
                "Accept": "application/json",
                "User-Agent": "control-plane-engine",
            },
            timeout=timeout,
            follow_redirects=False,
            trust_env=False,
        )

    def close(self) -> None:
        self._client.close()

    @property
    def site(self) -> str:
        return f"Jira at {self.base_url}"

    # ------------------------------------------------------------------ requests

    def get(self, path: str, what: str, params: Mapping[str, Any] | None = None) -> Any:
        return self.call("GET", path, what, params=params, read=True)

    def call(
        self,
        method: str,
        path: str,
        what: str,
        *,
        params: Mapping[str, Any] | None = None,
        json: Any = None,
        read: bool | None = None,
    ) -> Any:
        """Jira's JSON answer (None when it sends no body), or a ``domain.errors`` error naming
        ``what`` in Jira's words. ``read``: retried on failures (default: GET only)."""
        is_read = method == "GET" if read is None else read
        attempt = 0
        while True:
            self._hold(is_read, what)
            if not is_read:
                self._turns.pace()
            try:
                response = self._send(method, path, params, json)
            except (httpx.TimeoutException, httpx.TransportError) as exc:
                if is_read and attempt + 1 < self._attempts:
                    self._wait(backoff_wait(self._backoff, attempt))
                    attempt += 1
                    continue
                raise self._unreachable(exc, what) from None
            limited = self._judged(response)
            if response.status_code < 300:
                return self._body(response, what)
            retry = is_read and attempt + 1 < self._attempts
            if limited is not None:
                if retry and limited <= self._max_wait:
                    attempt += 1
                    continue  # the hold waits it out before the next attempt
                raise self._refusal(response, what, limited)
            if response.status_code in _RETRY_STATUSES:
                after = rate_limit_wait(response.headers, self._clock(), -1.0)
                wait = after if after >= 0 else backoff_wait(self._backoff, attempt)
                if retry and wait <= self._max_wait:
                    self._wait(wait)
                    attempt += 1
                    continue
                raise self._refusal(response, what, after if after >= 0 else None)
            raise self._refusal(response, what, None)

    def _send(
        self, method: str, path: str, params: Mapping[str, Any] | None, json: Any
    ) -> httpx.Response:
        response = self._client.request(method, path, params=params, json=json)
        headers = response.headers
        with self._lock:
            self.stats.requests += 1
            if response.status_code == 429:
                self.stats.rate_limited += 1
            for name, field in (
                ("x-ratelimit-remaining", "rate_remaining"),
                ("x-ratelimit-limit", "rate_limit"),
            ):
                value = (headers.get(name) or "").strip()
                if value.isdigit():
                    setattr(self.stats, field, int(value))
            reset = _when(headers.get("x-ratelimit-reset") or "")
            if reset is not None:
                self.stats.rate_reset = reset
        return response

    def _body(self, response: httpx.Response, what: str) -> Any:
        if response.status_code == 204 or not response.content:
            return None
        try:
            return response.json()
        except ValueError:
            raise ProviderError(
                f"{what}: {self.site} answered with something that is not JSON "
                f"({response.headers.get('content-type', 'no content type')})",
                status=response.status_code,
                transient=True,
            ) from None

    # ------------------------------------------------------------------ errors

    def scrub(self, text: str) -> str:
        for secret in self._secrets:
            text = text.replace(secret, "***")
        return text

    def _refusal(self, response: httpx.Response, what: str, wait: float | None) -> ProviderError:
        status = response.status_code
        if 300 <= status < 400:
            where = urlsplit(response.headers.get("location") or "")
            to = f" to {where.scheme}://{where.netloc}" if where.scheme and where.netloc else ""
            return ProviderError(
                f"{what}: {self.site} redirected the request elsewhere{to} (is base_url the "
                "site's address?); cpe does not follow it",
                status=status,
                transient=False,
            )
        message = self.scrub(f"{what}: {jira_words(response)}")
        if status == 404:
            return NotFoundError(message)
        if status == 409:
            return ConflictError(message)
        limited = status == 429
        return ProviderError(
            message,
            status=status,
            retry_after=wait if (limited or wait is not None) else None,
            transient=status >= 500 or limited or status == 408,
        )

    def _unreachable(self, exc: Exception, what: str) -> ProviderError:
        if isinstance(exc, httpx.TimeoutException):
            return ProviderError(f"{what}: {self.site} did not answer in time", transient=True)
        return ProviderError(
            f"{what}: cannot reach {self.site}: {type(exc).__name__}", transient=True
        )

    # ------------------------------------------------------------------ rate limits, pacing

    def _judged(self, response: httpx.Response) -> float | None:
        """A 429 holds every request until its wait is over (returned); any success lifts the
        hold."""
        now = self._clock()
        with self._lock:
            if response.status_code != 429:
                if response.status_code < 400:
                    self._strikes, self._limited_until = 0, 0.0
                return None
            self._strikes += 1
            fallback = min(self._backoff * 2 ** (self._strikes - 1), 3600.0) or 1.0
            wait = rate_limit_wait(response.headers, now, fallback)
            self._limited_until = max(self._limited_until, now + wait)
        reason = response.headers.get("ratelimit-reason") or "no reason given"
        log.warning("Jira rate limit (429, %s): no request is sent for %.0f s", reason, wait)
        return wait

    def _hold(self, is_read: bool, what: str) -> None:
        """While a rate limit holds: a read that may wait that long waits; anything else fails
        at once, nothing sent."""
        with self._lock:
            left = self._limited_until - self._clock()
        if left <= 0:
            return
        if is_read and left <= self._max_wait:
            self._wait(left)
            return
        raise ProviderError(
            f"{what}: cpe holds its requests for {left:.0f} s more: Jira asked it to wait "
            "(a rate limit)",
            status=429,
            retry_after=left,
            transient=True,
        )

    def write_turn(self) -> contextlib.AbstractContextManager[None]:
        """Wait for the next write's turn now, so that the first write this thread sends inside
        the block goes out at once: what is read in between is as fresh as it can be."""
        return self._turns.write_turn()

    def _wait(self, seconds: float) -> None:
        with self._lock:
            self.stats.retries += 1
        self._sleep(seconds)

"""Linear's GraphQL endpoint over httpx: one connection pool, read retries, Linear's rate limits
respected for every request, writes paced and sent once, and failures as ``domain.errors``.

- **Auth.** A personal API key is sent as ``Authorization: <key>``, an OAuth access token as
  ``Authorization: Bearer <token>``. Redirects are not followed (the token goes nowhere else)
  and no proxy or ``.netrc`` from the environment is used.
- **Errors.** Linear answers GraphQL errors in ``errors`` (HTTP 200 with a partial result, or
  400), each with ``extensions.code`` (``AUTHENTICATION_ERROR``, ``FORBIDDEN``,
  ``RATELIMITED``, ``INPUT_ERROR``, ``GRAPHQL_VALIDATION_FAILED``...; ``extensions.type`` says it
  in lower-case words) and ``extensions.statusCode`` (the status meant: Linear's HTTP status is
  400 for every error). They become ``ProviderError`` (``status`` 401, 403, 404,
  422, 429), ``NotFoundError`` ("Entity not found") and ``ConflictError``; transient ones
  (5xx, connection failures, timeouts, RATELIMITED) say so.
- **Read retries.** A query that fails with 5xx, a connection error or a timeout is retried
  with backoff (1, 2, 4 s), up to ``read_attempts``. A mutation is sent exactly once: a lost
  answer is resolved by looking (idempotency), not by resending.
- **Rate limits.** RATELIMITED (HTTP 400 or 429) is waited out as Linear's headers say:
  ``Retry-After`` (seconds) when sent, else ``X-RateLimit-Requests-Reset`` or
  ``X-RateLimit-Complexity-Reset`` (a UTC epoch, in milliseconds), else a backoff. Until then
  nothing is sent, from any thread: a query that may wait that long (``max_retry_wait``) waits,
  anything else fails at once with ``retry_after`` so pollers skip a cycle and the executor
  reschedules its write.
- **Paced writes.** A mutation takes a token from the ``WritePacer`` first.
"""

from __future__ import annotations

import contextlib
import logging
import math
import random
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import httpx

from adapters.providers.pacing import WritePacer, WriteTurns
from domain.errors import ConflictError, NotFoundError, ProviderError

log = logging.getLogger(__name__)

Json = dict[str, Any]
_RETRY_STATUSES = frozenset({500, 502, 503, 504})
_CODES = {
    "AUTHENTICATION_ERROR": 401,
    "FORBIDDEN": 403,
    "RATELIMITED": 429,
    "INVALID_INPUT": 422,
    "INPUT_ERROR": 400,
    "GRAPHQL_VALIDATION_FAILED": 400,
    "BAD_USER_INPUT": 400,
    "ENTITY_NOT_FOUND": 404,
    "NOT_FOUND": 404,
}


@dataclass
class TransportStats:
    """What went over the wire (``WireStats`` of ``cpe status``)."""

    requests: int = 0
    not_modified: int = 0  # GraphQL has no conditional requests: always 0
    retries: int = 0
    rate_limited: int = 0  # RATELIMITED answers Linear sent
    rate_remaining: int | None = None
    rate_reset: float | None = None  # a Unix time, seconds
    rate_limit: int | None = None
    complexity_remaining: int | None = None

    @property
    def counted(self) -> int:
        return self.requests - self.not_modified


def _epoch_seconds(value: str) -> float | None:
    try:
        number = float(value.strip())
    except ValueError:
        return None
    return number / 1000 if number > 1e11 else number  # Linear's resets are milliseconds


def _number(headers: Mapping[str, str], name: str) -> float | None:
    try:
        return float((headers.get(name) or "").strip())
    except ValueError:
        return None


def rate_limit_wait(headers: Mapping[str, str], now: float, fallback: float) -> float:
    """How long a RATELIMITED answer asks us to wait: ``Retry-After`` (seconds); else until the
    reset of the budget that ran out (``X-RateLimit-Requests-Reset`` when no request is left,
    ``X-RateLimit-Complexity-Reset`` when fewer points are left than the query cost; epoch
    milliseconds), the later of both when the headers do not say which; else ``fallback``."""
    after = (headers.get("retry-after") or "").strip()
    if after:
        with contextlib.suppress(ValueError):
            return max(float(after), 0.0)
    resets: dict[str, float] = {}
    for budget in ("requests", "complexity"):
        when = _epoch_seconds(headers.get(f"x-ratelimit-{budget}-reset") or "")
        if when is not None:
            resets[budget] = when
    if not resets:
        return fallback
    spent = []
    if _number(headers, "x-ratelimit-requests-remaining") == 0 and "requests" in resets:
        spent.append(resets["requests"])
    points = _number(headers, "x-ratelimit-complexity-remaining")
    cost = _number(headers, "x-complexity") or 1.0
    if points is not None and points < cost and "complexity" in resets:
        spent.append(resets["complexity"])
    return max(max(spent or resets.values()) - now, 0.0) + 1.0


def backoff_wait(backoff: float, attempt: int) -> float:
    return float(backoff * (2**attempt) * (1 + random.random() / 4))


def scrub(text: str, secrets: Sequence[str]) -> str:
    for secret in secrets:
        if secret:
            text = text.replace(secret, "***")
    return text


def error_code(error: Mapping[str, Any]) -> str:
    extensions = error.get("extensions") or {}
    if not isinstance(extensions, dict):
        return ""
    code = extensions.get("code") or extensions.get("type") or ""
    return str(code).upper().replace(" ", "_")


def error_words(error: Mapping[str, Any]) -> str:
    extensions = error.get("extensions") or {}
    told = extensions.get("userPresentableMessage") if isinstance(extensions, dict) else None
    return str(told or error.get("message") or "an error without words")


class LinearTransport:
    """POSTs GraphQL documents to ``url`` with ``token``; ``close()`` it."""

    def __init__(
        self,
        url: str,
        token: str,
        *,
        oauth: bool,
        timeout: float,
        read_attempts: int = 4,
        max_retry_wait: float = 60.0,
        backoff_initial: float = 1.0,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.time,
        pacer: WritePacer | None = None,
    ) -> None:
        self.url = url
        parts = urlsplit(url)
        self.where = f"Linear at {parts.scheme}://{parts.netloc}"
        self._secrets = (token,)
        self._client = httpx.Client(
            headers={
                "Authorization": f"Bearer {token}" if oauth else token,
                "Content-Type": "application/json",
                "User-Agent": "cpe (control plane engine)",
            },
            timeout=timeout,
            follow_redirects=False,
            trust_env=False,
        )
        self._attempts = read_attempts
        self._max_wait = max_retry_wait
        self._backoff = backoff_initial
        self._sleep = sleep
        self._clock = clock
        self._pacer = pacer
        self._lock = threading.Lock()
        self._limited_until = 0.0
        self._strikes = 0
        self._turns = WriteTurns(pacer, sleep, log)
        self.stats = TransportStats()

    def close(self) -> None:
        self._client.close()

    # ------------------------------------------------------------------ sending

    def query(self, document: str, variables: Mapping[str, Any], what: str) -> Json:
        """A read: retried on transient failures; its ``data``."""
        attempt = 0
        while True:
            self._hold(read=True, what=what)
            try:
                return self._post(document, variables, what)
            except ProviderError as exc:
                if not exc.transient or attempt + 1 >= self._attempts:
                    raise
                with self._lock:
                    self.stats.retries += 1
                attempt += 1
                if exc.retry_after is not None:
                    if exc.retry_after > self._max_wait:
                        raise
                    continue  # the hold waits it out, for every thread at once
                self._sleep(backoff_wait(self._backoff, attempt - 1))

    def mutate(self, document: str, variables: Mapping[str, Any], what: str) -> Json:
        """A write: paced, sent once; its ``data``."""
        self._hold(read=False, what=what)
        self._turns.pace()
        return self._post(document, variables, what)

    def _post(self, document: str, variables: Mapping[str, Any], what: str) -> Json:
        body = {"query": document, "variables": dict(variables)}
        try:
            response = self._client.post(self.url, json=body)
        except httpx.TimeoutException:
            with self._lock:
                self.stats.requests += 1
            raise ProviderError(
                f"{what}: {self.where} did not answer in time", transient=True
            ) from None
        except httpx.HTTPError as exc:
            raise ProviderError(
                scrub(f"{what}: cannot reach {self.where}: {type(exc).__name__}", self._secrets),
                transient=True,
            ) from None
        self._note(response)
        return self._judge(response, what)

    def _judge(self, response: httpx.Response, what: str) -> Json:
        status = response.status_code
        try:
            payload = response.json()
        except ValueError:
            payload = None
        errors = payload.get("errors") if isinstance(payload, dict) else None
        if isinstance(errors, list) and errors:
            raise self._error(response, [e for e in errors if isinstance(e, dict)], what)
        if status in (301, 302, 303, 307, 308):
            raise ProviderError(
                f"{what}: {self.where} redirected the request elsewhere: api_url must be the "
                "GraphQL endpoint itself",
                status=status,
                transient=False,
            )
        if status >= 400 or not isinstance(payload, dict):
            transient = status >= 500 or status in (408, 429) or payload is None
            words = f"HTTP {status}" if status >= 400 else "the answer was not JSON"
            if status == 429:
                raise self._limited(response, what, f"{what}: {self.where}: HTTP 429")
            raise ProviderError(
                f"{what}: {self.where}: {words}", status=status, transient=transient
            )
        data = payload.get("data")
        if not isinstance(data, dict):
            raise ProviderError(f"{what}: {self.where} sent no data", transient=True)
        with self._lock:
            self._strikes, self._limited_until = 0, 0.0
        return data

    def _error(self, response: httpx.Response, errors: list[Json], what: str) -> ProviderError:
        first = errors[0] if errors else {}
        code = error_code(first)
        words = scrub(error_words(first), self._secrets)
        message = f"{what}: {words}"
        if code == "RATELIMITED":
            return self._limited(response, what, f"{message} (RATELIMITED)")
        extensions = first.get("extensions") if isinstance(first.get("extensions"), dict) else {}
        meant = extensions.get("statusCode") if isinstance(extensions, dict) else None
        if isinstance(meant, int) and meant >= 400:
            status = meant  # Linear answers HTTP 400 and says the status it means here
        else:
            status = _CODES.get(code, max(response.status_code, 400))
        lowered = f"{first.get('message') or ''} {words}".lower()
        if status == 404 or "not found" in lowered or "could not find" in lowered:
            return NotFoundError(message)
        if "already" in lowered or "duplicate" in lowered:  # "exists already", "related already"
            return ConflictError(message)
        transient = status >= 500 or response.status_code >= 500 or code == "INTERNAL_SERVER_ERROR"
        return ProviderError(f"{message} ({code or status})", status=status, transient=transient)

    def _limited(self, response: httpx.Response, what: str, message: str) -> ProviderError:
        now = self._clock()
        with self._lock:
            self.stats.rate_limited += 1
            self._strikes += 1
            fallback = min(self._backoff * 2 ** (self._strikes - 1), 3600.0) or 1.0
            wait = rate_limit_wait(response.headers, now, fallback)
            self._limited_until = max(self._limited_until, now + wait)
        log.warning("Linear rate limit (RATELIMITED): no request is sent for %.0f s", wait)
        return ProviderError(message, status=429, transient=True, retry_after=wait)

    def _hold(self, *, read: bool, what: str) -> None:
        with self._lock:
            left = self._limited_until - self._clock()
        if left <= 0:
            return
        if read and left <= self._max_wait:
            self._sleep(left)
            return
        raise ProviderError(
            f"{what}: cpe holds its requests for {math.ceil(left)} s more: Linear asked it to "
            "wait (a rate limit)",
            status=429,
            transient=True,
            retry_after=left,
        )

    def _note(self, response: httpx.Response) -> None:
        headers = response.headers
        with self._lock:
            self.stats.requests += 1
            for name, field in (
                ("x-ratelimit-requests-remaining", "rate_remaining"),
                ("x-ratelimit-requests-limit", "rate_limit"),
                ("x-ratelimit-complexity-remaining", "complexity_remaining"),
            ):
                value = (headers.get(name) or "").strip()
                if value.isdigit():
                    setattr(self.stats, field, int(value))
            reset = _epoch_seconds(headers.get("x-ratelimit-requests-reset") or "")
            if reset is not None:
                self.stats.rate_reset = reset

    # ------------------------------------------------------------------ pacing

    def write_turn(self) -> contextlib.AbstractContextManager[None]:
        """Wait for the next write's turn now, so the first write this thread sends inside the
        block goes out at once: what is read in between is as fresh as it can be."""
        return self._turns.write_turn()

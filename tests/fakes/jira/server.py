"""The fake Jira's HTTP layer: Jira's conventions around ``tests/fakes/http.HttpCore``.

- Cloud (``/rest/api/3``): ``Authorization: Basic base64(email:api-token)``, the token's owner's
  email and the token together; a Bearer API token, a wrong pair or no credentials at all is
  ``401`` with Jira's plain-text ``Client must be authenticated to access this resource.``
  (and ``X-Seraph-LoginReason: AUTHENTICATED_FAILED`` for wrong credentials).
- Data Center (``/rest/api/2``): ``Authorization: Bearer <personal access token>``; Basic or an
  unknown token is that 401. Cloud serves no ``/rest/api/2`` here, Data Center no
  ``/rest/api/3`` (404: what cpe sends must be the deployment's own API).
- Errors are ``{"errorMessages": [...], "errors": {...}}``; an unknown path is a 404 of that
  shape, a known path with another method a 405.
- Rate limits: Cloud counts requests in a window (``rate_limit(n)``); past the budget, ``429``
  with ``Retry-After`` (seconds), ``X-RateLimit-Limit``, ``X-RateLimit-Remaining: 0``,
  ``X-RateLimit-Reset`` (ISO 8601, ``yyyy-MM-ddTHH:mmZ``) and ``RateLimit-Reason:
  jira-burst-based``; answers under 20% of the budget carry ``X-RateLimit-NearLimit: true``.
  Data Center's rate limiting is a token bucket: ``X-RateLimit-Limit``,
  ``X-RateLimit-Remaining``, ``X-RateLimit-Interval-Seconds``, ``X-RateLimit-FillRate`` and
  ``Retry-After`` on a 429. A 429 costs nothing; every other answer costs one.
"""

from __future__ import annotations

import base64
import binascii
import json
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from urllib.parse import parse_qsl

from tests.fakes.http import Exchange, Fault, HttpCore, HttpError, Incoming, Router
from tests.fakes.jira.records import RecordedRequest
from tests.fakes.jira.site import Site

RATE_WINDOW = 60
UNAUTHENTICATED = "Client must be authenticated to access this resource."
REMOVED_SEARCH = (
    "The requested API has been removed. Please migrate to the /rest/api/3/search/jql API. A "
    "full migration guideline is available at https://developer.atlassian.com/changelog/#CHANGE-2046"
)


def jira_error(
    status: int, *messages: str, errors: Mapping[str, str] | None = None, **headers: str
) -> HttpError:
    """Jira's error answer: ``{"errorMessages": messages, "errors": errors}``."""
    body = {"errorMessages": list(messages), "errors": dict(errors or {})}
    text = "; ".join([*messages, *(errors or {}).values()])
    return HttpError(status, text, body=body, headers=headers)


def field_errors(status: int = 400, **errors: str) -> HttpError:
    return jira_error(status, errors=errors)


def unauthorized(failed: bool) -> HttpError:
    headers = {"X-Seraph-LoginReason": "AUTHENTICATED_FAILED"} if failed else {}
    return HttpError(401, UNAUTHENTICATED, body=UNAUTHENTICATED, headers=headers)


@dataclass
class Call:
    """What a route is given: its ``params``, the query (``args``: each name's values), the
    JSON ``body``, who is calling (a user name) and the ``api`` version of the path."""

    method: str
    path: str
    params: dict[str, str]
    args: dict[str, list[str]]
    body: Any
    user: str
    api: str

    def arg(self, name: str, default: str | None = None) -> str | None:
        values = self.args.get(name)
        return values[-1] if values else default

    def many(self, name: str) -> list[str]:
        return self.args.get(name, [])

    def int_arg(self, name: str, default: int) -> int:
        text = self.arg(name)
        if text is None or text == "":
            return default
        try:
            return int(text)
        except ValueError:
            raise jira_error(400, f"The value '{text}' is not valid for '{name}'.") from None

    def flag(self, name: str) -> bool:
        return (self.arg(name) or "").lower() == "true"


@dataclass
class Rate:
    limit: int = 100_000
    used: int = 0
    reset: float = 0.0


class JiraCore(HttpCore):
    thread_name = "fake-jira"

    def __init__(
        self,
        router: Router,
        site: Site,
        tokens: Mapping[str, str],
        lock: threading.RLock,
        now: Callable[[], float] = time.time,
    ) -> None:
        super().__init__(router, lock, now)
        self.site = site
        self.tokens = dict(tokens)  # token -> user name
        self.rate = Rate(reset=now() + RATE_WINDOW)
        self._body: Any = None
        self._who: tuple[str | None, str] = (None, "")

    @property
    def api(self) -> str:
        return "3" if self.site.deployment == "cloud" else "2"

    # ------------------------------------------------------------------ HttpCore's hooks

    def admit(self, method: str, path: str, headers: Mapping[str, str]) -> str | None:
        self._who = (None, "")
        self._throttle()
        scheme, _, value = headers.get("authorization", "").partition(" ")
        scheme = scheme.lower()
        self._who = (None, scheme)
        if path.endswith("/serverInfo") and not scheme:
            return None
        if not scheme:
            raise unauthorized(failed=False)
        user = self._credentials(scheme, value.strip())
        if user is None:
            raise unauthorized(failed=True)
        self._who = (user, scheme)
        return user

    def _credentials(self, scheme: str, value: str) -> str | None:
        if self.site.deployment == "data_center":
            if scheme != "bearer":
                return None
            return self._active(self.tokens.get(value))
        if scheme != "basic":
            return None
        try:
            email, _, token = base64.b64decode(value, validate=True).decode().partition(":")
        except (binascii.Error, UnicodeDecodeError):
            return None
        owner = self._active(self.tokens.get(token))
        if owner is None or self.site.users[owner].email.casefold() != email.casefold():
            return None
        return owner

    def _active(self, name: str | None) -> str | None:
        if name is None or name not in self.site.users or not self.site.users[name].active:
            return None
        return name

    def make_call(self, incoming: Incoming) -> Call:
        self._body = incoming.body
        api = incoming.path.split("/")[3] if incoming.path.startswith("/rest/api/") else ""
        args: dict[str, list[str]] = {}
        for key, value in parse_qsl(incoming.query, keep_blank_values=True):
            args.setdefault(key, []).append(value)
        return Call(
            incoming.method,
            incoming.path,
            incoming.params,
            args,
            incoming.body,
            incoming.who or "",
            api,
        )

    def no_route(self, allowed: bool) -> HttpError:
        if allowed:
            return jira_error(405, "Method Not Allowed")
        return jira_error(404, "The requested resource could not be found.")

    def error_reply(self, error: HttpError) -> tuple[int, dict[str, str], bytes]:
        headers = dict(error.headers)
        if isinstance(error.body, str):
            headers["Content-Type"] = "text/plain;charset=UTF-8"
            return error.status, headers, error.body.encode()
        body = error.body
        if body is None:
            body = {"errorMessages": [error.message], "errors": {}}
        headers["Content-Type"] = "application/json;charset=UTF-8"
        return error.status, headers, json.dumps(body).encode()

    def fault_reply(self, fault: Fault) -> tuple[int, dict[str, str], bytes]:
        headers: dict[str, str] = {}
        if fault.retry_after is not None:
            headers["Retry-After"] = str(fault.retry_after)
        if fault.status == 429:
            reason = fault.message if fault.message.startswith("jira-") else "jira-burst-based"
            headers.update(self._limit_headers(0, fault.retry_after or 1))
            headers["RateLimit-Reason"] = reason
            return self.error_reply(jira_error(429, "Rate limit exceeded.", **headers))
        return self.error_reply(jira_error(fault.status, fault.message, **headers))

    def counts(self, status: int) -> bool:
        return status != 429

    def rate_headers(self) -> dict[str, str]:
        left = max(self.rate.limit - self.rate.used, 0)
        if self.site.deployment == "data_center":
            return {
                "X-RateLimit-Limit": str(self.rate.limit),
                "X-RateLimit-Remaining": str(left),
                "X-RateLimit-Interval-Seconds": str(RATE_WINDOW),
                "X-RateLimit-FillRate": str(self.rate.limit),
            }
        if left < self.rate.limit * 0.2:
            return {"X-RateLimit-NearLimit": "true"}
        return {}

    def record(self, exchange: Exchange) -> RecordedRequest:
        path = exchange.path
        api = path.split("/")[3] if path.startswith("/rest/api/") and path.count("/") >= 3 else ""
        user, scheme = self._who
        body, self._body = self._body, None
        return RecordedRequest(
            **self.recorded(exchange), user=user, scheme=scheme, api=api, body=body
        )

    # ------------------------------------------------------------------ Jira's own

    def _limit_headers(self, left: int, retry: int) -> dict[str, str]:
        reset = datetime.fromtimestamp(self.now() + retry, UTC).strftime("%Y-%m-%dT%H:%MZ")
        if self.site.deployment == "data_center":
            return {
                "X-RateLimit-Limit": str(self.rate.limit),
                "X-RateLimit-Remaining": str(left),
                "X-RateLimit-Interval-Seconds": str(RATE_WINDOW),
                "X-RateLimit-FillRate": str(self.rate.limit),
            }
        return {
            "X-RateLimit-Limit": str(self.rate.limit),
            "X-RateLimit-Remaining": str(left),
            "X-RateLimit-Reset": reset,
        }

    def _throttle(self) -> None:
        rate, now = self.rate, self.now()
        if now >= rate.reset:
            rate.used, rate.reset = 0, now + RATE_WINDOW
        if rate.used >= rate.limit:
            retry = max(int(rate.reset - now + 0.999), 1)
            headers = {"Retry-After": str(retry), **self._limit_headers(0, retry)}
            if self.site.deployment == "cloud":
                headers["RateLimit-Reason"] = "jira-burst-based"
            raise jira_error(429, "Rate limit exceeded.", **headers)
        rate.used += 1

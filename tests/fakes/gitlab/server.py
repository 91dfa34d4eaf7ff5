"""The fake GitLab's HTTP layer: GitLab's conventions around ``tests/fakes/http.HttpCore``.

What a client sees is what GitLab's REST API (``/api/v4``) does for the same calls:

- Tokens in a ``PRIVATE-TOKEN`` header, an ``Authorization: Bearer`` header or a
  ``private_token`` parameter; a token GitLab does not know is ``401 {"message": "401
  Unauthorized"}``. No token at all reads the public project as anyone may, and any write is
  that 401. A token with only the ``read_api`` scope that writes (anything but GET and HEAD,
  as ``API::API``'s ``allow_access_with_scope :read_api`` says) gets the 403 ``insufficient_scope``
  body the REST docs show.
- Errors are ``{"message": ...}``; an unknown route ``404 {"error": "404 Not Found"}``, a
  known path with another method ``405 {"error": "405 Not Allowed"}`` (Grape's).
- Offset pagination: ``page`` and ``per_page`` (default 20, at most 100), answered with
  ``X-Page``, ``X-Per-Page``, ``X-Next-Page``, ``X-Prev-Page``, ``X-Total``, ``X-Total-Pages``
  and a ``Link`` header (``prev``, ``next``, ``first``, ``last``).
- ETags: GitLab's API runs inside its Rails application, whose middleware includes
  ``Rack::ETag`` and ``Rack::ConditionalGet`` (``config/application.rb`` places its deflater
  before ``Rack::ETag``): a 200 answer to a GET carries a weak ETag of its body, and a GET whose
  ``If-None-Match`` matches it is answered ``304 Not Modified`` with no body. Unlike GitHub's,
  a 304 costs rate limit: GitLab throttles requests (Rack::Attack) before the app answers.
- Rate limits: ``RateLimit-Limit``, ``RateLimit-Observed``, ``RateLimit-Remaining``,
  ``RateLimit-Reset`` (epoch seconds) and ``RateLimit-ResetTime`` (an HTTP date) on every
  answer; once the budget of the window is spent, ``429`` with ``Retry-After`` (seconds until
  the reset), ``RateLimit-Name`` and Rack::Attack's plain-text body ``Retry later``.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from email.utils import formatdate
from typing import Any
from urllib.parse import parse_qsl, urlencode

from tests.fakes.gitlab.records import RecordedRequest, Token
from tests.fakes.http import Exchange, HttpCore, HttpError, Incoming, Router

API = "/api/v4"
WRITES = frozenset({"POST", "PUT", "PATCH", "DELETE"})
DEFAULT_PER_PAGE, MAX_PER_PAGE = 20, 100
INSUFFICIENT_SCOPE = {
    "error": "insufficient_scope",
    "error_description": "The request requires higher privileges than provided by the access "
    "token.",
    "scope": "api",
}
RATE_LIMIT_NAME = "throttle_authenticated_api"
RATE_WINDOW = 60  # seconds: GitLab's throttles count requests per minute


def unauthorized() -> HttpError:
    return HttpError(401, "401 Unauthorized")


def forbidden() -> HttpError:
    return HttpError(403, "403 Forbidden")


def not_found(what: str = "") -> HttpError:
    """GitLab's 404s: ``404 Not found`` for a record, ``404 <What> Not Found`` for a named
    resource (``404 Project Not Found``, ``404 Issue Not Found``)."""
    return HttpError(404, f"404 {what} Not Found" if what else "404 Not found")


def bad_request(message: str) -> HttpError:
    return HttpError(400, message)


def missing(name: str) -> HttpError:
    """A required parameter not given: Grape's validation answer."""
    return HttpError(400, f"{name} is missing", body={"error": f"{name} is missing"})


def at_least_one_of(call: Call, names: tuple[str, ...]) -> None:
    """Grape's ``at_least_one_of``: an edit that names none of ``names`` is a 400."""
    if not any(call.arg(name) is not None for name in names):
        text = ", ".join(names) + " are missing, at least one parameter must be provided"
        raise HttpError(400, text, body={"error": text})


@dataclass
class Call:
    method: str
    path: str
    params: dict[str, str]  # the route's (decoded)
    args: dict[str, Any]  # query parameters and body parameters together, as Grape sees them
    user: str | None  # None: anonymous (no token)
    token: Token | None = None

    def arg(self, name: str, default: Any = None) -> Any:
        return self.args.get(name, default)

    def text(self, name: str) -> str | None:
        value = self.args.get(name)
        return None if value is None else str(value)

    def flag(self, name: str) -> bool | None:
        """A boolean parameter (JSON true/false, or "true"/"false" in a query or form)."""
        value = self.args.get(name)
        if value is None or isinstance(value, bool):
            return value
        return str(value).lower() in ("true", "1", "yes")

    def names(self, name: str) -> list[str] | None:
        """A list of label names: a comma-separated string or an array."""
        value = self.args.get(name)
        if value is None:
            return None
        if isinstance(value, list):
            return [str(v).strip() for v in value if str(v).strip()]
        return [n.strip() for n in str(value).split(",") if n.strip()]

    def need(self, name: str) -> Any:
        value = self.args.get(name)
        if value is None or value == "":
            raise missing(name)
        return value


@dataclass
class RateLimit:
    """A throttle: ``limit`` requests a window; ``observed`` so far in the one that ends at
    ``reset`` (epoch seconds)."""

    limit: int = 2000
    observed: int = 0
    reset: int = 0
    history: list[int] = field(default_factory=list)  # limits of spent windows, for tests


def query_args(query: str) -> dict[str, Any]:
    """Query parameters as Grape reads them: ``a[]=x&a[]=y`` is an array."""
    args: dict[str, Any] = {}
    for key, value in parse_qsl(query, keep_blank_values=True):
        if key.endswith("[]"):
            args.setdefault(key[:-2], []).append(value)
        else:
            args[key] = value
    return args


class GitLabCore(HttpCore):
    """GitLab's credentials, scopes, error bodies, pages and rate limits around a ``Router``."""

    thread_name = "fake-gitlab"

    def __init__(
        self,
        router: Router,
        tokens: dict[str, Token],
        lock: threading.RLock,
        now: Callable[[], float] = time.time,
    ) -> None:
        super().__init__(router, lock, now)
        self.tokens = tokens
        self.rate = RateLimit(reset=int(now()) + RATE_WINDOW)

    # ------------------------------------------------------------------ HttpCore's hooks

    def admit(self, method: str, path: str, headers: Mapping[str, str]) -> Token | None:
        token = self._token(headers, "")
        self._throttle()
        return token

    def make_call(self, incoming: Incoming) -> Call:
        args = query_args(incoming.query)
        token = self._token(incoming.headers, incoming.query)
        if isinstance(incoming.body, dict):
            args.update(incoming.body)
        args.pop("private_token", None)
        if token is None and incoming.method in WRITES:
            raise unauthorized()
        if token is not None and incoming.method in WRITES and "api" not in token.scopes:
            raise HttpError(403, INSUFFICIENT_SCOPE["error"], body=INSUFFICIENT_SCOPE)
        user = None if token is None else token.username
        return Call(incoming.method, incoming.path, incoming.params, args, user, token)

    def no_route(self, allowed: bool) -> HttpError:
        if allowed:
            return HttpError(405, "405 Not Allowed", body={"error": "405 Not Allowed"})
        return HttpError(404, "404 Not Found", body={"error": "404 Not Found"})

    def page(self, path: str, query: str, items: list[Any]) -> tuple[list[Any], dict[str, str]]:
        params = dict(parse_qsl(query, keep_blank_values=True))
        params.pop("private_token", None)
        per_page = _int(params.get("per_page"), DEFAULT_PER_PAGE)
        per_page = max(1, min(per_page, MAX_PER_PAGE))
        page = max(1, _int(params.get("page"), 1))
        total = len(items)
        pages = max(1, -(-total // per_page))
        chunk = items[(page - 1) * per_page : page * per_page]

        def url(number: int) -> str:
            wanted = {**params, "page": str(number), "per_page": str(per_page)}
            return f"{self.base_url}{path}?{urlencode(wanted)}"

        links = []
        if page > 1:
            links.append(f'<{url(page - 1)}>; rel="prev"')
        if page < pages:
            links.append(f'<{url(page + 1)}>; rel="next"')
        links += [f'<{url(1)}>; rel="first"', f'<{url(pages)}>; rel="last"']
        headers = {
            "X-Page": str(page),
            "X-Per-Page": str(per_page),
            "X-Next-Page": str(page + 1) if page < pages else "",
            "X-Prev-Page": str(page - 1) if page > 1 else "",
            "X-Total": str(total),
            "X-Total-Pages": str(pages),
            "Link": ", ".join(links),
        }
        return chunk, headers

    def etag(self, body: bytes) -> str:
        return 'W/"' + hashlib.md5(body, usedforsecurity=False).hexdigest() + '"'

    def counts(self, status: int) -> bool:
        return status != 429  # a refused request is not served; the rest, 304s too, are

    def rate_headers(self) -> dict[str, str]:
        rate = self.rate
        return {
            "RateLimit-Limit": str(rate.limit),
            "RateLimit-Observed": str(rate.observed),
            "RateLimit-Remaining": str(max(rate.limit - rate.observed, 0)),
            "RateLimit-Reset": str(rate.reset),
            "RateLimit-ResetTime": formatdate(rate.reset, usegmt=True),
        }

    def error_reply(self, error: HttpError) -> tuple[int, dict[str, str], bytes]:
        if error.status == 429 and error.body is None:
            headers = {"Content-Type": "text/plain", **error.headers}
            return 429, headers, b"Retry later\n"
        body = error.body if error.body is not None else {"message": error.message}
        headers = {"Content-Type": "application/json", **error.headers}
        return error.status, headers, json.dumps(body).encode()

    def record(self, exchange: Exchange) -> RecordedRequest:
        return RecordedRequest(
            **self.recorded(exchange), token=_sent_token(exchange.headers, exchange.query)
        )

    # ------------------------------------------------------------------ GitLab's own

    def _token(self, headers: Mapping[str, str], query: str) -> Token | None:
        sent = _sent_token(headers, query)
        if not sent:
            return None
        token = self.tokens.get(sent)
        if token is None:
            raise unauthorized()
        return token

    def _throttle(self) -> None:
        """Counts this request in the current window; past the limit, a 429."""
        rate, now = self.rate, int(self.now())
        if now >= rate.reset:
            rate.history.append(rate.observed)
            rate.observed, rate.reset = 0, now + RATE_WINDOW
        if rate.observed >= rate.limit:
            retry = max(rate.reset - now, 1)
            raise HttpError(
                429,
                "Retry later",
                headers={"Retry-After": str(retry), "RateLimit-Name": RATE_LIMIT_NAME},
            )
        rate.observed += 1


def _sent_token(headers: Mapping[str, str], query: str) -> str:
    if headers.get("private-token"):
        return headers["private-token"]
    scheme, _, value = headers.get("authorization", "").partition(" ")
    if scheme.lower() == "bearer" and value:
        return value
    return dict(parse_qsl(query)).get("private_token", "")


def _int(text: str | None, default: int) -> int:
    try:
        return int(text) if text else default
    except ValueError:
        return default

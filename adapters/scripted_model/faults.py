"""The model API's bad days: faults the scripted model answers with, and rate-limit headroom.

A ``Fault`` is how the API answers every model request (``POST /v1/messages``,
``/v1/messages/count_tokens``, ``/v1/responses``) while the server has it
(``ScriptedModelServer.fail``): one ``ErrorAnswer`` per wire, since the vendors answer the same
trouble differently (Anthropic's overload is a 529 ``overloaded_error``, OpenAI's a 503
``server_is_overloaded``). A ``Quota`` is the subscription headroom every good answer reports
in its headers (``ScriptedModelServer.set_quota``).

The shapes follow what the clients parse and what the vendors' APIs were reported sending: the
Anthropic
``anthropic-ratelimit-unified-*`` headers as the ``claude`` CLI 2.1.332 parses them (status,
reset, representative claim; per window ``5h``/``7d`` ``-status``, ``-utilization`` (a
fraction), ``-reset`` (epoch seconds), ``-surpassed-threshold``); the OpenAI and ChatGPT ones
as codex (codex-rs ``codex-api`` ``api_bridge.rs``, ``rate_limits.rs``) parses them and as
the ChatGPT backend was reported sending them: a ``usage_limit_reached`` error carrying
``plan_type``, ``resets_at``, ``resets_in_seconds``, and ``x-codex-primary-*`` (the five-hour
window) / ``x-codex-secondary-*`` (the weekly one) headers with ``-used-percent`` (0..100),
``-window-minutes``, ``-reset-at`` (epoch seconds), ``-reset-after-seconds``. What the real
CLIs do with each answer is recorded in docs/scripted-model-wire.md.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from adapters.scripted_model import responses_wire, wire

Wire = Literal["anthropic", "openai"]
WindowName = Literal["five_hour", "seven_day"]

# A window's name in the Anthropic headers, its codex slot and its length in minutes.
_ANTHROPIC_WINDOW: dict[WindowName, str] = {"five_hour": "5h", "seven_day": "7d"}
_CODEX_SLOT: dict[WindowName, str] = {"five_hour": "primary", "seven_day": "secondary"}
WINDOW_MINUTES: dict[WindowName, int] = {"five_hour": 300, "seven_day": 7 * 24 * 60}
_UNIFIED = "anthropic-ratelimit-unified"


@dataclass(frozen=True)
class SecondsUntil:
    """A header or field value counted down to ``moment``: the whole seconds left when the
    answer is sent (never below 0), as ``retry-after`` and ``resets_in_seconds`` are."""

    moment: datetime

    def at(self, now: datetime) -> int:
        return max(0, math.ceil((self.moment - now).total_seconds()))


Value = str | int | float | bool | None | SecondsUntil


@dataclass(frozen=True)
class ErrorAnswer:
    """One wire's answer to a faulted request: status, headers and the error object.

    The body is the wire's own error body (``wire.error_json``:
    ``{"type": "error", "error": {"type", "message"}, "request_id"}``;
    ``responses_wire.error_json``: ``{"error": {"message", "type", "param", "code"}}``) with
    ``fields`` added to its error object. ``code`` is OpenAI's ``error.code`` (Anthropic's body
    has none).
    """

    status: int
    error_type: str
    message: str
    code: str | None = None
    headers: tuple[tuple[str, str | SecondsUntil], ...] = ()
    fields: tuple[tuple[str, Value], ...] = ()

    def header_values(self, now: datetime) -> dict[str, str]:
        return {name: str(_value(value, now)) for name, value in self.headers}

    def field_values(self, now: datetime) -> dict[str, Any]:
        return {name: _value(value, now) for name, value in self.fields}


@dataclass(frozen=True)
class Reply:
    """What the server sends for a faulted request: status, headers, JSON body."""

    status: int
    headers: Mapping[str, str]
    body: Mapping[str, Any]
    message: str


@dataclass(frozen=True)
class Window:
    """One usage window of a subscription: the fraction of it spent (``used``, 0..1; the API
    reports a little over 1 once it is overrun) and when it starts afresh (timezone-aware)."""

    used: float
    resets_at: datetime

    def __post_init__(self) -> None:
        _aware(self.resets_at)
        if not (math.isfinite(self.used) and self.used >= 0):
            raise ValueError(f"a window's used fraction is 0 or more, not {self.used}")

    @property
    def epoch(self) -> int:
        return int(self.resets_at.timestamp())


@dataclass(frozen=True)
class Quota:
    """A subscription's headroom, reported by every good answer while the server has it.

    Anthropic: ``anthropic-ratelimit-unified-status`` ``allowed``, or ``allowed_warning`` once
    a window's ``used`` reaches ``warn_at`` (that window then also carries
    ``-surpassed-threshold: warn_at``); ``-representative-claim`` and ``-reset`` name the window
    nearest its limit; per window ``-5h-``/``-7d-`` ``status``, ``utilization``, ``reset``.
    codex: ``x-codex-primary-*`` for ``five_hour``, ``x-codex-secondary-*`` for ``seven_day``.
    """

    five_hour: Window | None = None
    seven_day: Window | None = None
    warn_at: float = 0.75

    def __post_init__(self) -> None:
        if self.five_hour is None and self.seven_day is None:
            raise ValueError("a quota reports at least one window")

    @classmethod
    def of(cls, windows: Mapping[WindowName, Window], warn_at: float = 0.75) -> Quota:
        return cls(windows.get("five_hour"), windows.get("seven_day"), warn_at)

    @classmethod
    def used(
        cls,
        five_hour: float | None = None,
        seven_day: float | None = None,
        *,
        now: datetime | None = None,
    ) -> Quota:
        """Windows this much spent, each resetting one window length after ``now``."""
        start = now or datetime.now(UTC)
        windows: dict[WindowName, Window] = {}
        if five_hour is not None:
            windows["five_hour"] = Window(five_hour, start + timedelta(hours=5))
        if seven_day is not None:
            windows["seven_day"] = Window(seven_day, start + timedelta(days=7))
        return cls.of(windows)

    def windows(self) -> dict[WindowName, Window]:
        found: dict[WindowName, Window] = {}
        if self.five_hour is not None:
            found["five_hour"] = self.five_hour
        if self.seven_day is not None:
            found["seven_day"] = self.seven_day
        return found

    def replace(self, name: WindowName, window: Window) -> Quota:
        return Quota.of({**self.windows(), name: window}, self.warn_at)

    def anthropic_headers(self, *, rejected: WindowName | None = None) -> dict[str, str]:
        """The unified rate-limit headers; with ``rejected`` that window is spent (a 429)."""
        windows = self.windows()
        headers: dict[str, str] = {}
        for name, window in windows.items():
            prefix = f"{_UNIFIED}-{_ANTHROPIC_WINDOW[name]}"
            headers[f"{prefix}-status"] = self._status(name, window, rejected)
            headers[f"{prefix}-utilization"] = _number(window.used)
            headers[f"{prefix}-reset"] = str(window.epoch)
            if name != rejected and window.used >= self.warn_at:
                headers[f"{prefix}-surpassed-threshold"] = _number(self.warn_at)
        claim: WindowName = (
            rejected if rejected is not None else max(windows, key=lambda n: windows[n].used)
        )
        statuses = [self._status(name, w, rejected) for name, w in windows.items()]
        status = next(s for s in ("rejected", "allowed_warning", "allowed") if s in statuses)
        return {
            f"{_UNIFIED}-status": status,
            f"{_UNIFIED}-reset": str(windows[claim].epoch),
            f"{_UNIFIED}-representative-claim": claim,
            **headers,
        }

    def codex_headers(self, now: datetime) -> dict[str, str]:
        """The ``x-codex-*`` headers codex reads its rate limits from."""
        return {name: str(_value(value, now)) for name, value in self.codex_header_values()}

    def codex_header_values(self) -> tuple[tuple[str, str | SecondsUntil], ...]:
        """``codex_headers`` with the seconds left to each reset still to count down."""
        headers: list[tuple[str, str | SecondsUntil]] = []
        for name, window in self.windows().items():
            slot = f"x-codex-{_CODEX_SLOT[name]}"
            headers += [
                (f"{slot}-used-percent", _number(round(window.used * 100, 2))),
                (f"{slot}-window-minutes", str(WINDOW_MINUTES[name])),
                (f"{slot}-reset-at", str(window.epoch)),
                (f"{slot}-reset-after-seconds", SecondsUntil(window.resets_at)),
            ]
        if self.five_hour is not None and self.seven_day is not None:
            headers.append(("x-codex-primary-over-secondary-limit-percent", "0"))
        return tuple(headers)

    def headers(self, wire_name: Wire, now: datetime) -> dict[str, str]:
        return self.anthropic_headers() if wire_name == "anthropic" else self.codex_headers(now)

    def _status(self, name: WindowName, window: Window, rejected: WindowName | None) -> str:
        if name == rejected:
            return "rejected"
        return "allowed_warning" if window.used >= self.warn_at else "allowed"


@dataclass(frozen=True)
class Fault:
    """How the API answers every model request while the server has it (``server.fail``).

    ``times``: answer so many requests, then heal by itself (None: until ``server.heal()``).
    Build one with the constructors below, or give both wires' answers yourself.
    """

    name: str
    anthropic: ErrorAnswer
    openai: ErrorAnswer
    times: int | None = None

    def __post_init__(self) -> None:
        if self.times is not None and self.times < 1:
            raise ValueError(f"a fault answers at least one request, not times={self.times}")

    def answer(self, wire_name: Wire) -> ErrorAnswer:
        return self.anthropic if wire_name == "anthropic" else self.openai

    def reply(self, wire_name: Wire, *, now: datetime, request_id: str) -> Reply:
        """The status, headers and body sent on ``wire_name`` at ``now``."""
        answer = self.answer(wire_name)
        fields = answer.field_values(now)
        if wire_name == "anthropic":
            body = wire.error_json(answer.error_type, answer.message, request_id=request_id)
            body["error"].update(fields)
        else:
            body = responses_wire.error_json(
                answer.error_type, answer.message, code=answer.code, **fields
            )
        return Reply(answer.status, answer.header_values(now), body, answer.message)

    # -- the documented cases

    @classmethod
    def overloaded(cls, *, times: int | None = None) -> Fault:
        """The model is overloaded: Anthropic 529 ``overloaded_error``; OpenAI 503
        ``server_is_overloaded`` (codex's ``ServerOverloaded``: no retry)."""
        return cls(
            "overloaded",
            ErrorAnswer(529, "overloaded_error", "Overloaded", headers=_SHOULD_RETRY),
            ErrorAnswer(
                503,
                "service_unavailable_error",
                "Our servers are currently overloaded. Please try again later.",
                code="server_is_overloaded",
            ),
            times,
        )

    @classmethod
    def server_error(cls, status: int = 500, *, times: int | None = None) -> Fault:
        """An internal error (any 5xx ``status``): Anthropic ``api_error``, OpenAI
        ``server_error``."""
        if not 500 <= status <= 599:
            raise ValueError(f"a server error has a 5xx status, not {status}")
        return cls(
            "server_error",
            ErrorAnswer(status, "api_error", "Internal server error", headers=_SHOULD_RETRY),
            ErrorAnswer(
                status,
                "server_error",
                "The server had an error while processing your request. Sorry about that!",
            ),
            times,
        )

    @classmethod
    def unauthorized(cls, *, times: int | None = None) -> Fault:
        """The credential is refused: 401 ``authentication_error`` / ``invalid_api_key``."""
        return cls(
            "unauthorized",
            ErrorAnswer(401, "authentication_error", "invalid x-api-key"),
            ErrorAnswer(
                401,
                "invalid_request_error",
                "Incorrect API key provided: scripted-model. You can find your API key at "
                "https://platform.openai.com/account/api-keys.",
                code="invalid_api_key",
            ),
            times,
        )

    @classmethod
    def rate_limited(cls, retry_after: int = 2, *, times: int | None = None) -> Fault:
        """Too many requests for a while: 429 with ``retry-after: retry_after`` on both wires;
        Anthropic ``rate_limit_error`` with the request-limit headers, OpenAI
        ``rate_limit_exceeded`` with its ``x-ratelimit-*-requests`` headers."""
        if retry_after < 0:
            raise ValueError(f"retry_after is 0 or more seconds, not {retry_after}")
        return cls(
            "rate_limited",
            ErrorAnswer(
                429,
                "rate_limit_error",
                "This request would exceed the rate limit for your organization of 50 requests "
                "per minute. For details, refer to: https://docs.claude.com/en/api/rate-limits.",
                headers=(
                    ("retry-after", str(retry_after)),
                    ("anthropic-ratelimit-requests-limit", "50"),
                    ("anthropic-ratelimit-requests-remaining", "0"),
                    *_SHOULD_RETRY,
                ),
            ),
            ErrorAnswer(
                429,
                "requests",
                "Rate limit reached for requests per min (RPM): Limit 50, Used 50, Requested 1. "
                f"Please try again in {retry_after}s. Visit "
                "https://platform.openai.com/account/rate-limits to learn more.",
                code="rate_limit_exceeded",
                headers=(
                    ("retry-after", str(retry_after)),
                    ("x-ratelimit-limit-requests", "50"),
                    ("x-ratelimit-remaining-requests", "0"),
                    ("x-ratelimit-reset-requests", f"{retry_after}s"),
                ),
            ),
            times,
        )

    @classmethod
    def usage_limit(
        cls,
        resets_at: datetime,
        window: WindowName = "five_hour",
        *,
        quota: Quota | None = None,
        plan_type: str = "plus",
        times: int | None = None,
    ) -> Fault:
        """A subscription's ``window`` is spent until ``resets_at`` (timezone-aware).

        Anthropic: 429 ``rate_limit_error`` whose unified headers say ``rejected`` for that
        window (``-representative-claim: window``, ``-reset`` its epoch seconds, per window
        status, utilization 1, reset) and ``retry-after`` the seconds left. OpenAI (a ChatGPT
        plan, codex): 429 ``usage_limit_reached`` with ``plan_type``, ``resets_at``,
        ``resets_in_seconds``, and the ``x-codex-*`` headers, that window at 100 %.
        ``quota`` adds the other window's reading (not sent without it).
        """
        spent = Window(1.0, _aware(resets_at))
        windows = (quota or Quota.of({window: spent})).replace(window, spent)
        until = SecondsUntil(spent.resets_at)
        anthropic_headers: tuple[tuple[str, str | SecondsUntil], ...] = (
            *windows.anthropic_headers(rejected=window).items(),
            ("retry-after", until),
        )
        codex_headers: tuple[tuple[str, str | SecondsUntil], ...] = (
            ("x-codex-active-limit", "codex"),
            ("x-codex-plan-type", plan_type),
            *windows.codex_header_values(),
            ("x-codex-credits-has-credits", "False"),
            ("x-codex-credits-unlimited", "False"),
        )
        return cls(
            "usage_limit",
            ErrorAnswer(
                429,
                "rate_limit_error",
                "This request would exceed your account's rate limit. Please try again later.",
                headers=anthropic_headers,
            ),
            ErrorAnswer(
                429,
                "usage_limit_reached",
                "The usage limit has been reached",
                headers=codex_headers,
                fields=(
                    ("plan_type", plan_type),
                    ("resets_at", spent.epoch),
                    ("eligible_promo", None),
                    ("resets_in_seconds", until),
                ),
            ),
            times,
        )

    @classmethod
    def out_of_credits(cls, *, times: int | None = None) -> Fault:
        """An API key's prepaid credit is gone: Anthropic 400 ``invalid_request_error``
        ("credit balance is too low"), OpenAI 429 ``insufficient_quota``."""
        return cls(
            "out_of_credits",
            ErrorAnswer(
                400,
                "invalid_request_error",
                "Your credit balance is too low to access the Anthropic API. Please go to Plans "
                "& Billing to upgrade or purchase credits.",
            ),
            ErrorAnswer(
                429,
                "insufficient_quota",
                "You exceeded your current quota, please check your plan and billing details. "
                "For more information on this error, read the docs: "
                "https://platform.openai.com/docs/guides/error-codes/api-errors.",
                code="insufficient_quota",
            ),
            times,
        )


# The Anthropic API tells its SDK whether a retry may help (observed on 429/5xx answers).
_SHOULD_RETRY: tuple[tuple[str, str], ...] = (("x-should-retry", "true"),)


def _value(value: Value, now: datetime) -> str | int | float | bool | None:
    return value.at(now) if isinstance(value, SecondsUntil) else value


def _number(value: float) -> str:
    # 0.42 → "0.42", 100.0 → "100": as the APIs write them.
    return f"{value:g}"


def _aware(moment: datetime) -> datetime:
    if moment.tzinfo is None:
        raise ValueError(f"a reset time must be timezone-aware, not {moment.isoformat()}")
    return moment

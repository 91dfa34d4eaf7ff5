"""The model API's bad days: the faults the scripted model answers with.

A ``Fault`` is how the API answers every model request (``POST /v1/messages``,
``/v1/messages/count_tokens``, ``/v1/responses``) while the server has it
(``ScriptedModelServer.fail``): one ``ErrorAnswer`` per wire, since the vendors answer the same
trouble differently (Anthropic's overload is a 529 ``overloaded_error``, OpenAI's a 503
``server_is_overloaded``). The subscription headroom every good answer reports in its headers
(``ScriptedModelServer.set_quota``) is a ``quota.Quota``; a spent window's 429 uses it.

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

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from adapters.scripted_model import responses_wire, wire
from adapters.scripted_model.quota import (
    Quota,
    SecondsUntil,
    Value,
    Window,
    WindowName,
    Wire,
    aware,
    header_value,
)


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
        return {name: str(header_value(value, now)) for name, value in self.headers}

    def field_values(self, now: datetime) -> dict[str, Any]:
        return {name: header_value(value, now) for name, value in self.fields}


@dataclass(frozen=True)
class Reply:
    """What the server sends for a faulted request: status, headers, JSON body."""

    status: int
    headers: Mapping[str, str]
    body: Mapping[str, Any]
    message: str


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
        spent = Window(1.0, aware(resets_at))
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

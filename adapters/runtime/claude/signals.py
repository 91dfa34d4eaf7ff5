"""What a live claude run says of the model API, as runtime-neutral ``RunSignal`` s.

The ``claude`` CLI (and the Agent SDK, which runs it) streams, besides the conversation:

- ``{"type":"system","subtype":"api_retry","attempt":N,"max_retries":M,"retry_delay_ms":D,
  "error_status":529|429|…|null,"error":"overloaded"|"rate_limit"|"authentication_failed"|
  "server_error"|"unknown"|…}`` each time a model request failed and it will try again
  ("unknown" with no status is a request that got no answer at all: a refused connection, a
  reset, a timeout);
- ``{"type":"rate_limit_event","rate_limit_info":{"status":"allowed"|"allowed_warning"|
  "rejected","resetsAt":<epoch s>,"rateLimitType":"five_hour"|"seven_day"|…,
  "utilization":0..1,…}}`` when a subscription's usage window changes state (never with an
  API key).

``ClaudeSignals`` turns those into signals, one per event that says something, and says
``recovered`` at the first assistant message after retries: the model answers again.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from adapters.runtime.signals import SignalSink, as_epoch, as_fraction, as_int
from domain.models import QuotaWindow, RetryCause, RunSignal

__all__ = ["ANTHROPIC", "ClaudeSignals"]

ANTHROPIC = "anthropic"

# The claude CLI's ``api_retry`` ``error`` categories, in cpe's words.
_CLAUDE_CAUSES: dict[str, RetryCause] = {
    "overloaded": "overloaded",
    "rate_limit": "rate_limit",
    "authentication_failed": "authentication",
    "server_error": "server_error",
    "cloud_credential_error": "authentication",
    "unknown": "unreachable",
}

# The run's final text when a subscription's usage window is spent, e.g. "You've hit your
# 5-hour limit · resets 10:30pm (UTC)".
_LIMIT_HIT = re.compile(r"hit your (?P<window>[\w -]+?) limit", re.IGNORECASE)
_WINDOW_WORDS = {"5-hour": "five_hour", "weekly": "seven_day", "7-day": "seven_day"}


class ClaudeSignals:
    """The signals of one claude run's stream-json events (``event(raw)`` per event)."""

    account = ANTHROPIC

    def __init__(self, sink: SignalSink) -> None:
        self.sink = sink
        self.retrying = False

    def event(self, event: Mapping[str, Any]) -> None:
        signal = self.signal(event)
        if signal is not None:
            self.sink(signal)

    def signal(self, event: Mapping[str, Any]) -> RunSignal | None:
        kind = event.get("type")
        if kind == "system" and event.get("subtype") == "api_retry":
            self.retrying = True
            return _claude_retry(event, self.account)
        if kind == "rate_limit_event":
            info = event.get("rate_limit_info")
            return _claude_rate_limit(info, self.account) if isinstance(info, Mapping) else None
        if kind == "assistant" and self.retrying:
            self.retrying = False
            return RunSignal(kind="recovered", account=self.account)
        if kind == "result":
            return _claude_limit_result(event, self.account)
        return None


def _claude_retry(event: Mapping[str, Any], account: str) -> RunSignal:
    category = str(event.get("error") or "unknown")
    status = event.get("error_status")
    cause = _CLAUDE_CAUSES.get(category, "other")
    if cause == "other" and isinstance(status, int):
        cause = _status_cause(status)
    detail = category if status is None else f"HTTP {status} {category}"
    if status is None and category == "unknown":
        detail = "no answer: connection refused, reset or timed out"
    delay = event.get("retry_delay_ms")
    return RunSignal(
        kind="retrying",
        account=account,
        cause=cause,
        detail=detail,
        attempt=as_int(event.get("attempt")),
        max_attempts=as_int(event.get("max_retries")),
        retry_in=delay / 1000 if isinstance(delay, int | float) else None,
    )


def _status_cause(status: int) -> RetryCause:
    if status in (401, 403):
        return "authentication"
    if status == 429:
        return "rate_limit"
    if status == 529:
        return "overloaded"
    return "server_error" if status >= 500 else "other"


def _claude_rate_limit(info: Mapping[str, Any], account: str) -> RunSignal:
    """The window the event is about, and every window of ``unifiedWindows`` when the CLI
    gives them (a subscription's 5-hour and 7-day windows, each with its own use and reset)."""
    status = info.get("status")
    window = _claude_window(str(info.get("rateLimitType") or "unified"), info)
    windows = {window.name: window}
    unified = info.get("unifiedWindows")
    for name, each in unified.items() if isinstance(unified, Mapping) else ():
        if isinstance(each, Mapping):
            windows[str(name)] = _claude_window(str(name), each)
    if status == "rejected":
        return RunSignal(
            kind="rate_limited",
            account=account,
            until=window.resets_at,
            window=window.name,
            windows=tuple(windows.values()),
        )
    return RunSignal(kind="quota", account=account, windows=tuple(windows.values()))


def _claude_window(name: str, info: Mapping[str, Any]) -> QuotaWindow:
    status = info.get("status")
    return QuotaWindow(
        name=name,
        utilization=as_fraction(info.get("utilization")),
        resets_at=as_epoch(info.get("resetsAt")),
        status=status if status in ("allowed", "allowed_warning", "rejected") else None,
    )


def _claude_limit_result(event: Mapping[str, Any], account: str) -> RunSignal | None:
    """A run the CLI ended because a usage window is spent: its result says so (the
    ``rate_limit_event`` before it, when there was one, gave the reset time)."""
    if not event.get("is_error"):
        return None
    text = str(event.get("result") or "")
    limited = event.get("api_error") == "usage_limit_reached" or _LIMIT_HIT.search(text)
    if not limited:
        return None
    found = _LIMIT_HIT.search(text)
    window = _WINDOW_WORDS.get(found.group("window").strip().lower()) if found else None
    return RunSignal(kind="rate_limited", account=account, window=window, detail=text[:200])

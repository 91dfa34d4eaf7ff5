"""What a live run's CLI says of the model API, as runtime-neutral ``RunSignal`` s.

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
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any, Protocol

from domain.models import QuotaWindow, RetryCause, RunSignal

SignalSink = Callable[[RunSignal], None]


class RunSignals(Protocol):
    """Reads one run's native events (``event(raw)``, from a reader thread) and tells its sink
    what they say of the model API."""

    def event(self, event: Mapping[str, Any]) -> None: ...


SignalsFactory = Callable[[SignalSink], RunSignals]

ANTHROPIC = "anthropic"
OPENAI = "openai"

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
        attempt=_int(event.get("attempt")),
        max_attempts=_int(event.get("max_retries")),
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
        utilization=_fraction(info.get("utilization")),
        resets_at=_epoch(info.get("resetsAt")),
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


# codex 0.169's ``error`` events while it retries: "Reconnecting... 2/5 (<why>)", or, with no
# connection at all, "Reconnecting... waiting for network (<why>)".
_RECONNECTING = re.compile(
    r"^Reconnecting\.\.\.\s*(?:(?P<attempt>\d+)/(?P<of>\d+)|waiting for network)"
    r"\s*(?:\((?P<why>.*)\))?",
    re.IGNORECASE | re.DOTALL,
)
_CODEX_CAUSE_WORDS: tuple[tuple[str, RetryCause], ...] = (
    (r"waiting for network|Connection failed|error sending request|stream disconnected"
     r"|connection refused|timed out", "unreachable"),
    (r"at capacity|overloaded|\b529\b|\b503\b", "overloaded"),
    (r"\b429\b|Too Many Requests|rate limit", "rate_limit"),
    (r"\b40[13]\b|Unauthorized|Forbidden|API key", "authentication"),
    (r"high demand|temporary errors|\b5\d\d\b|server error", "server_error"),
)  # fmt: skip
_CODEX_CAUSES = tuple((re.compile(p, re.IGNORECASE), c) for p, c in _CODEX_CAUSE_WORDS)
# codex's windows: the primary is the 5-hour one, the secondary the weekly one.
_CODEX_WINDOWS = {"primary": "five_hour", "secondary": "seven_day"}


class CodexSignals:
    """The signals of one codex run: its stdout ``error`` events while it retries, the
    ``turn.failed`` that ends it, and the ``token_count`` readings of its session log
    (``rate_limits``: the primary and secondary windows' ``used_percent`` and ``resets_at``),
    which the runner passes on as they come (codex prints them nowhere else)."""

    account = OPENAI

    def __init__(self, sink: SignalSink) -> None:
        self.sink = sink
        self.retrying = False
        self.spent: set[str] = set()  # windows already said to be spent

    def event(self, event: Mapping[str, Any]) -> None:
        for signal in self.signals(event):
            self.sink(signal)

    def signals(self, event: Mapping[str, Any]) -> list[RunSignal]:
        kind = event.get("type")
        if kind == "error" and isinstance(event.get("message"), str):
            found = _RECONNECTING.match(event["message"])
            if found is None:
                return []
            self.retrying = True
            why = (found.group("why") or event["message"]).strip()
            return [
                RunSignal(
                    kind="retrying",
                    account=self.account,
                    cause=_codex_cause(event["message"]),
                    detail=why,
                    attempt=int(found.group("attempt")) if found.group("attempt") else None,
                    max_attempts=int(found.group("of")) if found.group("of") else None,
                )
            ]
        if kind == "token_count" and isinstance(event.get("rate_limits"), Mapping):
            return self._limits(event["rate_limits"])
        if kind in ("item.started", "item.completed", "turn.completed") and self.retrying:
            self.retrying = False
            return [RunSignal(kind="recovered", account=self.account)]
        return []

    def _limits(self, limits: Mapping[str, Any]) -> list[RunSignal]:
        windows = []
        for key, name in _CODEX_WINDOWS.items():
            reading = limits.get(key)
            if not isinstance(reading, Mapping):
                continue
            used = reading.get("used_percent")
            fraction = _fraction(used / 100) if isinstance(used, int | float) else None
            spent = fraction is not None and fraction >= 1
            windows.append(
                QuotaWindow(
                    name=name,
                    utilization=fraction,
                    resets_at=_epoch(reading.get("resets_at")),
                    status="rejected" if spent else "allowed",
                )
            )
        if not windows:
            return []
        signals = [RunSignal(kind="quota", account=self.account, windows=tuple(windows))]
        for window in windows:
            if window.status == "rejected" and window.name not in self.spent:
                self.spent.add(window.name)
                signals.append(
                    RunSignal(
                        kind="rate_limited",
                        account=self.account,
                        until=window.resets_at,
                        window=window.name,
                        windows=tuple(windows),
                    )
                )
        return signals


def _codex_cause(message: str) -> RetryCause:
    for pattern, cause in _CODEX_CAUSES:
        if pattern.search(message):
            return cause
    return "other"


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _fraction(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if 0 <= value <= 1 else None


def _epoch(value: object) -> datetime | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        return None
    try:
        return datetime.fromtimestamp(value, UTC)
    except (OverflowError, OSError, ValueError):
        return None

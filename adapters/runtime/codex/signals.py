"""What a live codex run says of the model API, as runtime-neutral ``RunSignal`` s: its stdout
``error`` events while it retries, the ``turn.failed`` that ends it, and its account's rate
limits, read from its session log (``CodexSignals``)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from adapters.runtime.signals import SignalSink, as_epoch, as_fraction
from domain.models import QuotaWindow, RetryCause, RunSignal

__all__ = ["OPENAI", "CodexSignals"]

OPENAI = "openai"

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
            fraction = as_fraction(used / 100) if isinstance(used, int | float) else None
            spent = fraction is not None and fraction >= 1
            windows.append(
                QuotaWindow(
                    name=name,
                    utilization=fraction,
                    resets_at=as_epoch(reading.get("resets_at")),
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

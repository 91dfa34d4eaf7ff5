"""A live run's word on the model API (``RunSignal``) in a person's words, one line each, as
``cpe status``, the console and the dashboard show it. Pure."""

from __future__ import annotations

from datetime import datetime

from domain.models import QuotaWindow, RetryCause, RunSignal

CAUSES: dict[RetryCause, str] = {
    "unreachable": "the model API is unreachable",
    "overloaded": "the model API is overloaded",
    "server_error": "the model API fails (a server error)",
    "authentication": "the model API refuses the credential",
    "rate_limit": "the model API rate-limits the account",
    "other": "a model request failed",
}

WINDOWS = {"five_hour": "5-hour", "seven_day": "7-day", "seven_day_opus": "7-day Opus"}


def describe_cause(signal: RunSignal) -> str:
    """What a retry says of the model API, without the run's own retry count:
    ``the model API is unreachable (no answer: connection refused …)``: an outage's reason."""
    words = CAUSES.get(signal.cause or "other", CAUSES["other"])
    return f"{words} ({_flat(signal.detail, 120)})" if signal.detail else words


def describe_signal(signal: RunSignal) -> str:
    """``retrying: the model API is unreachable (ECONNREFUSED), retry 4/10 in 8 s`` …"""
    if signal.kind == "retrying":
        words = CAUSES.get(signal.cause or "other", CAUSES["other"])
        if signal.detail:
            words += f" ({_flat(signal.detail, 120)})"
        if signal.attempt is not None:
            of = f"/{signal.max_attempts}" if signal.max_attempts else ""
            words += f", retry {signal.attempt}{of}"
            if signal.retry_in is not None:
                words += f" in {_seconds(signal.retry_in)}"
        return f"retrying: {words}"
    if signal.kind == "recovered":
        return "the model answers again"
    if signal.kind == "rate_limited":
        window = window_name(signal.window) if signal.window else "the account's limit"
        until = f" until {clock(signal.until)}" if signal.until else ""
        detail = f" ({_flat(signal.detail, 120)})" if signal.detail else ""
        return f"rate-limited: {window} spent{until}{detail}"
    return f"headroom: {describe_windows(signal.windows)}"


def describe_windows(windows: tuple[QuotaWindow, ...]) -> str:
    """``5-hour 42% used (resets 10:30 UTC), 7-day 10% used``; ``unknown`` for none."""
    parts = []
    for window in windows:
        used = f"{window.utilization:.0%} used" if window.utilization is not None else "used ?"
        text = f"{window_name(window.name)} {used}"
        if window.status == "rejected":
            text += ", spent"
        if window.resets_at is not None:
            text += f" (resets {clock(window.resets_at)})"
        parts.append(text)
    return ", ".join(parts) or "unknown"


def window_name(name: str) -> str:
    return WINDOWS.get(name, name.replace("_", " "))


def clock(at: datetime) -> str:
    return at.strftime("%Y-%m-%d %H:%M UTC")


def _seconds(value: float) -> str:
    return f"{value:.0f} s" if value >= 1 else f"{value:.1f} s"


def _flat(text: str, limit: int) -> str:
    return " ".join(text.split())[:limit]

"""A subscription's headroom, as the model APIs report it in the headers of every good answer.

A ``Quota`` (one ``Window`` per usage window) is what the scripted model reports while the
server has it (``ScriptedModelServer.set_quota``): the Anthropic ``anthropic-ratelimit-unified-*``
headers as the ``claude`` CLI 2.1.332 parses them, and codex's ``x-codex-primary-*`` (the
five-hour window) / ``x-codex-secondary-*`` (the weekly one). A spent window's 429 is a
``faults.Fault.usage_limit``. Also here: the values both count down when the answer is sent
(``SecondsUntil``), and the wire names (``Wire``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Literal

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
class Window:
    """One usage window of a subscription: the fraction of it spent (``used``, 0..1; the API
    reports a little over 1 once it is overrun) and when it starts afresh (timezone-aware)."""

    used: float
    resets_at: datetime

    def __post_init__(self) -> None:
        aware(self.resets_at)
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
        return {name: str(header_value(value, now)) for name, value in self.codex_header_values()}

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


def header_value(value: Value, now: datetime) -> str | int | float | bool | None:
    return value.at(now) if isinstance(value, SecondsUntil) else value


def _number(value: float) -> str:
    # 0.42 → "0.42", 100.0 → "100": as the APIs write them.
    return f"{value:g}"


def aware(moment: datetime) -> datetime:
    if moment.tzinfo is None:
        raise ValueError(f"a reset time must be timezone-aware, not {moment.isoformat()}")
    return moment

"""What a live run's agent CLI says of the model API, as runtime-neutral ``RunSignal`` s: the
role (``RunSignals``) each vendor's reader plays (``adapters/runtime/claude/signals.py``,
``adapters/runtime/codex/signals.py``) and the readings they share."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any, Protocol

from domain.models import RunSignal

__all__ = ["RunSignals", "SignalSink", "SignalsFactory", "as_epoch", "as_fraction", "as_int"]

SignalSink = Callable[[RunSignal], None]


class RunSignals(Protocol):
    """Reads one run's native events (``event(raw)``, from a reader thread) and tells its sink
    what they say of the model API."""

    def event(self, event: Mapping[str, Any]) -> None: ...


SignalsFactory = Callable[[SignalSink], RunSignals]


def as_int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def as_fraction(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if 0 <= value <= 1 else None


def as_epoch(value: object) -> datetime | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        return None
    try:
        return datetime.fromtimestamp(value, UTC)
    except (OverflowError, OSError, ValueError):
        return None

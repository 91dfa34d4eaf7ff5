"""The vendor fakes' time: their clocks start at ``EPOCH_START`` and tick one second an event,
and timestamps are written and read as the vendors do."""

from __future__ import annotations

from datetime import UTC, datetime

EPOCH_START = 1_767_225_600  # 2026-01-01T00:00:00Z: the fakes' clocks start here


def iso(stamp: int | None) -> str | None:
    """GitHub's timestamps: UTC to the second (``2026-01-01T00:00:00Z``)."""
    if stamp is None:
        return None
    return datetime.fromtimestamp(stamp, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def iso_ms(stamp: int | None) -> str | None:
    """GitLab's timestamps: UTC with milliseconds (``2026-01-01T00:00:00.000Z``)."""
    if stamp is None:
        return None
    return datetime.fromtimestamp(stamp, UTC).strftime("%Y-%m-%dT%H:%M:%S.000Z")


def parse_iso(text: str) -> int:
    """A timestamp a client sent (``since``, ``updated_after``): ISO 8601, any offset."""
    return int(datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp())

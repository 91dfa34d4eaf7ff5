"""Shared test configuration. Fixtures live next to the tests that use them."""

from __future__ import annotations

import io

import pytest

from actors.logs import configure_logging


class _Discard(io.TextIOBase):
    """A log stream that keeps nothing (not a TTY: the JSON renderer runs)."""

    def write(self, text: str) -> int:
        return len(text)

    def writable(self) -> bool:
        return True


@pytest.fixture(autouse=True, scope="session")
def _quiet_structured_logs() -> None:
    """cpe's real logging pipeline (redaction, JSON rendering) runs in every test, into a sink:
    without it structlog's default prints to stdout, and lines from a run's background threads
    land in pytest's progress output. Tests that check log lines capture them themselves."""
    configure_logging("info", "json", _Discard())

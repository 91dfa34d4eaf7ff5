"""Fixtures shared by the end-to-end tests."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator

import pytest


@pytest.fixture
def processes() -> Iterator[list[subprocess.Popen[str]]]:
    """The ``cpe`` processes a test starts: any still running at its end is killed."""
    started: list[subprocess.Popen[str]] = []
    yield started
    for process in started:
        if process.poll() is None:
            process.kill()
            process.wait(30)


def pytest_report_header() -> str:
    from tests.e2e.crash import cases, selected  # noqa: PLC0415

    every, chosen = cases(), selected(cases())
    which = "all" if len(chosen) == len(every) else "chosen by the commit; make crash-all runs all"
    points = len({c.point for c in every})
    return (
        f"crash suite: {points} crashpoints, {len(every)} cases; this run: {len(chosen)} ({which})"
    )

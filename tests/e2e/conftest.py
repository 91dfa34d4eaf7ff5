"""Fixtures shared by the end-to-end tests."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from typing import Any

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
        for pipe in (process.stdout, process.stderr):
            if pipe is not None:
                pipe.close()


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """The crash suite's coverage, in the output even with ``-q``: how many crashpoints the
    code has, how many cases cover them, and how many this run took."""
    from tests.e2e.crash import cases, selected  # noqa: PLC0415

    ran = [
        report
        for report in terminalreporter.stats.get("passed", [])
        + terminalreporter.stats.get("failed", [])
        if "test_a_crash_at_the_point" in report.nodeid and report.when == "call"
    ]
    if not ran:
        return
    every, chosen = cases(), selected(cases())
    which = "all" if len(chosen) == len(every) else "chosen by the commit; make crash-all runs all"
    points = len({c.point for c in every})
    terminalreporter.write_line(
        f"crash suite: {points} crashpoints, {len(every)} cases; this run: {len(ran)} ({which})"
    )

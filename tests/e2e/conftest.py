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
    code has, how many cases cover them (on the local provider, on GitHub and on GitLab), and
    how many this run took."""
    from adapters.support.crashpoints import POINTS  # noqa: PLC0415
    from tests.e2e.crash import cases, github_cases, gitlab_cases  # noqa: PLC0415

    def ran(test: str) -> int:
        return sum(
            1
            for report in terminalreporter.stats.get("passed", [])
            + terminalreporter.stats.get("failed", [])
            if test in report.nodeid and report.when == "call"
        )

    local, github = ran("test_a_crash_at_the_point"), ran("test_a_kill_at_a_github_write")
    gitlab = ran("test_a_kill_at_a_gitlab_write")
    if not local and not github and not gitlab:
        return
    terminalreporter.write_line(
        f"crash suite: {len(POINTS)} crashpoints; cases: {len(cases())} local, "
        f"{len(github_cases())} on GitHub, {len(gitlab_cases())} on GitLab; this run: {local} "
        f"local, {github} on GitHub, {gitlab} on GitLab (by default chosen by the commit; make "
        "crash-all runs all)"
    )


# A whole `cpe run` with real CLIs waits on conditions for minutes when the machine is loaded
# (each wait names its own bound); the suite-wide 120 s hang guard would cut those waits short.
E2E_TIMEOUT = 600


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.get_closest_marker("timeout") is None and "tests/e2e/" in item.nodeid:
            item.add_marker(pytest.mark.timeout(E2E_TIMEOUT))

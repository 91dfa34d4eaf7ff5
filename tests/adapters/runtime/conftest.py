"""Fixtures shared by the runtime tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fakes.claude_cli_fixture import FakeClaude


@pytest.fixture
def fake(tmp_path: Path) -> Iterator[FakeClaude]:
    """The fake ``claude`` CLI, installed for this test; whatever it left running is reaped."""
    cli = FakeClaude.install(tmp_path / "fake")
    yield cli
    cli.reap()  # nothing should be left; this only keeps a failing test from leaking

"""The fake ``claude`` and ``codex`` CLIs (``tests/fakes/``) installed for a test, as fixtures
with distinct names: ``fake_claude`` and ``fake_codex``.

Both install under ``tmp_path / "fake"`` (as each module's own copy did), so a test asks for one
of them, not both.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fakes.claude_cli_fixture import FakeClaude
from tests.fakes.codex_cli_fixture import FakeCodex


@pytest.fixture
def fake_claude(tmp_path: Path) -> Iterator[FakeClaude]:
    """The fake ``claude`` CLI, installed for this test; whatever it left running is reaped."""
    cli = FakeClaude.install(tmp_path / "fake")
    yield cli
    cli.reap()  # nothing should be left; this only keeps a failing test from leaking


@pytest.fixture
def fake_codex(tmp_path: Path) -> FakeCodex:
    """The fake ``codex`` CLI, installed for this test."""
    return FakeCodex.install(tmp_path / "fake")

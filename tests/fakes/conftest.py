"""Fixtures for the fakes' own tests, from ``tests/support/``."""

from tests.support.clis import fake_claude, fake_codex

__all__ = ["fake_claude", "fake_codex"]

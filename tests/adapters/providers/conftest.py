"""Fixtures for the provider tests, from ``tests/support/``."""

from tests.support.github import fake_github

__all__ = ["fake_github"]

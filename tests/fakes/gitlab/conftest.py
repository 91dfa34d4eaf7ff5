"""Fixtures for the fake GitLab's own tests, from ``tests/support/``."""

from tests.support.gitlab import fake_gitlab

__all__ = ["fake_gitlab"]

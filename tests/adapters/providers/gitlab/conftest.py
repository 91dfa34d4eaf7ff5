"""Fixtures for the GitLab provider's tests, from ``tests/support/``."""

from tests.support.gitlab import fake_gitlab

__all__ = ["fake_gitlab"]

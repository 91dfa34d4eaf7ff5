"""Fixtures for the Linear provider's tests, from ``tests/support/``."""

from tests.support.linear import fake_linear

__all__ = ["fake_linear"]

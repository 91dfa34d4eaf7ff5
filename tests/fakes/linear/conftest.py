"""Fixtures for the fake Linear's own tests."""

from tests.support.linear import fake_linear

__all__ = ["fake_linear"]

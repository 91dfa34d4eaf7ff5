"""Shared test configuration. Fixtures live next to the tests that use them."""

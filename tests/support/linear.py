"""The fake Linear (``tests/fakes/linear/``) started for a test: for the Linear provider's
tests, the end-to-end loop and the fake's own tests.

``fake_linear`` is the fixture: a fresh fake with its default people and tokens (``API_KEY``,
the bot's personal API key, also put in ``TOKEN_ENV`` for code that reads the token from the
environment). A module that needs the fake built differently (tokens, a clock) overrides
``fake_linear`` with ``running_linear(monkeypatch, **options)``. The provider's harness is
``tests/support/linear_provider.py``.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache
from typing import Any

import httpx
import pytest

from tests.fakes.linear.fake import API_KEY, FakeLinear

TOKEN_ENV = "CPE_TEST_LINEAR_TOKEN"


@contextmanager
def running_linear(
    monkeypatch: pytest.MonkeyPatch, token: str = API_KEY, **options: Any
) -> Iterator[FakeLinear]:
    """A fake Linear, ``token`` set in ``TOKEN_ENV``; ``options`` go to ``FakeLinear``
    (``tokens``, ``now``)."""
    monkeypatch.setenv(TOKEN_ENV, token)
    with FakeLinear(**options) as linear:
        yield linear


@pytest.fixture
def fake_linear(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeLinear]:
    """A fresh fake Linear for this test (see ``running_linear``)."""
    with running_linear(monkeypatch) as linear:
        yield linear


def graphql(
    linear: FakeLinear,
    query: str,
    variables: dict[str, Any] | None = None,
    *,
    authorization: str | None = API_KEY,
    operation_name: str | None = None,
) -> httpx.Response:
    """One plain POST to the fake's endpoint (``authorization`` None: no header), to see
    Linear's answers as they are sent."""
    headers = {"Authorization": authorization} if authorization is not None else {}
    body: dict[str, Any] = {"query": query, "variables": variables or {}}
    if operation_name is not None:
        body["operationName"] = operation_name
    return _client().post(linear.url, json=body, headers=headers)


@cache
def _client() -> httpx.Client:
    """One client for every plain post (making one costs ~40 ms: its TLS context)."""
    return httpx.Client(timeout=30)


class ManualClock:
    """A clock a test moves by hand (``now``, epoch seconds): the fake's rate-limit buckets
    refill by it, so a test reaches a refill without waiting."""

    def __init__(self, now: float = 2_000_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

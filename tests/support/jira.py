"""The fake Jira (``tests/fakes/jira/``) started for a test: for the Jira provider's tests, the
end-to-end loop and the fake's own tests.

``fake_jira`` is the fixture: a fresh Cloud fake taking the token ``TOKEN`` (``cpe-bot``'s).
A module that needs it built differently (Data Center, other tokens, a clock, the classic
workflow) overrides ``fake_jira`` with ``running_jira(**options)``. ``check_against_openapi``
holds every request a fake answered to Atlassian's description (the subset the fake serves).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import pytest

from tests.fakes.jira import FakeJira
from tests.fakes.jira.openapi import subset

TOKEN_ENV = "CPE_TEST_JIRA_TOKEN"
TOKEN = "test-token"


@contextmanager
def running_jira(*, conform: bool = True, **options: Any) -> Iterator[FakeJira]:
    """A fake Jira; ``options`` go to ``FakeJira`` (``deployment``, ``tokens``, ``now``,
    ``workflow``). ``conform``: at the end, every request it answered is checked against the
    OpenAPI subset (``check_against_openapi``)."""
    with FakeJira(**options) as jira:
        jira.keep_responses = conform
        yield jira
        if conform:
            check_against_openapi(jira)


@pytest.fixture
def fake_jira() -> Iterator[FakeJira]:
    """A fresh fake Jira Cloud for this test (see ``running_jira``)."""
    with running_jira() as jira:
        yield jira


def check_against_openapi(jira: FakeJira) -> int:
    """Every request ``jira`` answered (with ``keep_responses`` on), checked against the
    subset: each answer's status and body, and each accepted request's query and body (what
    the fake accepted, Jira's description must allow). An AssertionError names the first that
    does not fit. Returns how many were checked."""
    checked = 0
    for request in list(jira.requests):
        if request.route is None or request.status in (0, 401, 429):
            continue  # no Jira operation answered (unknown path, no credentials, throttled)
        if 200 <= request.status < 300:  # a request Jira refuses may well be malformed
            subset().check_request(request.method, request.path, request.query, request.body)
        else:
            subset().operation(request.method, request.path)
        raw = request.response or b""
        body = json.loads(raw) if raw[:1] in (b"{", b"[") else None
        subset().check_answer(request.method, request.path, request.status, body)
        checked += 1
    return checked


def jira_client(jira: FakeJira, token: str | None = TOKEN) -> httpx.Client:
    """Plain HTTP under the deployment's REST root (``/rest/api/3`` or ``/2``) as ``token``'s
    user (None: no credentials), to see Jira's answers as they are sent."""
    headers = jira.auth_header(token) if token is not None else {}
    return httpx.Client(base_url=jira.rest_url, headers=headers)


class ManualClock:
    """A clock a test moves by hand (``now``, epoch seconds): the fake's rate-limit window is
    judged by it, so a test reaches a reset without waiting."""

    def __init__(self, now: float = 2_000_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

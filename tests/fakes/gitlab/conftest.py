"""Fixtures for the fake GitLab's own tests: a fake on GitLab Free and one on Premium, both
taking the tokens of ``TOKENS`` (people of every access level, and a token that only reads),
their rate-limit window judged by ``clock``."""

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fakes.gitlab import FakeGitLab, Token
from tests.support.gitlab import ManualClock, running_gitlab

TOKENS: dict[str, str | Token] = {
    "test-token": "cpe-bot",  # a Maintainer
    "developer-token": Token("dev", 30),
    "reporter-token": Token("rep", 20),
    "guest-token": Token("guest", 10),
    "stranger-token": Token("passer.by", 0),
    "reader-token": Token("reader", 30, ("read_api",)),
}


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def fake_gitlab(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, clock: ManualClock
) -> Iterator[FakeGitLab]:
    with running_gitlab(tmp_path, monkeypatch, tokens=TOKENS, now=clock) as gl:
        yield gl


@pytest.fixture
def premium(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeGitLab]:
    with running_gitlab(tmp_path, monkeypatch, tokens=TOKENS, tier="premium") as gl:
        yield gl

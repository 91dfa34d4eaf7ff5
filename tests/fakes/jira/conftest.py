"""Fixtures for the fake Jira's own tests: a Cloud fake and a Data Center fake, both checked
against the OpenAPI subset at the end of each test (``tests/support/jira.py``)."""

from collections.abc import Iterator

import pytest

from tests.fakes.jira import FakeJira
from tests.support.jira import ManualClock, fake_jira, running_jira

__all__ = ["fake_jira"]


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def data_center() -> Iterator[FakeJira]:
    with running_jira(deployment="data_center", tokens={"pat-token": "cpe-bot"}) as jira:
        yield jira

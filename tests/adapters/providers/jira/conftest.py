"""Fixtures for the Jira provider's tests: the fake Jira on Cloud and on Data Center, with a
status for each of cpe's statuses."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fakes.jira import FakeJira
from tests.support.jira import running_jira
from tests.support.jira_provider import full_workflow


@pytest.fixture(params=["cloud", "data_center"])
def jira(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[FakeJira]:
    """The fake Jira, on each deployment in turn, its workflow complete."""
    with running_jira(root=tmp_path, deployment=request.param) as fake:
        yield full_workflow(fake)


@pytest.fixture
def cloud(tmp_path: Path) -> Iterator[FakeJira]:
    with running_jira(root=tmp_path, deployment="cloud") as fake:
        yield full_workflow(fake)

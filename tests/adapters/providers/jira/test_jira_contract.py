"""The work item contract, run against the Jira provider and the fake Jira: on Cloud (REST v3,
ADF, account ids, the nextPageToken search) and on Data Center (REST v2, wiki markup, user
names, the startAt search)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.adapters.providers.contract import WorkItemContract
from tests.support.jira import running_jira
from tests.support.jira_provider import JiraHarness, full_workflow, jira_provider


class TestJiraCloudWorkItems(WorkItemContract):
    @pytest.fixture
    def harness(self, tmp_path: Path) -> Iterator[JiraHarness]:
        with (
            running_jira(root=tmp_path, deployment="cloud") as fake,
            jira_provider(full_workflow(fake)) as provider,
        ):
            yield JiraHarness(fake, provider)


class TestJiraDataCenterWorkItems(WorkItemContract):
    @pytest.fixture
    def harness(self, tmp_path: Path) -> Iterator[JiraHarness]:
        with (
            running_jira(root=tmp_path, deployment="data_center") as fake,
            jira_provider(full_workflow(fake)) as provider,
        ):
            yield JiraHarness(fake, provider)

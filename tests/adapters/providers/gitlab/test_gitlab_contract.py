"""The provider contract, run against the GitLab provider and the fake GitLab: whole, with both
roles on one project, and its work item part (the tracker alone) on Free and on Premium (where
blockers are issue links too)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from adapters.providers import ProviderRoles
from tests.adapters.providers.contract import ProviderContract, WorkItemContract
from tests.fakes.gitlab import FakeGitLab
from tests.support.gitlab import running_gitlab
from tests.support.gitlab_provider import GitLabHarness, gitlab_provider


class TestGitLabWorkItems(WorkItemContract):
    @pytest.fixture
    def harness(self, fake_gitlab: FakeGitLab) -> Iterator[GitLabHarness]:
        with gitlab_provider(fake_gitlab, roles=ProviderRoles(revisions=False)) as provider:
            yield GitLabHarness(fake_gitlab, provider)


class TestGitLabPremiumWorkItems(WorkItemContract):
    @pytest.fixture
    def harness(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[GitLabHarness]:
        with (
            running_gitlab(tmp_path, monkeypatch, tier="premium") as fake,
            gitlab_provider(fake, roles=ProviderRoles(revisions=False)) as provider,
        ):
            yield GitLabHarness(fake, provider)


class TestGitLabProvider(ProviderContract):
    """Both roles on one project: the tracker and the forge (merge requests)."""

    @pytest.fixture
    def harness(self, fake_gitlab: FakeGitLab) -> Iterator[GitLabHarness]:
        with gitlab_provider(fake_gitlab) as provider:
            yield GitLabHarness(fake_gitlab, provider)

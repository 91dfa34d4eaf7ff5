"""The provider contract, run against the GitHub provider and the fake GitHub."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.adapters.providers.contract import ProviderContract
from tests.fakes.github import FakeGitHub
from tests.support.github import GitHubHarness, github_provider


class TestGitHubProvider(ProviderContract):
    @pytest.fixture
    def harness(self, fake_github: FakeGitHub) -> Iterator[GitHubHarness]:
        with github_provider(fake_github) as provider:
            yield GitHubHarness(fake_github, provider)

"""The provider contract, run against the GitHub provider and the fake GitHub."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.adapters.providers.contract import ProviderContract
from tests.adapters.providers.edits import BASE_FILES
from tests.adapters.providers.github_harness import GitHubHarness, github_provider
from tests.fakes.github import FakeGitHub
from tests.support.git import isolate_git


class TestGitHubProvider(ProviderContract):
    @pytest.fixture
    def harness(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[GitHubHarness]:
        isolate_git(monkeypatch)
        with FakeGitHub(tmp_path / "github") as fake:
            fake.seed(BASE_FILES)
            with github_provider(fake) as provider:
                yield GitHubHarness(fake, provider)

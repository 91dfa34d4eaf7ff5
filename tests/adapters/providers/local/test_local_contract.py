"""The provider contract, run against the embedded local provider."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

from adapters.providers.local import LocalProvider
from tests.adapters.providers.contract import ProviderContract
from tests.adapters.providers.edits import BASE_FILES
from tests.support.git import Content, Repo, isolate_git


class LocalHarness:
    def __init__(self, repo: Repo, provider: LocalProvider) -> None:
        self.repo = repo
        self.provider = provider
        self.work_item_reader = provider.work_item_reader
        self.work_item_writer = provider.work_item_writer
        self.revision_reader = provider.revision_reader
        self.revision_writer = provider.revision_writer
        self.default_branch = provider.default_branch
        self.git_dir = repo.root

    def commit_to_default(self, files: Mapping[str, Content | None], message: str) -> str:
        # The user's checkout is on the default branch: they commit to it.
        return self.repo.commit(message, files)


class TestLocalProvider(ProviderContract):
    @pytest.fixture
    def harness(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[LocalHarness]:
        isolate_git(monkeypatch)
        repo = Repo.create(tmp_path / "repo", BASE_FILES)
        with LocalProvider(repo.root, tmp_path / "state") as provider:
            yield LocalHarness(repo, provider)

"""The fake GitHub (``tests/fakes/github/``) started for a test, and the GitHub provider wired to
it, for the contract, the GitHub provider's tests and the fake's own tests.

``fake_github`` is the fixture: a fresh fake holding ``BASE_FILES``, git shielded from the
machine's configuration. A module that needs the fake built differently (tokens, an App, a
clock) overrides ``fake_github`` with ``running_github(tmp_path, monkeypatch, **options)``.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from adapters.providers.github import GitHubProvider, GitHubSettings
from tests.adapters.providers.edits import BASE_FILES
from tests.fakes.github import FakeGitHub
from tests.support.git import Content, isolate_git

TOKEN_ENV = "CPE_TEST_GITHUB_TOKEN"


@contextmanager
def running_github(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, **options: Any
) -> Iterator[FakeGitHub]:
    """A fake GitHub under ``tmp_path / "github"`` holding ``BASE_FILES`` on its default
    branch; ``options`` go to ``FakeGitHub`` (``tokens``, ``app``, ``now``)."""
    isolate_git(monkeypatch)
    with FakeGitHub(tmp_path / "github", **options) as github:
        github.seed(BASE_FILES)
        yield github


@pytest.fixture
def fake_github(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeGitHub]:
    """A fresh fake GitHub for this test (see ``running_github``)."""
    with running_github(tmp_path, monkeypatch) as github:
        yield github


class Sleeps:
    """Stands in for ``time.sleep``: records the waits asked for, waits for none."""

    def __init__(self) -> None:
        self.waits: list[float] = []

    def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)


def settings_for(fake_github: FakeGitHub, **overrides: Any) -> GitHubSettings:
    values: dict[str, Any] = {
        "repository": f"{fake_github.owner}/{fake_github.repo}",
        "base_url": fake_github.base_url + "/",
        "token_env": TOKEN_ENV,
        "request_timeout": 30,
    }
    return GitHubSettings(**{**values, **overrides})


@contextmanager
def github_provider(
    fake_github: FakeGitHub,
    sleeps: Sleeps | None = None,
    token: str = "test-token",
    **overrides: Any,
) -> Iterator[GitHubProvider]:
    with GitHubProvider(
        settings_for(fake_github, **overrides),
        environ={TOKEN_ENV: token},
        sleep=sleeps if sleeps is not None else Sleeps(),
    ) as provider:
        yield provider


class GitHubHarness:
    def __init__(self, fake_github: FakeGitHub, provider: GitHubProvider) -> None:
        self.fake_github = fake_github
        self.provider = provider
        self.work_item_reader = provider.work_item_reader
        self.work_item_writer = provider.work_item_writer
        self.revision_reader = provider.revision_reader
        self.revision_writer = provider.revision_writer
        self.default_branch = provider.default_branch
        self.git_dir: Path = fake_github.git.path

    def commit_to_default(self, files: Mapping[str, Content | None], message: str) -> str:
        # Someone else pushes to the default branch on GitHub.
        return self.fake_github.commit_to_default(files, message)

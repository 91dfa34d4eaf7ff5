"""The GitHub provider wired to a fresh fake GitHub, for the contract and the GitHub tests."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from adapters.github import GitHubProvider, GitHubSettings
from tests.fakes.github import FakeGitHub
from tests.support.git import Content

TOKEN_ENV = "CPE_TEST_GITHUB_TOKEN"


class Sleeps:
    """Stands in for ``time.sleep``: records the waits asked for, waits for none."""

    def __init__(self) -> None:
        self.waits: list[float] = []

    def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)


def settings_for(fake: FakeGitHub, **overrides: Any) -> GitHubSettings:
    values: dict[str, Any] = {
        "repository": f"{fake.owner}/{fake.repo}",
        "base_url": fake.base_url + "/",
        "token_env": TOKEN_ENV,
        "request_timeout": 30,
    }
    return GitHubSettings(**{**values, **overrides})


@contextmanager
def github_provider(
    fake: FakeGitHub, sleeps: Sleeps | None = None, token: str = "test-token", **overrides: Any
) -> Iterator[GitHubProvider]:
    with GitHubProvider(
        settings_for(fake, **overrides),
        environ={TOKEN_ENV: token},
        sleep=sleeps if sleeps is not None else Sleeps(),
    ) as provider:
        yield provider


class GitHubHarness:
    def __init__(self, fake: FakeGitHub, provider: GitHubProvider) -> None:
        self.fake = fake
        self.provider = provider
        self.work_item_reader = provider.work_item_reader
        self.work_item_writer = provider.work_item_writer
        self.revision_reader = provider.revision_reader
        self.revision_writer = provider.revision_writer
        self.default_branch = provider.default_branch
        self.git_dir: Path = fake.git.path

    def commit_to_default(self, files: Mapping[str, Content | None], message: str) -> str:
        # Someone else pushes to the default branch on GitHub.
        return self.fake.commit_to_default(files, message)

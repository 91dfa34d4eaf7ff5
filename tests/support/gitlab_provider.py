"""The GitLab provider wired to the fake GitLab (``tests/fakes/gitlab/``, started by
``tests/support/gitlab.py``), for the contract and the GitLab provider's own tests.

``gitlab_provider(fake_gitlab, ...)`` builds a provider on the fake with the test token;
``GitLabHarness`` is what the provider contract (``tests/adapters/providers/contract.py``)
takes: the port objects, the fake's bare repository and a way to push as someone else.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from adapters.providers import ProviderRoles
from adapters.providers.gitlab import GitLabProvider, GitLabSettings
from tests.fakes.gitlab import FakeGitLab
from tests.support.git import Content
from tests.support.gitlab import TOKEN_ENV


class Sleeps:
    """Stands in for ``time.sleep``: records the waits asked for, waits for none."""

    def __init__(self) -> None:
        self.waits: list[float] = []

    def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)


def settings_for(fake_gitlab: FakeGitLab, **overrides: Any) -> GitLabSettings:
    values: dict[str, Any] = {
        "project": fake_gitlab.project_path,
        "base_url": fake_gitlab.base_url,
        "token_env": TOKEN_ENV,
        "request_timeout": 30,
    }
    return GitLabSettings(**{**values, **overrides})


@contextmanager
def gitlab_provider(
    fake_gitlab: FakeGitLab,
    sleeps: Sleeps | None = None,
    token: str = "test-token",
    *,
    roles: ProviderRoles | None = None,
    state_dir: Path | None = None,
    **overrides: Any,
) -> Iterator[GitLabProvider]:
    """A provider on the fake, as cpe's own user (``token``: the fake's default token)."""
    with GitLabProvider(
        settings_for(fake_gitlab, **overrides),
        environ={TOKEN_ENV: token},
        sleep=sleeps if sleeps is not None else Sleeps(),
        roles=roles,
        state_dir=state_dir,
    ) as provider:
        yield provider


class GitLabHarness:
    def __init__(self, fake_gitlab: FakeGitLab, provider: GitLabProvider) -> None:
        self.fake_gitlab = fake_gitlab
        self.provider = provider
        self.work_item_reader = provider.work_item_reader
        self.work_item_writer = provider.work_item_writer
        self.revision_reader = provider.revision_reader
        self.revision_writer = provider.revision_writer
        self.default_branch = provider.default_branch
        self.git_dir: Path = fake_gitlab.git.path

    def commit_to_default(self, files: Mapping[str, Content | None], message: str) -> str:
        # Someone else pushes to the default branch on GitLab.
        return self.fake_gitlab.commit_to_default(files, message)

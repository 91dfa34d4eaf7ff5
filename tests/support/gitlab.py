"""The fake GitLab (``tests/fakes/gitlab/``) started for a test: for the GitLab provider's
tests, the end-to-end loop and the fake's own tests.

``fake_gitlab`` is the fixture: a fresh fake holding ``BASE_FILES`` on its default branch, git
shielded from the machine's configuration. A module that needs the fake built differently
(tokens, the Premium tier, a clock) overrides ``fake_gitlab`` with ``running_gitlab(tmp_path,
monkeypatch, **options)``. The provider's harness is ``tests/support/gitlab_provider.py``.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import gitlab
import httpx
import pytest
from gitlab.v4.objects import Project

from tests.adapters.providers.edits import BASE_FILES
from tests.fakes.gitlab import FakeGitLab
from tests.support.git import isolate_git

TOKEN_ENV = "CPE_TEST_GITLAB_TOKEN"


@contextmanager
def running_gitlab(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, **options: Any
) -> Iterator[FakeGitLab]:
    """A fake GitLab under ``tmp_path / "gitlab"`` holding ``BASE_FILES`` on its default
    branch; ``options`` go to ``FakeGitLab`` (``tokens``, ``tier``, ``now``, ``path``)."""
    isolate_git(monkeypatch)
    with FakeGitLab(tmp_path / "gitlab", **options) as gitlab:
        gitlab.seed(BASE_FILES)
        yield gitlab


@pytest.fixture
def fake_gitlab(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeGitLab]:
    """A fresh fake GitLab for this test (see ``running_gitlab``)."""
    with running_gitlab(tmp_path, monkeypatch) as gitlab:
        yield gitlab


def gitlab_project(gl: FakeGitLab, token: str = "test-token") -> Project:
    """The fake's project through python-gitlab (lazy: no request until used), as ``token``."""
    client = gitlab.Gitlab(gl.base_url, private_token=token, retry_transient_errors=False)
    return client.projects.get(gl.project_path, lazy=True)


def project_api(gl: FakeGitLab, token: str | None = "test-token") -> httpx.Client:
    """Plain HTTP under ``/api/v4/projects/:id`` as ``token`` (None: anonymous), to see
    GitLab's answers as they are sent."""
    headers = {"PRIVATE-TOKEN": token} if token else {}
    return httpx.Client(base_url=f"{gl.api_url}/projects/{gl.project_id}", headers=headers)


class ManualClock:
    """A clock a test moves by hand (``now``, epoch seconds): the fake's rate-limit window is
    judged by it, so a test reaches a reset without waiting."""

    def __init__(self, now: float = 2_000_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

"""``cpe run`` on GitLab when the start cannot read the project, as a user meets it: a token
GitLab refuses, a project it does not show, an instance that fails. One line on stderr naming
the setting and the instance, never the token, no traceback; exit 78 for what a restart would
not fix, 75 (try again: a service manager does) for GitLab failing."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.adapters.cli.test_cli import cpe, one_line_error
from tests.fakes.gitlab import FakeGitLab
from tests.fakes.http import Fault
from tests.support.git import make_repo
from tests.support.gitlab import running_gitlab

TOKEN_ENV = "CPE_START_GITLAB_TOKEN"
TOKEN = "glpat-the-one-the-fake-knows"


@pytest.fixture
def fake_gitlab(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeGitLab]:
    with running_gitlab(tmp_path, monkeypatch, tokens={TOKEN: "cpe-bot"}) as gl:
        yield gl


def configured_repo(tmp_path: Path, gl: FakeGitLab, project: str | None = None) -> Path:
    repo = make_repo(tmp_path / "repo", {"README.md": "x\n"})
    (repo / "supervisor.toml").write_text(
        '[provider]\nkind = "gitlab"\n'
        "[provider.gitlab]\n"
        f'project = "{project or gl.project_path}"\n'
        f'base_url = "{gl.base_url}"\n'
        f'token_env = "{TOKEN_ENV}"\n'
        "read_attempts = 2\nbackoff_initial = 0\n"
        '[dashboard]\nlisten = "127.0.0.1:0"\n'
    )
    return repo


def test_a_token_gitlab_refuses_is_one_line_naming_its_variable_exit_78(
    tmp_path: Path, fake_gitlab: FakeGitLab
) -> None:
    secret = "glpat-mistyped-0123456789"
    repo = configured_repo(tmp_path, fake_gitlab)
    line = one_line_error(cpe("run", cwd=repo, env={TOKEN_ENV: secret}))
    assert line == (
        f"cpe: configuration error: provider.gitlab.token_env: GitLab at {fake_gitlab.base_url} "
        f"refused the token in {TOKEN_ENV} (401 Unauthorized); expected a valid personal, "
        "project or group access token with the api scope (revoked, expired and mistyped "
        "tokens are refused)"
    )
    assert secret not in line


def test_a_project_gitlab_does_not_show_is_one_line_naming_it_exit_78(
    tmp_path: Path, fake_gitlab: FakeGitLab
) -> None:
    repo = configured_repo(tmp_path, fake_gitlab, project="acme/widgetz")
    line = one_line_error(cpe("run", cwd=repo, env={TOKEN_ENV: TOKEN}))
    assert line.startswith(
        f"cpe: configuration error: provider.gitlab.project: GitLab at {fake_gitlab.base_url} "
        "shows no project acme/widgetz: it does not exist, or the token's user may not see it"
    )


def test_gitlab_failing_at_start_is_one_line_and_exit_75(
    tmp_path: Path, fake_gitlab: FakeGitLab
) -> None:
    fake_gitlab.fail(Fault("GET", r"/projects/[^/]+$", 502, times=100))
    repo = configured_repo(tmp_path, fake_gitlab)
    line = one_line_error(cpe("run", cwd=repo, env={TOKEN_ENV: TOKEN}), code=75)
    assert line.startswith(
        f"cpe: cannot start: GitLab at {fake_gitlab.base_url}: get project "
        f"{fake_gitlab.project_path}: "
    )
    assert line.endswith("(status 502); try again once it answers")

"""``cpe run`` with Linear or Jira keeping the work items (and the local forge the revisions)
when the start cannot go on, as a user meets it: the token variable unset, a token the tracker
refuses, a team or project it does not show, a workflow lacking a state or status cpe needs, the
tracker unreachable. One line on stderr naming the setting, never the token, no traceback; exit
78 for what a restart would not fix, 75 (try again) for the tracker failing."""

from __future__ import annotations

import socket
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from adapters.cli.run import unavailable
from domain.errors import ProviderError
from tests.adapters.cli.test_cli import cpe, one_line_error
from tests.fakes.jira import BOT, FakeJira
from tests.fakes.linear.fake import API_KEY, FakeLinear
from tests.support.git import make_repo
from tests.support.jira import TOKEN as JIRA_TOKEN
from tests.support.jira import running_jira
from tests.support.jira_provider import full_workflow
from tests.support.linear import running_linear

TOKEN_ENV = "CPE_START_LINEAR_KEY"


@pytest.fixture
def fake_linear(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeLinear]:
    with running_linear(monkeypatch) as linear:
        yield linear


def with_states(linear: FakeLinear) -> None:
    """The states cpe needs that Linear's default workflow lacks."""
    for name, kind in (("Needs Refinement", "backlog"), ("Approved", "started")):
        linear.add_state(name, kind)
    linear.add_state("Blocked", "started")


def configured(tmp_path: Path, url: str, team: str = "ENG") -> Path:
    repo = make_repo(tmp_path / "repo", {"README.md": "x\n"})
    (repo / "supervisor.toml").write_text(
        '[provider.work_items]\nkind = "linear"\n[provider.revisions]\nkind = "local"\n'
        "[provider.local]\npipeline_command = []\n"
        f'[provider.linear]\nteam = "{team}"\napi_url = "{url}"\ntoken_env = "{TOKEN_ENV}"\n'
        "read_attempts = 2\nbackoff_initial = 0\n"
        '[dashboard]\nlisten = "127.0.0.1:0"\n'
    )
    return repo


def test_the_token_variable_unset_is_one_line_before_linear_is_asked(
    tmp_path: Path, fake_linear: FakeLinear
) -> None:
    line = one_line_error(cpe("run", cwd=configured(tmp_path, fake_linear.url)))
    assert line == (
        f"cpe: configuration error: provider.linear.token_env: the environment variable "
        f"{TOKEN_ENV} is not set; expected a Linear personal API key or OAuth access token in "
        "that variable"
    )
    assert fake_linear.requests == []


def test_a_token_linear_refuses_is_one_line_naming_its_variable_exit_78(
    tmp_path: Path, fake_linear: FakeLinear
) -> None:
    secret = "lin_api_mistyped_0123456789"
    repo = configured(tmp_path, fake_linear.url)
    line = one_line_error(cpe("run", cwd=repo, env={TOKEN_ENV: secret}))
    assert line.startswith(
        f"cpe: configuration error: provider.linear.token_env: Linear at "
        f"{fake_linear.base_url} refused the token in {TOKEN_ENV} (401)"
    )
    assert secret not in line


def test_a_team_linear_does_not_show_is_one_line_naming_it(
    tmp_path: Path, fake_linear: FakeLinear
) -> None:
    with_states(fake_linear)
    repo = configured(tmp_path, fake_linear.url, team="OPS")
    line = one_line_error(cpe("run", cwd=repo, env={TOKEN_ENV: API_KEY}))
    assert line.startswith(
        f"cpe: configuration error: provider.linear.team: Linear at {fake_linear.base_url} "
        "shows no team OPS"
    )


def test_a_default_workflow_is_one_line_listing_the_teams_states(
    tmp_path: Path, fake_linear: FakeLinear
) -> None:
    repo = configured(tmp_path, fake_linear.url)
    line = one_line_error(cpe("run", cwd=repo, env={TOKEN_ENV: API_KEY}))
    assert line.startswith(
        "cpe: configuration error: provider.linear.states: team ENG has no workflow state for "
    )
    assert "its states are: Triage (triage), Backlog (backlog), Todo (unstarted)" in line


def test_linear_unreachable_at_start_is_one_line_and_exit_75(tmp_path: Path) -> None:
    # A port held and not listening: every connection to it is refused, none reused meanwhile.
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        base = f"http://127.0.0.1:{held.getsockname()[1]}"
        line = one_line_error(
            cpe("run", cwd=configured(tmp_path, f"{base}/graphql"), env={TOKEN_ENV: API_KEY}),
            code=75,
        )
    assert line.startswith("cpe: cannot start: ")
    assert f"cannot reach Linear at {base}" in line
    assert line.endswith("try again once it answers")


# ---------------------------------------------------------------------------- Jira

JIRA_TOKEN_ENV = "CPE_START_JIRA_TOKEN"


@pytest.fixture
def fake_jira() -> Iterator[FakeJira]:
    with running_jira() as jira:
        yield jira


def jira_configured(tmp_path: Path, jira: FakeJira, project: str = "PROJ") -> Path:
    repo = make_repo(tmp_path / "repo", {"README.md": "x\n"})
    (repo / "supervisor.toml").write_text(
        '[provider.work_items]\nkind = "jira"\n[provider.revisions]\nkind = "local"\n'
        "[provider.local]\npipeline_command = []\n"
        f'[provider.jira]\nbase_url = "{jira.base_url}"\ndeployment = "cloud"\n'
        f'project = "{project}"\nemail = "{jira.email(BOT)}"\ntoken_env = "{JIRA_TOKEN_ENV}"\n'
        "read_attempts = 2\nbackoff_initial = 0\n"
        '[dashboard]\nlisten = "127.0.0.1:0"\n'
    )
    return repo


def test_jiras_token_variable_unset_is_one_line_before_jira_is_asked(
    tmp_path: Path, fake_jira: FakeJira
) -> None:
    line = one_line_error(cpe("run", cwd=jira_configured(tmp_path, fake_jira)))
    assert line == (
        "cpe: configuration error: provider.jira.token_env: the environment variable "
        f"{JIRA_TOKEN_ENV} is not set; expected a Jira API token (Cloud, with email) or "
        "personal access token (Data Center) in that variable"
    )
    assert fake_jira.requests == []


def test_a_token_jira_refuses_is_one_line_naming_its_variable(
    tmp_path: Path, fake_jira: FakeJira
) -> None:
    full_workflow(fake_jira)
    secret = "mistyped-api-token-0123456789"
    repo = jira_configured(tmp_path, fake_jira)
    line = one_line_error(cpe("run", cwd=repo, env={JIRA_TOKEN_ENV: secret}))
    assert line.startswith(
        f"cpe: configuration error: provider.jira.token_env: Jira at {fake_jira.base_url} "
        f"refused the token in {JIRA_TOKEN_ENV} (401"
    )
    assert secret not in line


def test_a_project_jira_does_not_show_is_one_line_naming_it(
    tmp_path: Path, fake_jira: FakeJira
) -> None:
    full_workflow(fake_jira)
    repo = jira_configured(tmp_path, fake_jira, project="NOPE")
    line = one_line_error(cpe("run", cwd=repo, env={JIRA_TOKEN_ENV: JIRA_TOKEN}))
    assert line.startswith(
        f"cpe: configuration error: provider.jira.project: Jira at {fake_jira.base_url} shows "
        "no project NOPE"
    )


def test_a_workflow_lacking_a_status_is_one_line_listing_its_statuses(
    tmp_path: Path, fake_jira: FakeJira
) -> None:
    repo = jira_configured(tmp_path, fake_jira)
    line = one_line_error(cpe("run", cwd=repo, env={JIRA_TOKEN_ENV: JIRA_TOKEN}))
    assert line.startswith("cpe: configuration error: provider.jira.statuses: ")
    # Every missing status in the one line, not one per start.
    assert "no status for needs-refinement, approved, blocked" in line
    assert "To Do (new), In Progress (indeterminate)" in line


# ---------------------------------------------------------------------------- the disk


def test_a_disk_that_refuses_the_trackers_write_at_start_is_exit_74_not_a_config_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The local tracker's database refused a write at start (a read-only or full disk, over
    a size limit): not the configuration's fault (78) but the disk's (74, as the journal's)."""
    path = tmp_path / "tracker.sqlite3"
    sqlite3.connect(path).close()
    readonly = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        with pytest.raises(sqlite3.Error) as refused:
            readonly.execute("CREATE TABLE t (x)")
    finally:
        readonly.close()
    exc = ProviderError(f"local tracker commit failed: {refused.value}")
    exc.__cause__ = refused.value  # as adapters/providers/local/db.py raises it: from the error
    assert unavailable(exc) == 74
    said = capsys.readouterr().err
    assert said.startswith("cpe: cannot start: local tracker commit failed: attempt to write")
    assert said.rstrip().endswith("free space or fix the disk, then start cpe again")
    assert unavailable(ProviderError("the tracker answered 500")) == 78

"""Webhooks end to end on the other vendors: a real ``cpe run`` with its pollers an hour apart,
the fake's hook pointed at cpe's ``/hooks/<vendor>``, the real ``claude`` CLI and a scripted
model whose implementor hangs. A teammate's new issue reaches cpe as the vendor's delivery and
is dispatched at once: on GitLab (``Issue Hook``, ``X-Gitlab-Token``), on Linear with the
revisions on GitHub (``Issue`` ``create``, ``Linear-Signature``; a delivery whose
``webhookTimestamp`` is two minutes old is refused first and polls nothing), on Jira with the
revisions local (``jira:issue_created``, ``X-Hub-Signature``)."""

from __future__ import annotations

import json
import re
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.github_loop import TOKEN, TOKEN_ENV
from tests.e2e.github_loop import clone_for_cpe as clone_github
from tests.e2e.gitlab_loop import TOKEN as GITLAB_TOKEN
from tests.e2e.gitlab_loop import TOKEN_ENV as GITLAB_TOKEN_ENV
from tests.e2e.gitlab_loop import USERNAME
from tests.e2e.gitlab_loop import clone_for_cpe as clone_gitlab
from tests.e2e.jira_loop import TOKEN as JIRA_TOKEN
from tests.e2e.jira_loop import TOKEN_ENV as JIRA_TOKEN_ENV
from tests.e2e.jira_loop import jira_for_the_loop, jira_repo
from tests.e2e.linear_loop import LINEAR_TOKEN, LINEAR_TOKEN_ENV, prepare_linear
from tests.e2e.running import make_cpe_repo, start_cpe_with_a_hanging_implementor, wait_for
from tests.e2e.test_mixed_pairs import APART, ONE_SYSTEM
from tests.e2e.test_webhooks import HOUR, dashboard_url
from tests.fakes.github import FakeGitHub
from tests.fakes.gitlab import FakeGitLab
from tests.fakes.jira import TEAMMATE as JIRA_TEAMMATE
from tests.fakes.linear.fake import TEAMMATE, FakeLinear
from tests.support.git import git, isolate_git

pytestmark = pytest.mark.timeout(900)

SECRET = "a vendor's hook secret"
SECRET_ENV = "CPE_E2E_HOOK_SECRET"


def project_files(tmp_path: Path) -> dict[str, bytes]:
    project = make_cpe_repo(tmp_path / "project")
    (project / "supervisor.toml").unlink()
    git(project, "add", "-A")
    git(project, "commit", "-qm", "the project")
    names = git(project, "ls-files", "-z").split("\0")
    return {name: (project / name).read_bytes() for name in names if name}


def hour_long_polls(repo: Path, webhooks: str) -> None:
    """The pollers an hour apart; ``webhooks``: the ``[webhooks]`` section's lines."""
    toml = repo / "supervisor.toml"
    text = re.sub(r"(?m)^(\w+_interval) = .*$", rf"\1 = {HOUR}", toml.read_text())
    toml.write_text(f"{text}\n[webhooks]\n{webhooks}\n")


def test_a_teammates_gitlab_issue_is_dispatched_by_its_issue_hook(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, processes: list[subprocess.Popen[str]]
) -> None:
    isolate_git(monkeypatch)
    with FakeGitLab(tmp_path / "gitlab", tokens={GITLAB_TOKEN: USERNAME}) as gitlab:
        gitlab.seed(project_files(tmp_path), "the project")
        repo = clone_gitlab(gitlab, tmp_path)
        hour_long_polls(repo, f'gitlab_token_env = "{SECRET_ENV}"')
        home = tmp_path / "home"
        home.mkdir()
        env = {GITLAB_TOKEN_ENV: GITLAB_TOKEN, SECRET_ENV: SECRET}
        with start_cpe_with_a_hanging_implementor(repo, home, processes, env) as (_, model):
            log = home / "cpe.log"
            assert wait_for(lambda: dashboard_url(log) is not None, 120), log.read_text()
            url = dashboard_url(log)
            # cpe's first poll read the (empty) issue list: from now on only a delivery polls.
            assert wait_for(lambda: any(r.route == "issues/list" for r in gitlab.requests), 120)
            gitlab.hooks.add(f"{url}/hooks/gitlab", SECRET)
            started = time.monotonic()
            iid = gitlab.open_issue("Greeting", "Add greet(name).")
            assert wait_for(lambda: model.hanging >= 1, 300), log.read_text()[-6000:]
            took = time.monotonic() - started
            gitlab.hooks.wait_idle()
            opened = gitlab.hooks.deliveries[0]
            assert (opened.event, opened.action, opened.status) == ("Issue Hook", "open", 202)
            assert json.loads(opened.attempts[0].answer)["accepted"] == opened.id
            assert f"#{iid}" in log.read_text()
    assert SECRET not in log.read_text()
    print(f"\nGitLab issue opened -> implementor started: {took:.2f} s (polls: {HOUR} s)")


@pytest.fixture
def linear(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeLinear]:
    with FakeLinear() as fake:
        prepare_linear(fake)
        yield fake


def test_a_teammates_linear_issue_is_dispatched_and_a_stale_delivery_is_refused(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    linear: FakeLinear,
    processes: list[subprocess.Popen[str]],
) -> None:
    isolate_git(monkeypatch)
    with FakeGitHub(tmp_path / "github", tokens={TOKEN: "cpe-bot"}) as github:
        github.seed(project_files(tmp_path), "the project")
        repo = clone_github(github, tmp_path, auto_merge=False)
        toml = repo / "supervisor.toml"
        text = toml.read_text()
        tracker = (
            "[provider.linear]\n"
            f'team = "{linear.team_key}"\n'
            f'api_url = "{linear.url}"\n'
            f'token_env = "{LINEAR_TOKEN_ENV}"\n'
            "request_timeout = 30\n"
        )
        toml.write_text(text.replace(ONE_SYSTEM, APART.replace('"local"', '"linear"')) + tracker)
        hour_long_polls(repo, f'linear_secret_env = "{SECRET_ENV}"')
        home = tmp_path / "home"
        home.mkdir()
        env = {TOKEN_ENV: TOKEN, LINEAR_TOKEN_ENV: LINEAR_TOKEN, SECRET_ENV: SECRET}
        with start_cpe_with_a_hanging_implementor(repo, home, processes, env) as (_, model):
            log = home / "cpe.log"
            assert wait_for(lambda: dashboard_url(log) is not None, 120), log.read_text()
            url = dashboard_url(log)
            # cpe's first poll read the team's issues: from now on only a delivery polls.
            assert wait_for(lambda: "CpeIssues" in linear.operations(), 120)
            linear.hooks.add(f"{url}/hooks/linear", SECRET)
            # Sent two minutes ago (a replay caught late, or a clock far off): refused.
            linear.hooks.now = lambda: time.time() - 120
            ident = linear.open_issue("Greeting", "Add greet(name).", as_user=TEAMMATE)
            linear.hooks.wait_idle()
            (stale,) = linear.hooks.deliveries
            assert stale.status == 401, stale.attempts
            assert "error" in json.loads(stale.attempts[0].answer)
            assert model.hanging == 0
            # Its comment, delivered on time, makes cpe poll: the issue is dispatched.
            linear.hooks.now = time.time
            started = time.monotonic()
            linear.comment(ident, "Any news?", by=TEAMMATE)
            assert wait_for(lambda: model.hanging >= 1, 300), log.read_text()[-6000:]
            took = time.monotonic() - started
            fresh = linear.hooks.deliveries[1]
            assert (fresh.event, fresh.status) == ("Comment", 200)
    assert SECRET not in log.read_text()
    print(f"\nLinear comment -> implementor started: {took:.2f} s (polls: {HOUR} s)")


def test_a_teammates_jira_issue_is_dispatched_by_the_admin_webhook(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, processes: list[subprocess.Popen[str]]
) -> None:
    isolate_git(monkeypatch)
    with jira_for_the_loop() as jira:
        repo = jira_repo(tmp_path, jira)
        hour_long_polls(repo, f'jira_secret_env = "{SECRET_ENV}"')
        home = tmp_path / "home"
        home.mkdir()
        env = {JIRA_TOKEN_ENV: JIRA_TOKEN, SECRET_ENV: SECRET}
        with start_cpe_with_a_hanging_implementor(repo, home, processes, env) as (_, model):
            log = home / "cpe.log"
            assert wait_for(lambda: dashboard_url(log) is not None, 120), log.read_text()
            url = dashboard_url(log)
            # cpe's first poll searched the project: from now on only a delivery polls.
            assert wait_for(lambda: any("search" in (r.route or "") for r in jira.requests), 120)
            jira.hooks.add(f"{url}/hooks/jira", SECRET)
            started = time.monotonic()
            key = jira.open_issue("Greeting", "Add greet(name).", by=JIRA_TEAMMATE)
            assert wait_for(lambda: model.hanging >= 1, 300), log.read_text()[-6000:]
            took = time.monotonic() - started
            jira.hooks.wait_idle()
            created = jira.hooks.deliveries[0]
            assert (created.event, created.status) == ("jira:issue_created", 202)
            assert json.loads(created.attempts[0].answer)["accepted"] == created.id
            assert key in log.read_text()
    assert SECRET not in log.read_text()
    print(f"\nJira issue created -> implementor started: {took:.2f} s (polls: {HOUR} s)")

"""The composition root with Jira keeping the work items: the fake Jira (Cloud and Data Center)
with the local forge or the fake GitHub keeping the revisions, built from ``supervisor.toml`` as
``cpe run`` builds them. Each system serves its role, the request meter keeps Jira's figures by
its name, a reload reaches Jira's trust, and a revision names its item by its key."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from adapters.cli.build import App, build_app
from adapters.cli.providers import build_providers
from adapters.cli.settings import load_config
from adapters.dashboard.metrics import provider_metrics
from adapters.host.metering import ProviderMeter
from adapters.providers.markers import work_item_reference
from domain.models import WorkItemId
from tests.adapters.providers.edits import BASE_FILES, EDITS
from tests.fakes.jira import FakeJira
from tests.fakes.jira.fake import BOT, DEVELOPERS
from tests.support.git import Repo, git, make_patch
from tests.support.github import running_github
from tests.support.jira import TOKEN, TOKEN_ENV, running_jira
from tests.support.jira_provider import full_workflow

GITHUB_TOKEN_ENV = "CPE_COMPOSE_GITHUB_TOKEN"


@pytest.fixture
def agents(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-never-sent")  # past the preflight
    monkeypatch.setenv(TOKEN_ENV, TOKEN)


@pytest.fixture
def apps() -> Iterator[list[App]]:
    built: list[App] = []
    yield built
    for app in built:
        app.close()


def jira_section(jira: FakeJira, extra: str = "") -> str:
    email = f'email = "{jira.email(BOT)}"\n' if jira.deployment == "cloud" else ""
    return (
        f'[provider.jira]\nbase_url = "{jira.base_url}"\ndeployment = "{jira.deployment}"\n'
        f'project = "{jira.project_key}"\ntoken_env = "{TOKEN_ENV}"\nrequest_timeout = 30\n'
        + email
        + extra
    )


def with_local(jira: FakeJira, extra: str = "") -> str:
    return (
        '[provider.work_items]\nkind = "jira"\n[provider.revisions]\nkind = "local"\n'
        "[provider.local]\npipeline_command = []\n" + jira_section(jira, extra)
    )


def local_repo(tmp_path: Path, config: str) -> Path:
    """The user's clone, the local forge's repository, holding ``config``."""
    repo = Repo.create(tmp_path / "repo", BASE_FILES)
    (repo.root / "supervisor.toml").write_text(config)
    return repo.root


def inner(port: Any) -> Any:
    return port._inner  # the provider's own object behind the request meter's wrapper


def jiras(port: Any) -> bool:
    return type(port).__module__.startswith("adapters.providers.jira.")


@pytest.mark.parametrize("deployment", ["cloud", "data_center"])
def test_jira_issues_with_the_local_forge(
    tmp_path: Path, agents: None, apps: list[App], deployment: str
) -> None:
    with running_jira(deployment=deployment) as jira:  # type: ignore[arg-type]
        full_workflow(jira)
        repo = local_repo(tmp_path, with_local(jira))
        app = build_app(None, repo)
        apps.append(app)
        provider = app.engine.provider
        assert jiras(inner(provider.work_item_reader))
        assert jiras(inner(provider.work_item_writer))
        assert type(inner(provider.revision_writer)).__name__ == "LocalRevisionWriter"

        key = jira.open_issue("Answer", "Make it 42.")
        assert [(i.id, i.title) for i in provider.work_item_reader.list_work_items()] == [
            (key, "Answer")
        ]
        patch = make_patch(repo, tmp_path / "patch", EDITS["modified"])
        made = provider.revision_writer.create_from_patch(
            WorkItemId(key), f"cpe/{key.lower()}-answer", "Answer", f"Work item: #{key}", patch
        )
        assert made.work_item_id == key
        message = git(repo, "log", "-1", "--format=%B", f"refs/heads/cpe/{key.lower()}-answer")
        assert f"Work item: {key}" in message

        assert set(app.meter.wires) == {"jira"}
        metrics = {
            (s.name, tuple(s.labels.items())): s.value
            for family in text_string_to_metric_families(
                "\n".join(provider_metrics(app.meter)) + "\n"
            )
            for s in family.samples
        }
        sent = "cpe_provider_http_requests_total"
        assert metrics[(sent, (("system", "jira"),))] == len(jira.requests)


def test_a_reload_reaches_jiras_trust(tmp_path: Path, agents: None, apps: list[App]) -> None:
    """Trusted by a permission nobody holds, nobody's issue is work; trusting the developers
    group by a reload makes Alice's (a developer's) issue work."""
    with running_jira() as jira:
        full_workflow(jira)
        strict = 'trusted_permission = "ADMINISTER_PROJECTS"\n'
        repo = local_repo(tmp_path, with_local(jira, strict))
        app = build_app(None, repo)
        apps.append(app)
        reader = app.engine.provider.work_item_reader
        key = jira.open_issue("From Alice", "Do it.")
        assert key not in [i.id for i in reader.list_work_items()]
        trusting = with_local(jira, strict + f'trusted_groups = ["{DEVELOPERS}"]\n')
        (repo / "supervisor.toml").write_text(trusting)
        app.reload()
        assert key in [i.id for i in reader.list_work_items()]


def test_jira_issues_and_github_pull_requests(
    tmp_path: Path, agents: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(GITHUB_TOKEN_ENV, "compose-token")
    with (
        running_jira() as jira,
        running_github(tmp_path, monkeypatch, tokens={"compose-token": "cpe-bot"}) as github,
    ):
        full_workflow(jira)
        config = (
            '[provider.work_items]\nkind = "jira"\n[provider.revisions]\nkind = "github"\n'
            + jira_section(jira)
            + "[provider.github]\n"
            f'repository = "{github.owner}/{github.repo}"\n'
            f'token_env = "{GITHUB_TOKEN_ENV}"\nbase_url = "{github.base_url}/"\n'
        )
        repo = tmp_path / "repo"
        git(tmp_path, "clone", "--quiet", str(github.git.path), str(repo))
        (repo / "supervisor.toml").write_text(config)
        closers: list[Any] = []
        ports = build_providers(
            load_config(repo / "supervisor.toml"), repo, "main", repo / ".cpe", closers,
            meter=ProviderMeter(),
        )  # fmt: skip
        try:
            assert jiras(ports.work_item_reader)
            assert type(ports.revision_writer).__name__ == "GitHubRevisionWriter"
            key = jira.open_issue("Answer", "Make it 42.")
            assert [i.id for i in ports.work_item_reader.list_work_items()] == [key]
            patch = make_patch(github.git.path, tmp_path / "patch", EDITS["modified"])
            revision = ports.revision_writer.create_from_patch(
                WorkItemId(key), f"cpe/{key.lower()}-answer", "Answer", f"Work item: #{key}", patch
            )
            assert work_item_reference(key) in (github.issue(int(revision.id)).body or "")
            assert github.labels == {}
        finally:
            for close in reversed(closers):
                close()

"""The composition root with the work items and the revisions kept apart: the local tracker and
the fake GitHub as the forge, built by ``build_app`` from ``supervisor.toml``. Each system is
built for the roles it serves, the engine's ports come from the one that serves them, the
request meter counts the forge's requests, a reload reaches the forge's trust, and a system
that cannot be built closes the one built before it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from adapters.cli.build import App, build_app, code_host_remote
from adapters.cli.providers import WireStats, build_providers, summed
from adapters.cli.settings import load_config
from adapters.dashboard.metrics import provider_metrics
from adapters.host.metering import ProviderMeter
from adapters.providers import ProviderRoles
from adapters.providers.github.transport import TransportStats
from adapters.providers.local.provider import DATABASE_NAME, LocalProvider
from adapters.providers.markers import work_item_reference
from domain.errors import ConfigError
from domain.models import WorkItemId
from tests.adapters.providers.edits import EDITS
from tests.fakes.github import FakeGitHub
from tests.support.git import git, make_patch
from tests.support.github import running_github
from tests.support.gitlab import running_gitlab

TOKEN_ENV = "CPE_COMPOSE_GITHUB_TOKEN"
TOKEN = "compose-token"
TRACKER = ProviderRoles(work_items=True, revisions=False)


@pytest.fixture
def fake_github(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeGitHub]:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-never-sent")  # past the preflight
    with running_github(tmp_path, monkeypatch, tokens={TOKEN: "cpe-bot"}) as gh:
        yield gh


def mixed_config(fake_github: FakeGitHub, extra: str = "") -> str:
    return (
        '[provider.work_items]\nkind = "local"\n'
        '[provider.revisions]\nkind = "github"\n'
        "[provider.local]\npipeline_command = []\n"
        "[provider.github]\n"
        f'repository = "{fake_github.owner}/{fake_github.repo}"\n'
        f'token_env = "{TOKEN_ENV}"\n'
        f'base_url = "{fake_github.base_url}/"\n'
        "request_timeout = 30\n" + extra
    )


def clone(tmp_path: Path, fake_github: FakeGitHub, config: str) -> Path:
    """A clone of the fake's repository (its ``origin``) holding ``config``."""
    repo = tmp_path / "repo"
    git(tmp_path, "clone", "--quiet", str(fake_github.git.path), str(repo))
    (repo / "supervisor.toml").write_text(config)
    return repo


@pytest.fixture
def apps() -> Iterator[list[App]]:
    built: list[App] = []
    yield built
    for app in built:
        app.close()


def inner(port: Any) -> Any:
    return port._inner  # the provider's own object behind the request meter's wrapper


def test_a_local_tracker_and_a_github_forge_each_serve_their_role(
    tmp_path: Path, fake_github: FakeGitHub, apps: list[App], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(TOKEN_ENV, TOKEN)
    repo = clone(tmp_path, fake_github, mixed_config(fake_github))
    app = build_app(None, repo)
    apps.append(app)
    provider = app.engine.provider
    assert type(inner(provider.work_item_reader)).__name__ == "LocalWorkItemReader"
    assert type(inner(provider.work_item_writer)).__name__ == "LocalWorkItemWriter"
    assert type(inner(provider.revision_reader)).__name__ == "GitHubRevisionReader"
    assert type(inner(provider.revision_writer)).__name__ == "GitHubRevisionWriter"
    # The forge alone: no status label, no issue read on GitHub.
    assert fake_github.labels == {}
    assert not [r for r in fake_github.requests if "/issues" in r.path or "/labels" in r.path]

    item = provider.work_item_writer.create_work_item("Answer", "Make it 42.")
    with LocalProvider(repo, repo / ".cpe", roles=TRACKER) as tracker:
        assert [i.title for i in tracker.work_item_reader.list_work_items()] == ["Answer"]
    patch = make_patch(fake_github.git.path, tmp_path / "patch", EDITS["modified"])
    revision = provider.revision_writer.create_from_patch(
        item, f"cpe/{item}-answer", "Answer", "", patch, idempotency_key=f"impl:{item}"
    )
    assert work_item_reference(item) in (fake_github.issue(int(revision.id)).body or "")
    assert [i for i in fake_github.issues.values() if not i.is_pull] == []
    [listed] = provider.revision_reader.list_revisions()
    assert listed.work_item_id == WorkItemId(item)

    # The request meter counts what went to GitHub (the local tracker sends nothing).
    assert app.meter.wire is not None
    assert app.meter.wire().requests == len(fake_github.requests)
    # The default branch is followed on the forge: fetched from origin.
    assert code_host_remote(app.config, repo) == "origin"


def test_a_reload_reaches_the_forges_trust(
    tmp_path: Path, fake_github: FakeGitHub, apps: list[App], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(TOKEN_ENV, TOKEN)
    repo = clone(tmp_path, fake_github, mixed_config(fake_github))
    app = build_app(None, repo)
    apps.append(app)
    provider = app.engine.provider
    item = provider.work_item_writer.create_work_item("Answer", "Make it 42.")
    patch = make_patch(fake_github.git.path, tmp_path / "patch", EDITS["modified"])
    revision = provider.revision_writer.create_from_patch(item, "cpe/1-a", "A", "", patch)
    fake_github.add_review(int(revision.id), "helper-bot", "COMMENTED", "Rename it")
    assert provider.revision_reader.get_review_history(revision.id).reviews == ()

    trusted = mixed_config(fake_github).replace(
        "request_timeout = 30\n", 'request_timeout = 30\ntrusted_bots = ["helper-bot"]\n'
    )
    (repo / "supervisor.toml").write_text(trusted)
    app.reload()
    history = provider.revision_reader.get_review_history(revision.id)
    assert [r.body for r in history.reviews] == ["Rename it"]


def test_a_forge_that_cannot_be_built_closes_the_tracker_built_before_it(
    tmp_path: Path, fake_github: FakeGitHub, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(TOKEN_ENV, raising=False)
    repo = clone(tmp_path, fake_github, mixed_config(fake_github))
    config = load_config(repo / "supervisor.toml")
    closers: list[Any] = []
    with pytest.raises(ConfigError) as refused:
        build_providers(config, repo, "main", repo / ".cpe", closers, meter=ProviderMeter())
    assert str(refused.value).startswith(
        f"provider.github.token_env: the environment variable {TOKEN_ENV} is not set"
    )
    assert closers == []
    assert fake_github.requests == []
    # The tracker's database was opened, and is closed again: no descriptor of this process
    # holds it.
    database = (repo / ".cpe" / DATABASE_NAME).resolve()
    assert database.exists()
    assert open_files(database) == []


def open_files(path: Path) -> list[str]:
    found = []
    for fd in Path("/proc/self/fd").iterdir():
        try:
            target = fd.readlink()
        except OSError:
            continue
        if str(target).startswith(str(path)):
            found.append(str(target))
    return found


def test_one_system_for_both_roles_is_built_once(
    tmp_path: Path, fake_github: FakeGitHub, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(TOKEN_ENV, TOKEN)
    text = mixed_config(fake_github).replace(
        '[provider.work_items]\nkind = "local"\n[provider.revisions]\nkind = "github"\n',
        '[provider]\nkind = "github"\n',
    )
    repo = clone(tmp_path, fake_github, text)
    closers: list[Any] = []
    ports = build_providers(
        load_config(repo / "supervisor.toml"), repo, "main", repo / ".cpe", closers,
        meter=ProviderMeter(),
    )  # fmt: skip
    try:
        assert len(closers) == 1
        assert type(ports.work_item_reader).__name__ == "GitHubWorkItemReader"
        assert type(ports.revision_writer).__name__ == "GitHubRevisionWriter"
    finally:
        for close in closers:
            close()


def test_the_meter_sums_both_systems_stats() -> None:
    first = TransportStats(requests=10, not_modified=4, retries=1, rate_limited=0)
    first.rate_remaining = 4000
    second = TransportStats(requests=5, not_modified=1, retries=2, rate_limited=1)
    second.rate_remaining = 90
    total = summed([lambda: first, lambda: second])()
    assert total == WireStats(
        requests=15, not_modified=5, retries=3, rate_limited=1, rate_remaining=90
    )
    assert total.counted == 10


# ------------------------------------------------------------------ GitLab issues, GitHub PRs

GITLAB_TOKEN_ENV = "CPE_COMPOSE_GITLAB_TOKEN"
GITLAB_TOKEN = "compose-gitlab-token"


def test_gitlab_issues_and_github_pull_requests_each_serve_their_role(
    tmp_path: Path, fake_github: FakeGitHub, apps: list[App], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(TOKEN_ENV, TOKEN)
    monkeypatch.setenv(GITLAB_TOKEN_ENV, GITLAB_TOKEN)
    with running_gitlab(tmp_path, monkeypatch, tokens={GITLAB_TOKEN: "cpe-bot"}) as gitlab:
        config = mixed_config(fake_github).replace('kind = "local"', 'kind = "gitlab"') + (
            "[provider.gitlab]\n"
            f'project = "{gitlab.project_path}"\n'
            f'base_url = "{gitlab.base_url}"\n'
            f'token_env = "{GITLAB_TOKEN_ENV}"\n'
        )
        repo = clone(tmp_path, fake_github, config)
        app = build_app(None, repo)
        apps.append(app)
        provider = app.engine.provider
        assert type(inner(provider.work_item_writer)).__name__ == "GitLabWorkItemWriter"
        assert type(inner(provider.revision_writer)).__name__ == "GitHubRevisionWriter"

        item = provider.work_item_writer.create_work_item("Answer", "Make it 42.")
        assert [(i.iid, i.title) for i in gitlab.issues.values()] == [(int(item), "Answer")]
        patch = make_patch(fake_github.git.path, tmp_path / "patch", EDITS["modified"])
        revision = provider.revision_writer.create_from_patch(
            item, f"cpe/{item}-answer", "Answer", "", patch
        )
        assert work_item_reference(item) in (fake_github.issue(int(revision.id)).body or "")
        assert [i for i in fake_github.issues.values() if not i.is_pull] == []
        assert fake_github.labels == {}
        # The tracker's side asks GitLab for no merge request (the engine links the item).
        [listed] = provider.work_item_reader.list_work_items()
        assert listed.linked_revision is None
        assert not [r for r in gitlab.core.requests if "merge_requests" in r.path]
        # Both systems' requests are counted.
        assert app.meter.wire is not None
        assert app.meter.wire().requests == len(fake_github.requests) + len(gitlab.core.requests)
        # /metrics says each system's apart; GitHub's old names carry GitHub's alone.
        metrics = {
            (s.name, tuple(s.labels.items())): s.value
            for family in text_string_to_metric_families(
                "\n".join(provider_metrics(app.meter)) + "\n"
            )
            for s in family.samples
        }
        sent = "cpe_provider_http_requests_total"
        assert metrics[(sent, (("system", "gitlab"),))] == len(gitlab.core.requests)
        assert metrics[(sent, (("system", "github"),))] == len(fake_github.requests)
        assert metrics[("cpe_github_http_requests_total", ())] == len(fake_github.requests)

        # A reload reaches the tracker's trust too: a bot's issue becomes work.
        bots = gitlab.open_issue("From a bot", "Do it.", author="helper-bot")
        provider.work_item_reader.list_work_items()
        ignored = provider.work_item_reader.ignored_work_items()
        assert [i.id for i in ignored] == [str(bots)]
        trusted = config.replace(
            f'token_env = "{GITLAB_TOKEN_ENV}"\n',
            f'token_env = "{GITLAB_TOKEN_ENV}"\ntrusted_bots = ["helper-bot"]\n',
        )
        (repo / "supervisor.toml").write_text(trusted)
        app.reload()
        listed_ids = [i.id for i in provider.work_item_reader.list_work_items()]
        assert listed_ids == [item, str(bots)]
        app.close()
        apps.remove(app)


def test_github_issues_and_gitlab_merge_requests_each_serve_their_role(
    tmp_path: Path, fake_github: FakeGitHub, apps: list[App], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(TOKEN_ENV, TOKEN)
    monkeypatch.setenv(GITLAB_TOKEN_ENV, GITLAB_TOKEN)
    with running_gitlab(tmp_path, monkeypatch, tokens={GITLAB_TOKEN: "cpe-bot"}) as gitlab:
        config = (
            mixed_config(fake_github)
            .replace('kind = "local"', 'kind = "github"')
            .replace(
                '[provider.revisions]\nkind = "github"', '[provider.revisions]\nkind = "gitlab"'
            )
            + "[provider.gitlab]\n"
            f'project = "{gitlab.project_path}"\n'
            f'base_url = "{gitlab.base_url}"\n'
            f'token_env = "{GITLAB_TOKEN_ENV}"\n'
        )
        repo = tmp_path / "repo"
        git(tmp_path, "clone", "--quiet", str(gitlab.git.path), str(repo))
        (repo / "supervisor.toml").write_text(config)
        app = build_app(None, repo)
        apps.append(app)
        provider = app.engine.provider
        assert type(inner(provider.work_item_writer)).__name__ == "GitHubWorkItemWriter"
        assert inner(provider.revision_writer).__module__.startswith("adapters.providers.gitlab")

        item = provider.work_item_writer.create_work_item("Answer", "Make it 42.")
        assert [n for n, i in fake_github.issues.items() if not i.is_pull] == [int(item)]
        patch = make_patch(gitlab.git.path, tmp_path / "patch", EDITS["modified"])
        revision = provider.revision_writer.create_from_patch(
            item, f"cpe/{item}-answer", "Answer", "", patch
        )
        [mr] = gitlab.merge_requests.values()
        assert work_item_reference(item) in (mr.description or "")
        assert "closes" not in (mr.description or "").lower()
        assert gitlab.labels == {}
        assert gitlab.issues == {}
        [listed] = provider.revision_reader.list_revisions()
        assert (listed.id, listed.work_item_id) == (revision.id, item)
        # The tracker reads no pull request of its own repository (the engine links the item).
        provider.work_item_reader.list_work_items()
        assert [r.path for r in fake_github.requests if "/pulls" in r.path] == []

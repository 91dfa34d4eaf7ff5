"""The composition root with Linear keeping the work items: the fake Linear with the fake GitHub
or the local forge keeping the revisions, built from ``supervisor.toml`` as ``cpe run`` builds
them. Each system serves its role, the request meter keeps Linear's figures by its name, a
reload reaches Linear's trust, and a revision names its item by its identifier."""

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
from tests.adapters.providers.edits import EDITS
from tests.fakes.github import FakeGitHub
from tests.fakes.linear.fake import GUEST, FakeLinear
from tests.support.git import git, make_patch
from tests.support.github import running_github
from tests.support.linear import TOKEN_ENV, running_linear

GITHUB_TOKEN_ENV = "CPE_COMPOSE_GITHUB_TOKEN"


@pytest.fixture
def fake_github(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeGitHub]:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-never-sent")  # past the preflight
    monkeypatch.setenv(GITHUB_TOKEN_ENV, "compose-token")
    with running_github(tmp_path, monkeypatch, tokens={"compose-token": "cpe-bot"}) as gh:
        yield gh


@pytest.fixture
def fake_linear(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeLinear]:
    with running_linear(monkeypatch) as linear:
        # The states cpe's other statuses need, beside Linear's default workflow.
        for name, kind in (("Needs Refinement", "backlog"), ("Approved", "started")):
            linear.add_state(name, kind)
        linear.add_state("Blocked", "started")
        yield linear


@pytest.fixture
def apps() -> Iterator[list[App]]:
    built: list[App] = []
    yield built
    for app in built:
        app.close()


def linear_section(fake_linear: FakeLinear, extra: str = "") -> str:
    return (
        f'[provider.linear]\nteam = "{fake_linear.team_key}"\napi_url = "{fake_linear.url}"\n'
        f'token_env = "{TOKEN_ENV}"\nrequest_timeout = 30\n' + extra
    )


def with_github(fake_linear: FakeLinear, fake_github: FakeGitHub, extra: str = "") -> str:
    return (
        '[provider.work_items]\nkind = "linear"\n[provider.revisions]\nkind = "github"\n'
        + linear_section(fake_linear, extra)
        + "[provider.github]\n"
        f'repository = "{fake_github.owner}/{fake_github.repo}"\n'
        f'token_env = "{GITHUB_TOKEN_ENV}"\nbase_url = "{fake_github.base_url}/"\n'
        "request_timeout = 30\n"
    )


def clone(tmp_path: Path, fake_github: FakeGitHub, config: str) -> Path:
    repo = tmp_path / "repo"
    git(tmp_path, "clone", "--quiet", str(fake_github.git.path), str(repo))
    (repo / "supervisor.toml").write_text(config)
    return repo


def inner(port: Any) -> Any:
    return port._inner  # the provider's own object behind the request meter's wrapper


def test_linear_issues_and_github_pull_requests_each_serve_their_role(
    tmp_path: Path, fake_linear: FakeLinear, fake_github: FakeGitHub, apps: list[App]
) -> None:
    repo = clone(tmp_path, fake_github, with_github(fake_linear, fake_github))
    app = build_app(None, repo)
    apps.append(app)
    provider = app.engine.provider
    assert type(inner(provider.work_item_reader)).__name__ == "LinearWorkItemReader"
    assert type(inner(provider.work_item_writer)).__name__ == "LinearWorkItemWriter"
    assert type(inner(provider.revision_reader)).__name__ == "GitHubRevisionReader"
    assert type(inner(provider.revision_writer)).__name__ == "GitHubRevisionWriter"
    # GitHub is the forge alone: no status label made, no issue read there.
    assert fake_github.labels == {}

    key = fake_linear.open_issue("Answer", "Make it 42.")
    assert [(i.id, i.title) for i in provider.work_item_reader.list_work_items()] == [
        (key, "Answer")
    ]
    patch = make_patch(fake_github.git.path, tmp_path / "patch", EDITS["modified"])
    revision = provider.revision_writer.create_from_patch(
        WorkItemId(key), f"cpe/{key}-answer", "Answer", f"Work item: #{key}", patch
    )
    body = fake_github.issue(int(revision.id)).body or ""
    assert work_item_reference(key) in body
    assert f"#{key}" not in body
    [listed] = provider.revision_reader.list_revisions()
    assert listed.work_item_id == key

    # The meter keeps each remote system's figures by its name and sums them.
    assert set(app.meter.wires) == {"linear", "github"}
    linear_sent = app.meter.wires["linear"]().requests
    assert linear_sent == len(fake_linear.requests) > 0
    assert app.meter.wire is not None
    assert app.meter.wire().requests == linear_sent + len(fake_github.requests)
    metrics = {
        (s.name, tuple(s.labels.items())): s.value
        for family in text_string_to_metric_families("\n".join(provider_metrics(app.meter)) + "\n")
        for s in family.samples
    }
    sent = "cpe_provider_http_requests_total"
    assert metrics[(sent, (("system", "linear"),))] == len(fake_linear.requests)
    assert metrics[(sent, (("system", "github"),))] == len(fake_github.requests)


def test_a_reload_reaches_linears_trust(
    tmp_path: Path, fake_linear: FakeLinear, fake_github: FakeGitHub, apps: list[App]
) -> None:
    """A guest's issue is no work until ``trust_guests`` is turned on and cpe reloaded."""
    repo = clone(tmp_path, fake_github, with_github(fake_linear, fake_github))
    app = build_app(None, repo)
    apps.append(app)
    reader = app.engine.provider.work_item_reader
    key = fake_linear.open_issue("From a guest", "Do it.", as_user=GUEST)
    assert key not in [i.id for i in reader.list_work_items()]

    trusting = with_github(fake_linear, fake_github, "trust_guests = true\n")
    (repo / "supervisor.toml").write_text(trusting)
    app.reload()
    assert key in [i.id for i in reader.list_work_items()]


def test_linear_issues_with_the_local_forge(tmp_path: Path, fake_linear: FakeLinear) -> None:
    """The local forge keeps the revisions of Linear's items: a branch in the clone naming the
    item by its identifier; no local work item is made."""
    config = (
        '[provider.work_items]\nkind = "linear"\n[provider.revisions]\nkind = "local"\n'
        "[provider.local]\npipeline_command = []\n" + linear_section(fake_linear)
    )
    repo = tmp_path / "repo"
    git(tmp_path, "init", "--quiet", "--initial-branch=main", str(repo))
    (repo / "a.txt").write_text("a\n")
    git(repo, "add", "a.txt")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-qm", "base")
    closers: list[Any] = []
    ports = build_providers(
        load_config(_write(repo, config)), repo, "main", repo / ".cpe", closers,
        meter=ProviderMeter(),
    )  # fmt: skip
    try:
        assert type(ports.work_item_reader).__name__ == "LinearWorkItemReader"
        assert type(ports.revision_writer).__name__ == "LocalRevisionWriter"
        key = fake_linear.open_issue("Answer", "Make it 42.")
        assert [i.id for i in ports.work_item_reader.list_work_items()] == [key]
        patch = make_patch(repo, tmp_path / "patch", EDITS["modified"])
        made = ports.revision_writer.create_from_patch(
            WorkItemId(key), f"cpe/{key}-answer", "Answer", f"Work item: #{key}", patch
        )
        assert made.work_item_id == key
        message = git(repo, "log", "-1", "--format=%B", f"refs/heads/cpe/{key}-answer")
        assert f"Work item: {key}" in message
    finally:
        for close in reversed(closers):
            close()


def _write(repo: Path, config: str) -> Path:
    path = repo / "supervisor.toml"
    path.write_text(config)
    return path

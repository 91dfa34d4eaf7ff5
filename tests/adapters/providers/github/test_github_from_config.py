"""The GitHub provider as ``supervisor.toml`` configures it, built by the composition root
(``build_app``) against the fake GitHub: the token comes from the variable ``token_env`` names,
and ``workflow.branch_prefix`` is the prefix that links a pull request to its work item."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import structlog.testing

from adapters.cli.build import App, build_app
from domain.errors import ConfigError
from domain.models import WorkItemId
from tests.fakes.github import FakeGitHub
from tests.support.git import git, make_repo
from tests.support.github import running_github

TOKEN_ENV = "CPE_BOT_GITHUB_TOKEN"  # not the default GITHUB_TOKEN
TOKEN = "token-from-the-named-variable"


@pytest.fixture
def fake_github(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeGitHub]:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-never-sent")  # past the preflight
    # GITHUB_TOKEN holds a token the fake accepts too, as another user: a provider that read
    # the default variable instead of the named one would be seen doing so.
    tokens = {TOKEN: "cpe-bot", "token-from-github-token": "someone-else"}
    with running_github(tmp_path, monkeypatch, tokens=tokens) as gh:
        yield gh


def configured_repo(tmp_path: Path, fake_github: FakeGitHub, extra: str = "") -> Path:
    repo = make_repo(tmp_path / "repo")
    (repo / "supervisor.toml").write_text(
        '[provider]\nkind = "github"\n'
        "[provider.github]\n"
        f'repository = "{fake_github.owner}/{fake_github.repo}"\n'
        f'token_env = "{TOKEN_ENV}"\n'
        f'base_url = "{fake_github.base_url}/"\n'
        "request_timeout = 30\n" + extra
    )
    return repo


@pytest.fixture
def app_for(
    tmp_path: Path, fake_github: FakeGitHub, monkeypatch: pytest.MonkeyPatch
) -> Iterator[list[App]]:
    """Apps a test builds, closed at its end."""
    monkeypatch.setenv("GITHUB_TOKEN", "token-from-github-token")
    built: list[App] = []
    yield built
    for app in built:
        app.close()


def test_the_provider_authenticates_with_the_token_in_the_variable_the_config_names(
    tmp_path: Path, fake_github: FakeGitHub, app_for: list[App], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(TOKEN_ENV, TOKEN)
    app = build_app(None, configured_repo(tmp_path, fake_github))
    app_for.append(app)
    fake_github.add_issue("Filed by someone")
    provider = app.engine.provider
    made = provider.work_item_writer.create_work_item("Filed by cpe", "b")
    listed = {i.id: i.title for i in provider.work_item_reader.list_work_items()}
    assert listed == {"1": "Filed by someone", made: "Filed by cpe"}
    assert fake_github.issues[int(made)].user == "cpe-bot"  # the named variable's token's user
    assert fake_github.requests
    assert {r.authorization for r in fake_github.requests} == {f"token {TOKEN}"}


def test_a_missing_token_variable_is_a_configuration_error_naming_it(
    tmp_path: Path, fake_github: FakeGitHub, app_for: list[App], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(TOKEN_ENV, raising=False)
    with pytest.raises(ConfigError, match=TOKEN_ENV) as raised:
        build_app(None, configured_repo(tmp_path, fake_github))
    assert "token_env" in str(raised.value)
    assert fake_github.requests == []


def test_the_workflow_branch_prefix_links_a_pull_request_to_its_work_item(
    tmp_path: Path, fake_github: FakeGitHub, app_for: list[App], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(TOKEN_ENV, TOKEN)
    repo = configured_repo(tmp_path, fake_github, '[workflow]\nbranch_prefix = "bot/"\n')
    app = build_app(None, repo)
    app_for.append(app)
    item = fake_github.add_issue("Item")
    # No "Closes #N" in either body: only the branch name can link them.
    ours = fake_github.add_pull(f"bot/{item}-item", {"src/new.py": "x\n"}, "Ours", "No keyword.")
    other = fake_github.add_pull(
        f"cpe/{item}-item", {"src/other.py": "y\n"}, "Other", "No keyword."
    )
    provider = app.engine.provider
    linked = {r.id: r.work_item_id for r in provider.revision_reader.list_revisions()}
    assert linked == {str(ours): WorkItemId(str(item)), str(other): None}
    [work_item] = provider.work_item_reader.list_work_items()
    assert work_item.linked_revision == str(ours)


def test_on_github_specs_and_worktrees_follow_the_default_branch_fetched_from_origin(
    tmp_path: Path, fake_github: FakeGitHub, app_for: list[App], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The default branch moves on GitHub (cpe merges there): with the local repository a clone
    of it, a spec committed on GitHub is planned without a pull, and implementors' worktrees
    start at the fetched head (``origin/main``), not the local branch."""
    monkeypatch.setenv(TOKEN_ENV, TOKEN)
    local = tmp_path / "clone"
    git(tmp_path, "clone", "--quiet", str(fake_github.git.path), str(local))
    config = (configured_repo(tmp_path, fake_github) / "supervisor.toml").read_text()
    (local / "supervisor.toml").write_text(config)
    app = build_app(None, local)
    app_for.append(app)
    fake_github.commit_to_default({"specs/new.md": "# New\n\nA new spec.\n"}, "spec upstream")

    specs = {s.path for s in app.engine.provider.spec_reader.list_specs()}
    assert "specs/new.md" in specs
    assert not (local / "specs" / "new.md").exists()  # nobody pulled
    adapters = {type(a).__name__: a for a in app.engine.runtime_adapters.values()}
    assert {a.config.default_branch for a in adapters.values()} == {"origin/main"}


def test_on_github_without_an_origin_the_local_branch_is_used_and_the_log_says_so(
    tmp_path: Path, fake_github: FakeGitHub, app_for: list[App], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(TOKEN_ENV, TOKEN)
    with structlog.testing.capture_logs() as logs:
        app = build_app(None, configured_repo(tmp_path, fake_github))
    app_for.append(app)
    assert any("has no remote 'origin'" in e["event"] for e in logs)
    adapters = app.engine.runtime_adapters.values()
    assert {a.config.default_branch for a in adapters} == {"main"}

"""The GitLab provider as ``supervisor.toml`` configures it, built by the composition root
(``build_app``) against the fake GitLab: the token comes from the variable ``token_env`` names,
and the trust settings of ``[provider.gitlab]`` decide whose issues are work."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from adapters.cli.build import App, build_app
from domain.errors import ConfigError
from tests.fakes.gitlab import FakeGitLab
from tests.fakes.gitlab.records import Token
from tests.support.git import make_repo
from tests.support.gitlab import running_gitlab

TOKEN_ENV = "CPE_BOT_GITLAB_TOKEN"  # not the default GITLAB_TOKEN
TOKEN = "glpat-from-the-named-variable"


@pytest.fixture
def fake_gitlab(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeGitLab]:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-never-sent")  # past the preflight
    # GITLAB_TOKEN holds a token the fake accepts too, as another user: a provider that read
    # the default variable instead of the named one would be seen doing so.
    tokens = {TOKEN: "cpe-bot", "glpat-from-gitlab-token": Token("someone-else")}
    with running_gitlab(tmp_path, monkeypatch, tokens=tokens) as gl:
        yield gl


def configured_repo(tmp_path: Path, fake_gitlab: FakeGitLab, extra: str = "") -> Path:
    repo = make_repo(tmp_path / "repo")
    (repo / "supervisor.toml").write_text(
        '[provider]\nkind = "gitlab"\n'
        "[provider.gitlab]\n"
        f'project = "{fake_gitlab.project_path}"\n'
        f'token_env = "{TOKEN_ENV}"\n'
        f'base_url = "{fake_gitlab.base_url}"\n'
        "request_timeout = 30\n" + extra
    )
    return repo


@pytest.fixture
def app_for(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[App]]:
    """Apps a test builds, closed at its end."""
    monkeypatch.setenv("GITLAB_TOKEN", "glpat-from-gitlab-token")
    built: list[App] = []
    yield built
    for app in built:
        app.close()


def test_the_provider_authenticates_with_the_token_in_the_variable_the_config_names(
    tmp_path: Path, fake_gitlab: FakeGitLab, app_for: list[App], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(TOKEN_ENV, TOKEN)
    app = build_app(None, configured_repo(tmp_path, fake_gitlab))
    app_for.append(app)
    fake_gitlab.open_issue("Filed by someone", "b", author="someone")
    provider = app.engine.provider
    made = provider.work_item_writer.create_work_item("Filed by cpe", "b")
    listed = {i.id: i.title for i in provider.work_item_reader.list_work_items()}
    assert listed == {"1": "Filed by someone", made: "Filed by cpe"}
    assert fake_gitlab.issues[int(made)].author == "cpe-bot"  # the named variable's user
    assert fake_gitlab.requests
    assert {r.token for r in fake_gitlab.requests} == {TOKEN}


def test_a_missing_token_variable_is_a_configuration_error_naming_it(
    tmp_path: Path, fake_gitlab: FakeGitLab, app_for: list[App], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(TOKEN_ENV, raising=False)
    with pytest.raises(ConfigError, match=TOKEN_ENV) as raised:
        build_app(None, configured_repo(tmp_path, fake_gitlab))
    assert "token_env" in str(raised.value)
    assert fake_gitlab.requests == []


def test_the_trust_settings_decide_whose_issues_are_work(
    tmp_path: Path, fake_gitlab: FakeGitLab, app_for: list[App], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(TOKEN_ENV, TOKEN)
    fake_gitlab.add_member("triager", "reporter")
    triaged = fake_gitlab.open_issue("Triaged", "b", author="triager")
    stranger = fake_gitlab.open_issue("Stranger's", "b", author="stranger")
    extra = 'trusted_access_level = "reporter"\nrequired_labels = []\n'
    app = build_app(None, configured_repo(tmp_path, fake_gitlab, extra))
    app_for.append(app)
    reader = app.engine.provider.work_item_reader
    assert [i.id for i in reader.list_work_items()] == [str(triaged)]
    assert [i.id for i in reader.ignored_work_items()] == [str(stranger)]


def test_a_token_that_may_not_create_the_status_labels_stops_the_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-never-sent")
    monkeypatch.setenv(TOKEN_ENV, TOKEN)
    tokens = {TOKEN: Token("guest-bot", access_level=10)}  # a Guest may not create labels
    with running_gitlab(tmp_path, monkeypatch, tokens=tokens) as fake:
        with pytest.raises(ConfigError) as raised:
            build_app(None, configured_repo(tmp_path, fake))
        assert "may not create the label 'status::pending'" in str(raised.value)
        assert "status::blocked" in str(raised.value)  # create them by hand, it says
        assert not any(name.startswith("status::") for name in fake.labels)

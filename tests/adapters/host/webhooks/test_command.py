"""``cpe webhooks``: for each provider, the URL to register, where, the content type, the events
by the role the vendor plays, the secret's variable and whether it is set (never its value), how
to test; a vendor not configured says which key to set; a bad file is one line, exit 78. As a
user runs it (a subprocess), it stays off the engine and the web stack."""

from __future__ import annotations

from pathlib import Path

import pytest

from adapters.cli.settings import parse_config
from adapters.cli.webhooks import describe
from tests.adapters.cli.test_cli import cpe, one_line_error
from tests.adapters.cli.test_imports import ENGINE_ONLY, imported, within
from tests.support.git import make_repo

SECRET = "the-hooks-secret-value-0042"

GITHUB = """
[provider]
kind = "github"
[provider.github]
repository = "octo/hello"
[webhooks]
github_secret_env = "CPE_GITHUB_WEBHOOK_SECRET"
"""


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "repo", {"supervisor.toml": GITHUB})


def test_it_says_how_to_register_the_github_hook_and_never_the_secret(repo: Path) -> None:
    done = cpe("webhooks", cwd=repo, env={"CPE_GITHUB_WEBHOOK_SECRET": SECRET})
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "GitHub (the tracker and the forge)" in out
    assert "URL           http://127.0.0.1:8765/hooks/github" in out
    assert "register at   https://github.com/octo/hello/settings/hooks/new" in out
    assert "content type  application/json" in out
    assert "secret        $CPE_GITHUB_WEBHOOK_SECRET (set)" in out
    assert "Issues, Issue comments, Pull requests" in out
    assert "Check runs" in out
    assert "ping" in out
    assert "reverse proxy or a tunnel" in out  # a loopback address is not reachable as it is
    assert SECRET not in out + done.stderr


def test_an_unset_secret_says_cpe_run_refuses_to_start(repo: Path) -> None:
    done = cpe("webhooks", cwd=repo)
    assert done.returncode == 0, done.stderr
    assert "$CPE_GITHUB_WEBHOOK_SECRET (NOT SET: cpe run refuses to start)" in done.stdout


def test_a_bad_webhooks_section_is_one_line_exit_78(tmp_path: Path) -> None:
    repo = make_repo(
        tmp_path / "repo", {"supervisor.toml": GITHUB.replace("CPE_GITHUB", "not a name ")}
    )
    line = one_line_error(cpe("webhooks", cwd=repo))
    assert "webhooks.github_secret_env" in line
    assert "expected the NAME of an environment variable" in line


def test_it_stays_off_the_engine_and_the_web_stack(repo: Path) -> None:
    modules = imported("webhooks", cwd=repo)
    assert "adapters.cli.webhooks" in modules
    assert within(modules, (*ENGINE_ONLY, "starlette", "uvicorn")) == []


def test_a_composed_provider_lists_each_vendors_own_events() -> None:
    config = parse_config(
        {
            "provider": {
                "work_items": {"kind": "jira"},
                "revisions": {"kind": "github"},
                "jira": {
                    "base_url": "https://acme.atlassian.net",
                    "project": "ENG",
                    "email": "a@acme.example",
                },
                "github": {"repository": "octo/hello"},
            },
            "webhooks": {"jira_secret_env": "JIRA_HOOK", "listen": "0.0.0.0:8766"},
        }
    )
    text = describe(config, {"JIRA_HOOK": SECRET})
    jira, github = text.split("\n\nJira")[1], text.split("GitHub")[1]
    assert "URL           http://THIS-HOST:8766/hooks/jira" in jira
    assert "[webhooks] listen, /hooks/* only" in jira
    assert "https://acme.atlassian.net/plugins/servlet/webhooks" in jira
    assert "$JIRA_HOOK (set)" in jira
    assert "Issue: created, updated, deleted" in jira
    assert github.startswith(" (the forge)")
    assert 'not configured: set [webhooks] github_secret_env = "NAME"' in github
    assert SECRET not in text


def test_with_nothing_serving_the_hooks_it_says_so() -> None:
    config = parse_config(
        {
            "provider": {"kind": "github", "github": {"repository": "octo/hello"}},
            "dashboard": {"listen": ""},
            "webhooks": {"github_secret_env": "HOOK"},
        }
    )
    assert "nothing serves the hooks: set [webhooks] listen" in describe(config, {})


def test_the_local_provider_has_nothing_to_register() -> None:
    text = describe(parse_config({}), {})
    assert "The provider is local: it has no vendor to send webhooks" in text

"""The composition root with Linear or Jira keeping the work items (trackers only) and GitHub,
GitLab or the local forge keeping the revisions: a token variable left unset is refused before
anything is built or asked, and the items' pages are named for ``cpe work show`` and the
dashboard."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

import pytest

from adapters.cli.build import _reloadable
from adapters.cli.providers import build_providers, issue_pages
from adapters.cli.settings import load_config, parse_config
from adapters.host.metering import ProviderMeter
from adapters.providers.local.provider import DATABASE_NAME
from domain.errors import ConfigError
from domain.models import WorkItem, WorkItemId
from tests.support.git import make_repo

LINEAR = '[provider.linear]\nteam = "ENG"\ntoken_env = "CPE_COMPOSE_LINEAR_KEY"\n'
JIRA = (
    '[provider.jira]\nbase_url = "https://acme.atlassian.net/"\nproject = "PROJ"\n'
    'email = "bot@acme.example"\ntoken_env = "CPE_COMPOSE_JIRA_TOKEN"\n'
)
GITHUB = '[provider.github]\nrepository = "acme/widgets"\ntoken_env = "CPE_COMPOSE_GH"\n'


def pair(tracker: str, forge: str) -> str:
    sections = {"linear": LINEAR, "jira": JIRA, "github": GITHUB, "local": ""}
    return (
        f'[provider.work_items]\nkind = "{tracker}"\n[provider.revisions]\nkind = "{forge}"\n'
        "[provider.local]\npipeline_command = []\n" + sections[tracker] + sections[forge]
    )


@pytest.mark.parametrize(
    ("tracker", "forge", "variable", "token"),
    [
        (
            "linear",
            "local",
            "CPE_COMPOSE_LINEAR_KEY",
            "a Linear personal API key or OAuth access token",
        ),
        (
            "jira",
            "local",
            "CPE_COMPOSE_JIRA_TOKEN",
            "a Jira API token (Cloud, with email) or personal access token (Data Center)",
        ),
        (
            "jira",
            "github",
            "CPE_COMPOSE_JIRA_TOKEN",
            "a Jira API token (Cloud, with email) or personal access token (Data Center)",
        ),
    ],
)
def test_a_trackers_token_variable_unset_is_refused_before_anything_is_built(
    tmp_path: Path, tracker: str, forge: str, variable: str, token: str
) -> None:
    repo = make_repo(tmp_path / "repo", {"supervisor.toml": pair(tracker, forge)})
    config = load_config(repo / "supervisor.toml")
    closers: list[Any] = []
    for value, said in ((None, "is not set"), ("", "is empty"), (" \n", "is empty")):
        environ = {"CPE_COMPOSE_GH": "gh-token"}
        if value is not None:
            environ[variable] = value
        with pytest.raises(ConfigError) as refused:
            build_providers(
                config, repo, "main", repo / ".cpe", closers, meter=ProviderMeter(),
                environ=environ,
            )  # fmt: skip
        assert str(refused.value) == (
            f"provider.{tracker}.token_env: the environment variable {variable} {said}; "
            f"expected {token} in that variable"
        )
    assert closers == []
    # The tracker is built first: the forge (the local one's database) was not.
    assert not (repo / ".cpe" / DATABASE_NAME).exists()


def item(wid: str) -> WorkItem:
    return WorkItem(id=WorkItemId(wid), title="An item", status="pending")


def test_a_jira_items_page_is_its_browse_address() -> None:
    config = parse_config(tomllib.loads(pair("jira", "local")))
    pages = issue_pages(config)
    assert pages is not None
    assert pages.body(item("PROJ-12")) == "(on Jira: https://acme.atlassian.net/browse/PROJ-12)"


def test_a_linear_item_is_named_by_its_identifier() -> None:
    """Linear's address holds the workspace's URL key, which the settings do not name."""
    config = parse_config(tomllib.loads(pair("linear", "github")))
    pages = issue_pages(config)
    assert pages is not None
    assert pages.body(item("ENG-3")) == "(on Linear: ENG-3)"


def test_a_local_tracker_has_no_pages_to_name() -> None:
    assert issue_pages(parse_config({})) is None


@pytest.mark.parametrize(
    ("key", "applied"),
    [
        ("provider.linear.trusted_users", True),
        ("provider.linear.trust_guests", True),
        ("provider.linear.admit_label", True),
        ("provider.jira.trusted_groups", True),
        ("provider.jira.trusted_permission", True),
        ("provider.jira.required_labels", True),
        ("provider.linear.team", False),
        ("provider.jira.project", False),
        ("provider.jira.token_env", False),
    ],
)
def test_a_reload_applies_a_trackers_trust_settings_and_no_other(key: str, applied: bool) -> None:
    """Who is trusted changes on SIGHUP (the provider's ``trust.configure``); the team, the
    project or the token need a restart."""
    assert _reloadable(key) is applied

"""What the provider checks at start, each failure one clear line: the token, the project and
its issue type, the blockers' link type, the JQL, the status mapping; and what that costs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from adapters.providers import ProviderRoles
from adapters.providers.jira import create_jira_provider
from domain.errors import ConfigError
from tests.fakes.jira import FakeJira
from tests.support.jira import running_jira
from tests.support.jira_provider import TOKEN_ENV, jira_provider, settings_for


def start(jira: FakeJira, **overrides: Any) -> None:
    with jira_provider(jira, **overrides):
        pass


def test_a_start_costs_five_requests_and_writes_nothing(jira: FakeJira) -> None:
    with jira_provider(jira) as provider:
        assert provider.stats.requests == 5
    assert [r.write for r in jira.requests] == [False] * 5
    assert {r.user for r in jira.requests} == {"cpe-bot"}
    expected = "basic" if jira.deployment == "cloud" else "bearer"
    assert {r.scheme for r in jira.requests} == {expected}


def test_a_token_jira_refuses_stops_the_start_naming_the_variable_not_the_token(
    jira: FakeJira,
) -> None:
    with pytest.raises(ConfigError, match=f"refused the token in {TOKEN_ENV} \\(401") as caught:
        start(jira, token="wrong-secret-token")
    assert "wrong-secret-token" not in str(caught.value)
    assert "provider.jira.token_env" in str(caught.value)


def test_a_project_jira_does_not_show_is_named(jira: FakeJira) -> None:
    with pytest.raises(ConfigError, match="shows no project NOPE"):
        start(jira, project="NOPE")


def test_an_issue_type_the_project_lacks_is_refused_listing_its_types(jira: FakeJira) -> None:
    with pytest.raises(ConfigError, match="no issue type 'Chore'; its issue types: Task, Bug"):
        start(jira, issue_type="Chore")


def test_a_link_type_the_site_lacks_is_refused_listing_its_types(jira: FakeJira) -> None:
    with pytest.raises(ConfigError, match="no issue link type 'Depends'; its link types: Blocks"):
        start(jira, blocks_link="Depends")


def test_a_jql_jira_refuses_is_said_in_jira_s_words(jira: FakeJira) -> None:
    with pytest.raises(
        ConfigError, match="refuses the JQL 'project = PROJ AND': Error in the JQL"
    ) as caught:
        start(jira, jql="project = PROJ AND")
    assert "provider.jira.jql" in str(caught.value)


def test_a_workflow_without_cpe_s_statuses_is_refused_listing_what_exists(
    tmp_path: Path,
) -> None:
    with running_jira(root=tmp_path) as bare:  # To Do, In Progress, In Review, Done only
        with pytest.raises(
            ConfigError, match="no status for needs-refinement, approved, blocked;"
        ) as caught:
            start(bare)
        assert "To Do (new), In Progress (indeterminate), In Review (indeterminate)" in str(
            caught.value
        )
        # Named, the missing ones are found.
        bare.add_status("Rework", "new")
        bare.add_status("Ready", "indeterminate")
        bare.add_status("On Hold", "indeterminate")
        mapping = {"needs-refinement": "Rework", "approved": "Ready", "blocked": "On Hold"}
        with jira_provider(bare, statuses=mapping) as provider:
            assert provider.statuses.target("blocked").name == "On Hold"


def test_jira_keeps_work_items_only(jira: FakeJira) -> None:
    with pytest.raises(ConfigError, match="Jira keeps work items only"):
        create_jira_provider(
            settings_for(jira),
            None,
            roles=ProviderRoles(),  # type: ignore[arg-type]
        )
    assert jira.requests == []


def test_the_factory_takes_the_section_as_a_mapping(jira: FakeJira) -> None:
    section = settings_for(jira).model_dump()
    provider, interfaces = create_jira_provider(
        section,
        None,  # type: ignore[arg-type]
        environ={TOKEN_ENV: "test-token"},
        roles=ProviderRoles(revisions=False),
    )
    with provider:
        assert interfaces is None
        assert provider.revision_reader is None
        assert provider.revision_writer is None
        assert provider.work_item_reader.list_work_items() == []

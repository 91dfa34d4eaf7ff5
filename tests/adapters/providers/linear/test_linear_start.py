"""What the Linear provider checks at start, one line each, before any work: the token (API
key sent bare, OAuth token as Bearer), the team, the project, every status a workflow state,
and the roles (work items only)."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from adapters.providers import ProviderRoles
from adapters.providers.linear import LinearProvider, create_linear_provider
from domain.errors import ConfigError, ProviderError
from tests.fakes.linear.fake import API_KEY, OAUTH_TOKEN, FakeLinear
from tests.support.linear import TOKEN_ENV
from tests.support.linear_provider import linear_provider, settings_for, with_cpe_states


def start(linear: FakeLinear, **settings: Any) -> None:
    """A provider started (its checks made) and closed."""
    with linear_provider(linear, **settings):
        pass


@pytest.fixture
def linear(fake_linear: FakeLinear) -> FakeLinear:
    return with_cpe_states(fake_linear)


def test_a_start_asks_three_things_and_the_oauth_token_goes_as_bearer(linear: FakeLinear) -> None:
    with linear_provider(linear, token=OAUTH_TOKEN) as provider:
        assert provider.stats.requests == 3  # viewer, team, the admit label made
    assert [r.auth for r in linear.requests] == ["oauth"] * 3
    assert linear.operations() == ["CpeViewer", "CpeTeam", "CpeLabelCreate"]
    linear.clear_requests()
    with linear_provider(linear):
        pass
    assert linear.operations() == ["CpeViewer", "CpeTeam"]  # the label is there now
    assert [r.auth for r in linear.requests] == ["api_key"] * 2


def test_a_refused_token_stops_the_start_naming_the_variable_never_the_token(
    linear: FakeLinear, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    with pytest.raises(ConfigError) as caught:
        start(linear, token="lin_api_wrong_secret")
    message = str(caught.value)
    assert message.startswith(f"provider.linear.token_env: Linear at {linear.base_url}")
    assert f"refused the token in {TOKEN_ENV} (401)" in message
    assert "lin_api_wrong_secret" not in message + caplog.text
    assert "(401), sent as a personal API key, by its prefix;" in message
    with pytest.raises(ConfigError, match="refused the token") as caught:
        # An OAuth token sent as an API key (auth says so) is refused as Linear refuses it.
        start(linear, token=OAUTH_TOKEN, auth="api_key")
    assert "(401), sent as a personal API key, auth = 'api_key';" in str(caught.value)
    with pytest.raises(ConfigError) as caught:  # and the other way round
        start(linear, token=API_KEY, auth="oauth")
    assert "(401), sent as an OAuth access token (Bearer), auth = 'oauth';" in str(caught.value)


def test_a_missing_token_variable_is_named(linear: FakeLinear) -> None:
    with pytest.raises(ConfigError, match=f"{TOKEN_ENV} holds no Linear token"):
        LinearProvider(settings_for(linear), environ={})


def test_an_unknown_team_or_project_stops_the_start(linear: FakeLinear) -> None:
    with pytest.raises(
        ConfigError, match=r"provider\.linear\.team: .* shows no team OPS"
    ) as caught:
        start(linear, team="OPS")
    # a typo is one look away: the teams the token sees are named
    assert "the token's user is not in it; the teams it shows: ENG;" in str(caught.value)
    with pytest.raises(ConfigError, match=r"provider\.linear\.project: .*no project named 'Nope'"):
        start(linear, project="Nope")


def test_a_status_without_a_state_stops_the_start_listing_the_states(
    fake_linear: FakeLinear,
) -> None:
    with pytest.raises(ConfigError) as caught:  # Linear's default workflow only
        start(fake_linear)
    message = str(caught.value)
    assert "no workflow state for needs-refinement ('Needs Refinement'), " in message
    assert "Triage (triage), Backlog (backlog), Todo (unstarted), In Progress (started)" in message
    # the states it may name: not those other statuses take, nor the triage inbox
    assert message.endswith("[provider.linear.states] (not taken: Backlog)")
    fake_linear.add_state("On Hold", "started")
    mapped = {"approved": "Triage", "needs-refinement": "Backlog", "blocked": "On Hold"}
    with pytest.raises(ConfigError, match="approved is the workflow state 'Triage' of team ENG"):
        start(fake_linear, states=mapped)
    fake_linear.add_state("Ready to Merge", "started")
    mapped["approved"] = "Ready to Merge"
    with linear_provider(fake_linear, states=mapped) as provider:
        assert provider.workflow.state_names == {
            "pending": "Todo",
            "in-progress": "In Progress",
            "in-review": "In Review",
            "approved": "Ready to Merge",
            "needs-refinement": "Backlog",
            "blocked": "On Hold",
            "done": "Done",
        }


def test_revisions_are_refused_and_the_factory_gives_no_interfaces(linear: FakeLinear) -> None:
    with pytest.raises(ConfigError, match="Linear keeps work items only"):
        LinearProvider(settings_for(linear), environ={TOKEN_ENV: "x"}, roles=ProviderRoles())
    provider, interfaces = create_linear_provider(
        settings_for(linear).model_dump(),
        spec_reader=None,
        environ={TOKEN_ENV: "lin_api_cpe_test_key"},  # type: ignore[arg-type]
    )
    with provider:
        assert interfaces is None
        assert provider.revision_reader is None
        assert provider.revision_writer is None


def test_linear_failing_at_start_is_a_transient_provider_error(linear: FakeLinear) -> None:
    linear.fail_operation("CpeTeam", 502, times=10)
    with pytest.raises(ProviderError) as caught:
        start(linear)
    assert not isinstance(caught.value, ConfigError)
    assert caught.value.transient

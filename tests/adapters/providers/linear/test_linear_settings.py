"""``[provider.linear]`` as ``LinearSettings`` checks it (pure: no Linear needed)."""

from __future__ import annotations

import subprocess
import sys

import pytest
from pydantic import ValidationError

from adapters.providers.linear.settings import LinearSettings


def test_loading_the_settings_does_not_import_httpx() -> None:
    code = (
        "import sys\n"
        "from adapters.providers.linear import LinearSettings\n"
        "LinearSettings(team='ENG')\n"
        "print('httpx' in sys.modules, 'adapters.providers.linear.provider' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False False"


def test_the_defaults_are_linear_s_endpoint_the_key_variable_and_named_states() -> None:
    settings = LinearSettings(team="eng")
    assert settings.team == "ENG"
    assert settings.api_url == "https://api.linear.app/graphql"
    assert settings.token_env == "LINEAR_API_KEY"
    assert settings.state_name("in-review") == "In Review"
    assert settings.state_name("pending") is None  # found by the states' types
    assert settings.admit_label == "cpe:admit"
    assert settings.trust_guests is False


def test_the_token_kind_is_told_by_its_prefix_unless_auth_says() -> None:
    settings = LinearSettings(team="ENG")
    assert settings.auth_kind("lin_api_abc") == "api_key"
    assert settings.auth_kind("lin_oauth_abc") == "oauth"
    assert LinearSettings(team="ENG", auth="oauth").auth_kind("lin_api_abc") == "oauth"


@pytest.mark.parametrize("team", ["", "ENG-1", "9ENG", "ENGINEERING1", "E G"])
def test_a_team_that_is_no_team_key_is_refused(team: str) -> None:
    with pytest.raises(ValidationError, match="team"):
        LinearSettings(team=team)


@pytest.mark.parametrize("url", ["api.linear.app/graphql", "ftp://x/graphql", "https://"])
def test_an_endpoint_that_is_no_url_is_refused_naming_linear_s(url: str) -> None:
    with pytest.raises(ValidationError, match=r"https://api\.linear\.app/graphql"):
        LinearSettings(team="ENG", api_url=url)


def test_states_given_for_some_statuses_keep_the_defaults_of_the_others() -> None:
    settings = LinearSettings(team="ENG", states={"in-review": "Code Review", "done": "Shipped"})
    assert settings.state_name("in-review") == "Code Review"
    assert settings.state_name("done") == "Shipped"
    assert settings.state_name("blocked") == "Blocked"


def test_two_statuses_in_one_state_are_refused() -> None:
    with pytest.raises(ValidationError, match="same workflow state"):
        LinearSettings(team="ENG", states={"in-review": "Review", "approved": "review"})


def test_an_unknown_status_or_an_empty_state_is_refused() -> None:
    with pytest.raises(ValidationError, match="states"):
        LinearSettings(team="ENG", states={"reviewing": "Review"})  # type: ignore[dict-item]
    with pytest.raises(ValidationError, match="no workflow state for blocked"):
        LinearSettings(team="ENG", states={"blocked": " "})


def test_trusted_users_are_emails_compared_without_case() -> None:
    settings = LinearSettings(team="ENG", trusted_users=("Ada@Example.org",))
    assert settings.trusted_users == ("ada@example.org",)
    with pytest.raises(ValidationError, match="expected the users' emails"):
        LinearSettings(team="ENG", trusted_users=("ada",))


def test_unknown_keys_and_a_blank_project_are_refused() -> None:
    with pytest.raises(ValidationError, match="extra"):
        LinearSettings(team="ENG", token="lin_api_x")  # type: ignore[call-arg]
    with pytest.raises(ValidationError, match="project"):
        LinearSettings(team="ENG", project=" ")

"""The preflight at start: a runtime with no model credential stops cpe before any run."""

from __future__ import annotations

from pathlib import Path

import pytest

from adapters.runtime.preflight import check_credentials, claude_credential, codex_credential
from domain.errors import ConfigError


def test_no_credential_for_the_claude_runtimes_names_what_to_set(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no model credential for the claude CLI") as raised:
        check_credentials({"claude-sdk"}, {}, isolated_home=False, environ={"HOME": str(tmp_path)})
    assert "ANTHROPIC_API_KEY" in str(raised.value)


def test_no_credential_for_codex_names_what_to_set(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="codex-cli: no model credential") as raised:
        check_credentials({"codex-cli"}, {}, isolated_home=False, environ={"HOME": str(tmp_path)})
    assert "OPENAI_API_KEY" in str(raised.value)


@pytest.mark.parametrize(
    "variable", ["ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "CLAUDE_CODE_OAUTH_TOKEN"]
)
def test_a_key_in_the_environment_is_a_claude_credential(variable: str, tmp_path: Path) -> None:
    assert claude_credential({variable: "x"}, tmp_path) == variable
    assert claude_credential({variable: "  "}, tmp_path) is None  # empty is none


def test_a_claude_login_counts_unless_the_home_is_isolated(tmp_path: Path) -> None:
    login = tmp_path / ".claude" / ".credentials.json"
    login.parent.mkdir()
    login.write_text('{"claudeAiOauth": {}}')
    assert claude_credential({}, tmp_path) == str(login)
    environ = {"HOME": str(tmp_path)}
    check_credentials({"claude-cli"}, {}, isolated_home=False, environ=environ)
    with pytest.raises(ConfigError):  # an isolated run cannot see the user's login
        check_credentials({"claude-cli"}, {}, isolated_home=True, environ=environ)


def test_a_codex_login_in_codex_home_counts(tmp_path: Path) -> None:
    (tmp_path / "codex").mkdir()
    (tmp_path / "codex" / "auth.json").write_text("{}")
    assert codex_credential({"CODEX_HOME": str(tmp_path / "codex")}, tmp_path) is not None
    assert codex_credential({"OPENAI_API_KEY": "k"}, None) == "OPENAI_API_KEY"


def test_what_cpe_adds_on_purpose_counts(tmp_path: Path) -> None:
    """The demo gives the agents its scripted model's key through ``agent_env``."""
    check_credentials(
        {"claude-sdk"}, {"ANTHROPIC_API_KEY": "scripted"}, isolated_home=True, environ={}
    )


def test_a_codex_with_its_own_model_provider_needs_no_openai_key(tmp_path: Path) -> None:
    """``-c model_provider=…`` (the demo's scripted model, a proxy): that provider's settings
    say where its key comes from."""
    check_credentials(
        {"codex-cli"},
        {},
        isolated_home=True,
        environ={},
        codex_overrides=['model_provider="scripted"'],
    )

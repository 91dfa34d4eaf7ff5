"""The preflight at start: a runtime with no model credential, or agent commands with no sandbox,
stop cpe before any run."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from adapters.runtime.preflight import (
    check_credentials,
    check_sandbox,
    claude_credential,
    codex_credential,
    find_sandbox,
)
from adapters.runtime.sandbox import Sandbox, SandboxConfig
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


# ---------------------------------------------------------------------------- the sandbox


def fake_bwrap(directory: Path, script: str) -> str:
    """A ``bwrap`` on a PATH of its own (with the system's tools) that runs ``script``."""
    directory.mkdir(parents=True, exist_ok=True)
    bwrap = directory / "bwrap"
    bwrap.write_text(f"#!/bin/sh\n{script}\n")
    bwrap.chmod(0o755)
    return f"{directory}:/usr/bin:/bin"


def test_without_bubblewrap_the_sandbox_names_what_is_missing(tmp_path: Path) -> None:
    found = find_sandbox(SandboxConfig(), environ={"PATH": str(tmp_path)})
    assert isinstance(found, str)
    assert "bubblewrap (bwrap) is not installed" in found
    with pytest.raises(ConfigError, match="sandbox: bubblewrap") as raised:
        check_sandbox(SandboxConfig(), environ={"PATH": str(tmp_path)})
    assert "[sandbox] required = false" in str(raised.value)


def test_a_bubblewrap_that_cannot_make_namespaces_is_no_sandbox(tmp_path: Path) -> None:
    path = fake_bwrap(
        tmp_path / "bin",
        'echo "bwrap: No permissions to creating new namespace, likely because the kernel does '
        'not allow non-privileged user namespaces" >&2; exit 1',
    )
    found = find_sandbox(SandboxConfig(), environ={"PATH": path})
    assert isinstance(found, str)
    assert "cannot set up a sandbox here" in found
    assert "No permissions to creating new namespace" in found


def test_a_bubblewrap_that_lets_the_trial_write_is_no_sandbox(tmp_path: Path) -> None:
    """The trial command must fail to write: a bwrap that only runs it (a wrapper left on the
    PATH, a broken install) confines nothing."""
    path = fake_bwrap(
        tmp_path / "bin", 'while [ "$1" != "--" ]; do shift; done; shift; echo writable'
    )
    found = find_sandbox(SandboxConfig(), environ={"PATH": path})
    assert isinstance(found, str)
    assert "cannot set up a sandbox here (writable)" in found


def test_not_required_the_missing_sandbox_is_a_reason_not_an_error(tmp_path: Path) -> None:
    found = check_sandbox(SandboxConfig(required=False), environ={"PATH": str(tmp_path)})
    assert isinstance(found, str)
    assert "not installed" in found


def test_the_real_bubblewrap_gives_a_sandbox_with_the_settings(tmp_path: Path) -> None:
    found = check_sandbox(SandboxConfig(protected_paths=("~/.config/acme", "/srv/secrets")))
    assert isinstance(found, Sandbox)
    assert found.bwrap.endswith("bwrap")
    assert found.version.startswith("bubblewrap")
    assert found.network == "none"
    assert found.proxy_socket is None
    assert {".claude", ".codex", "~/.config/acme", "/srv/secrets"} <= set(found.protected)
    assert "ANTHROPIC_API_KEY" in found.unset_env
    assert "OPENAI_API_KEY" in found.unset_env


@pytest.mark.parametrize(
    "settings",
    [
        {"protected_paths": ["relative/x"]},
        {"protected_paths": ["~/.config/*"]},
        {"registries": ["https://pypi.org"]},
        {"required": "sometimes"},
        {"allow_intall": True},
    ],
)
def test_bad_sandbox_settings_are_refused(settings: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        SandboxConfig.model_validate(settings)

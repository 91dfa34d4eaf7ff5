"""build_agent_env: an allowlist, and no secret ever passes — whatever the allowlist says."""

from __future__ import annotations

import os
import random
import string
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from adapters.runtime.process.agent_env import (
    DEFAULT_ALLOW,
    build_agent_env,
    is_secret_name,
    looks_like_token,
    run_env,
)

ORDINARY = {
    "PATH": "/nix/store/0c3a9s5h8k2x6y1d7f4g3j2k1l0m9n8p-bash-5.2/bin:/usr/local/bin:/usr/bin",
    "HOME": "/home/agent",
    "LANG": "en_US.UTF-8",
    "LC_ALL": "C.UTF-8",
    "TERM": "xterm-256color",
    "TMPDIR": "/tmp/cpe-3f9c2a71d0b84e6a9c1e5f7b2d4a6c8e",
    "USER": "agent",
    "SHELL": "/bin/bash",
    "HTTPS_PROXY": "http://proxy.internal:3128",
    "GIT_AUTHOR_NAME": "cpe agent",
    "GIT_AUTHOR_EMAIL": "agent@example.invalid",
}

SECRET_NAMES = [
    "GITHUB_TOKEN",
    "GH_TOKEN",
    "GH_ENTERPRISE_TOKEN",
    "NPM_TOKEN",
    "slack_bot_token",
    "ANTHROPIC_API_KEY",
    "OPENAI_API_KEY",
    "STRIPE_SECRET",
    "AWS_ACCESS_KEY_ID",
    "AWS_PROFILE",
    "AWS_SESSION_TOKEN",
    "SSH_AUTH_SOCK",
    "SSH_AGENT_PID",
    "PGPASSWORD",
    "DB_PASSWD",
    "GIT_ASKPASS",
    "GOOGLE_APPLICATION_CREDENTIALS",
    "AZURE_CLIENT_ID",
    "VAULT_ADDR",
    "KUBECONFIG",
    "DOCKER_AUTH_CONFIG",
    "GIT_CONFIG_PARAMETERS",
    "SENTRY_DSN",
    "GITLAB_PAT",
    "HTTP_AUTHORIZATION",
    "GPG_PRIVATE_KEY",
]

TOKEN_VALUES = [
    "ghp_" + "A1b2C3d4E5" * 4,
    "gho_" + "x" * 36,
    "ghs_" + "0" * 36,
    "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz",
    "glpat-abcdefghij0123456789",
    "sk-ant-api03-" + "Zz9" * 20,
    "sk-proj-abcdefghijklmnop",
    "xoxb-1234567890-abcdefghij",
    "AKIAIOSFODNN7EXAMPLE",
    "AIzaSyA-abcdefghijklmnopqrstuvwxyz012345",
    "npm_" + "a1B2" * 9,
    "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
    "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjE=\n",
    "Bearer abcdefghijklmnopqrstuv",
    "https://user:hunter2@proxy.internal:3128",
    "postgres://app:s3cr3t@db/prod",
    "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    "Qm9vdHN0cmFwVG9rZW5fMTIzNDU2Nzg5MGFiY2RlZg",
]


def test_default_allowlist_passes_what_tools_need() -> None:
    env = build_agent_env({**ORDINARY, "EDITOR": "vim", "PYTHONPATH": "/srv"})

    assert env == ORDINARY


def test_base_is_not_modified() -> None:
    base = {"PATH": "/bin", "GITHUB_TOKEN": "ghp_" + "a" * 36}

    build_agent_env(base)

    assert base == {"PATH": "/bin", "GITHUB_TOKEN": "ghp_" + "a" * 36}


def test_allow_patterns_are_globs_and_case_sensitive() -> None:
    env = build_agent_env({"LC_TIME": "C", "lc_time": "C", "MY_TOOL_HOME": "/opt"}, allow=["LC_*"])

    assert env == {"LC_TIME": "C"}


@pytest.mark.parametrize("name", SECRET_NAMES)
def test_secret_names_are_dropped_even_when_allowed(name: str) -> None:
    env = build_agent_env({name: "harmless-looking", "PATH": "/bin"}, allow=[name, "PATH", "*"])

    assert env == {"PATH": "/bin"}


@pytest.mark.parametrize("value", TOKEN_VALUES)
def test_token_shaped_values_are_dropped_under_any_name(value: str) -> None:
    env = build_agent_env({"TERM": value, "LANG": "C"})

    assert env == {"LANG": "C"}


NOT_TOKENS = [
    "0123456789abcdef" * 3,  # a hex digest: one case only
    "disk-1234567890abcdefghij",  # "sk-" inside a word
    "/nix/store/0c3a9s5h8k2x6y1d7f4g3j2k1l0m9n8p-python3-MarkupSafe-2/bin",
    "/Library/Application_Support/JetBrains2024/IntelliJIdea2024/plugins",
    "Applications/Visual_Studio_Code/Contents/Resources",
    "x86_64-unknown-linux-gnu",
]


@pytest.mark.parametrize("value", [*ORDINARY.values(), *NOT_TOKENS])
def test_ordinary_values_are_not_mistaken_for_tokens(value: str) -> None:
    assert not looks_like_token(value)


@pytest.mark.parametrize("name", ["GIT_AUTHOR_NAME", "GIT_COMMITTER_EMAIL", "LANG", "PATH"])
def test_ordinary_names_are_not_mistaken_for_secrets(name: str) -> None:
    assert not is_secret_name(name)


def test_random_base62_and_base64_tokens_are_dropped() -> None:
    # A seeded generator: the same 2,000 tokens every run, no flaky "unlucky draw".
    rng = random.Random(20261122)
    alphabets = [string.ascii_letters + string.digits, string.ascii_letters + string.digits + "-_"]
    for i in range(2000):
        token = "".join(rng.choice(alphabets[i % 2]) for _ in range(rng.randint(32, 64)))
        assert looks_like_token(token), token


def test_extra_is_trusted_and_overrides_the_base() -> None:
    extra = {
        "ANTHROPIC_API_KEY": "sk-ant-api03-" + "k" * 40,
        "ANTHROPIC_BASE_URL": "http://127.0.0.1:8123",
        "IS_SANDBOX": "1",
        "HOME": "/tmp/agent-home",
    }

    env = build_agent_env(
        {**ORDINARY, "ANTHROPIC_API_KEY": "sk-ant-from-the-daemon-env"}, extra=extra
    )

    assert env == {**ORDINARY, **extra}


def test_default_allowlist_names_no_secret() -> None:
    assert not [pattern for pattern in DEFAULT_ALLOW if is_secret_name(pattern)]


# ---------------------------------------------------------------- properties

NAME_CHARS = string.ascii_letters + string.digits + "_"
SECRET_WORDS = ["token", "secret", "password", "passwd", "api_key", "apikey", "credentials", "auth"]
SECRET_PREFIXES = ["AWS_", "GH_", "GITHUB_", "SSH_", "AZURE_", "GOOGLE_", "VAULT_", "GIT_CONFIG_"]
TOKEN_PREFIXES = ["ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_", "sk-", "sk-ant-", "glpat-"]

names = st.text(NAME_CHARS, min_size=0, max_size=8)


@st.composite
def secret_names(draw: st.DrawFn) -> str:
    """Names that say "credential": a secret word somewhere, or a credential family prefix."""
    if draw(st.booleans()):
        word = draw(st.sampled_from(SECRET_WORDS))
        name = f"{draw(names)}_{word}_{draw(names)}".strip("_")
    else:
        name = draw(st.sampled_from(SECRET_PREFIXES)) + draw(names)
    return "".join(c.upper() if draw(st.booleans()) else c.lower() for c in name)


@st.composite
def token_values(draw: st.DrawFn) -> str:
    """Values carrying a token of a known shape, alone or inside other text."""
    body = draw(st.text(string.ascii_letters + string.digits, min_size=24, max_size=48))
    token = draw(st.sampled_from(TOKEN_PREFIXES)) + body
    before = draw(st.sampled_from(["", "x ", "Authorization: ", "--token=", "a:"]))
    after = draw(st.sampled_from(["", " y", ":/usr/bin", "\n"]))
    return before + token + after


ordinary_env = st.dictionaries(
    st.sampled_from(sorted(ORDINARY)), st.sampled_from(list(ORDINARY.values()))
)


@given(
    base=ordinary_env,
    secrets=st.dictionaries(secret_names(), st.text(max_size=40), max_size=5),
    tokens=st.dictionaries(
        st.text(NAME_CHARS, min_size=1, max_size=12), token_values(), max_size=5
    ),
)
def test_no_secret_name_or_token_value_ever_passes(
    base: dict[str, str], secrets: dict[str, str], tokens: dict[str, str]
) -> None:
    env = {**base, **secrets, **tokens}
    allow = [*env, "*"]  # someone allowed everything, on purpose or not

    result = build_agent_env(env, allow=allow)

    assert not set(result) & set(secrets)
    assert not set(result.values()) & set(tokens.values())
    assert result.items() <= base.items()


@given(
    base=st.dictionaries(st.text(NAME_CHARS, min_size=1, max_size=12), st.text(max_size=60)),
    allow=st.lists(st.sampled_from([*DEFAULT_ALLOW, "*", "A*", "*_KEY"]), max_size=6),
)
def test_every_passed_variable_is_allowed_and_clean(base: dict[str, str], allow: list[str]) -> None:
    result = build_agent_env(base, allow=allow)

    assert result.items() <= base.items()
    for name, value in result.items():
        assert not is_secret_name(name)
        assert not looks_like_token(value)


# ---------------------------------------------------------------------------- run_env


def test_run_env_as_root_sets_is_sandbox(monkeypatch: pytest.MonkeyPatch) -> None:
    # the claude CLI refuses bypassPermissions as root unless IS_SANDBOX=1
    monkeypatch.delenv("IS_SANDBOX", raising=False)
    env = run_env((), {}, euid=0)
    assert env["IS_SANDBOX"] == "1"


def test_run_env_as_another_user_sets_no_is_sandbox(monkeypatch: pytest.MonkeyPatch) -> None:
    # not even when the daemon's own environment has it: it is not on the allowlist
    monkeypatch.setenv("IS_SANDBOX", "1")
    env = run_env((), {}, euid=1000)
    assert "IS_SANDBOX" not in env


def test_run_env_defaults_to_our_own_user(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("IS_SANDBOX", raising=False)
    env = run_env((), {})
    assert ("IS_SANDBOX" in env) == (os.geteuid() == 0)


def test_run_env_passes_the_model_variables_the_agent_env_and_the_home(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://127.0.0.1:9")
    monkeypatch.setenv("GITHUB_TOKEN", "ghp_" + "Z" * 36)
    home = tmp_path / "home"
    env = run_env(("ANTHROPIC_BASE_URL",), {"EXTRA": "yes"}, home, euid=1000)
    assert env["ANTHROPIC_BASE_URL"] == "http://127.0.0.1:9"
    assert env["EXTRA"] == "yes"
    assert env["HOME"] == str(home)
    assert home.is_dir()
    assert "GITHUB_TOKEN" not in env

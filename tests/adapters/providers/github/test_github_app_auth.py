"""GitHub App installation auth, through the provider as production builds it
(``create_github_provider`` with ``app_id``, ``app_installation_id`` and
``app_private_key_env`` naming an environment variable that holds the App's private key).

githubkit signs a JWT (RS256, ``iss`` the app id) with the key, buys an installation token with
it at ``POST /app/installations/{id}/access_tokens``, and sends ``token <installation token>``
on every API request, buying a new one when the last is about to expire. The fake GitHub holds
only the App's public key, checks the JWT as GitHub does and expires tokens by its own clock.
"""

from __future__ import annotations

import itertools
import logging
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import jwt
import pytest

from adapters.providers.github import GitHubProvider, create_github_provider
from adapters.providers.specs.reader import GitSpecReader
from domain.errors import ConfigError, NotFoundError, ProviderError
from domain.ports import ProviderInterfaces
from tests.fakes.github import FakeApp, FakeGitHub, ManualClock, rsa_key_pair
from tests.support.git import clone
from tests.support.github import running_github

KEY_ENV = "CPE_TEST_GITHUB_APP_KEY"
TOKEN_ENV = "CPE_TEST_GITHUB_TOKEN_UNSET"  # App auth must not fall back to a token
INSTALLATION = 5150
TOKENS_PATH = f"/app/installations/{INSTALLATION}/access_tokens"

# githubkit's default cache of JWTs and installation tokens is process-wide, keyed by the app id
# alone; the provider has its own per instance (test_two_providers_with_one_app_id_...), and
# each test's App still gets an id of its own.
_app_ids = itertools.count(880_001)


@pytest.fixture(scope="module")
def keys() -> tuple[str, str]:
    return rsa_key_pair()


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def app(keys: tuple[str, str], clock: ManualClock) -> FakeApp:
    return FakeApp(next(_app_ids), INSTALLATION, keys[1], clock=clock)


@pytest.fixture
def fake_github(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, app: FakeApp
) -> Iterator[FakeGitHub]:
    monkeypatch.delenv(TOKEN_ENV, raising=False)
    with running_github(tmp_path, monkeypatch, app=app) as gh:
        yield gh


Opener = Callable[..., tuple[GitHubProvider, ProviderInterfaces]]


@pytest.fixture
def open_provider(
    fake_github: FakeGitHub, app: FakeApp, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> Opener:
    """``open_provider(private_key, **settings)``: the provider as ``adapters/cli/build.py`` builds
    it, settings as a mapping, the key in the process environment, specs from a checkout."""

    def opened(private_key: str, **overrides: Any) -> tuple[GitHubProvider, ProviderInterfaces]:
        monkeypatch.setenv(KEY_ENV, private_key)
        settings = {
            "repository": f"{fake_github.owner}/{fake_github.repo}",
            "base_url": fake_github.base_url + "/",
            "token_env": TOKEN_ENV,
            "app_id": app.app_id,
            "app_installation_id": app.installation_id,
            "app_private_key_env": KEY_ENV,
            **overrides,
        }
        opened_before = len(list(tmp_path.glob("checkout-*")))
        checkout = clone(
            fake_github.git.path, tmp_path / f"checkout-{opened_before}", fake_github.default_branch
        )
        specs = GitSpecReader(checkout.root, default_branch=fake_github.default_branch)
        return create_github_provider(settings, specs)

    return opened


def poll(interfaces: ProviderInterfaces) -> None:
    interfaces.work_item_reader.list_work_items()
    interfaces.revision_reader.list_revisions()


def key_lines(private_key: str) -> list[str]:
    """The key's base64 lines: any one of them in a message is a leak."""
    return [line for line in private_key.splitlines() if line and not line.startswith("-----")]


def assert_not_in(text: str, *secrets: str) -> None:
    for secret in secrets:
        assert secret not in text, "a secret leaked"


def test_a_poll_runs_on_an_installation_token_bought_with_the_apps_jwt(
    fake_github: FakeGitHub,
    app: FakeApp,
    keys: tuple[str, str],
    open_provider: Opener,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    provider, interfaces = open_provider(keys[0])
    with provider:
        poll(interfaces)
        item = interfaces.work_item_writer.create_work_item("Made by the App", "body")
        poll(interfaces)

    # One token, bought once with a JWT the App's public key verifies.
    (grant,) = app.grants
    buy, *calls = fake_github.requests
    assert (buy.method, buy.path, buy.status) == ("POST", TOKENS_PATH, 201)
    scheme, _, signed = buy.authorization.partition(" ")
    assert scheme == "Bearer"
    assert jwt.get_unverified_header(signed)["alg"] == "RS256"
    claims = jwt.decode(signed, keys[1], algorithms=["RS256"])
    assert claims["iss"] == str(app.app_id)
    assert claims["exp"] - claims["iat"] == 600
    assert grant.claims == claims
    # cpe asked who it is as the App (GET /app takes the App's JWT, as GitHub requires), once;
    # every other API call carried the installation token: not the JWT, not the key.
    as_app = [r for r in calls if (r.method, r.path) == ("GET", "/app")]
    assert len(as_app) == 1
    scheme, _, token = as_app[0].authorization.partition(" ")
    assert scheme == "Bearer"
    assert jwt.decode(token, keys[1], algorithms=["RS256"])["iss"] == str(app.app_id)
    repository_calls = [r for r in calls if r not in as_app]
    assert len(repository_calls) >= 5
    assert {r.authorization for r in repository_calls} == {f"token {grant.token}"}
    assert all(r.status < 400 for r in calls)
    assert fake_github.issues[int(item)].user == app.bot_login
    # Nothing logged, down to httpx's debug lines, holds the key, the JWT or the token.
    assert caplog.records
    assert_not_in(caplog.text, *key_lines(keys[0]), signed, token, grant.token)


def test_an_expired_installation_token_is_replaced_before_the_next_call(
    fake_github: FakeGitHub,
    app: FakeApp,
    clock: ManualClock,
    keys: tuple[str, str],
    open_provider: Opener,
) -> None:
    """githubkit drops a token a minute before its ``expires_at`` by the machine's clock, so
    tokens living 30 s are stale by their next use: no test has to wait for an hour."""
    app.token_lifetime = 30
    provider, interfaces = open_provider(keys[0])
    with provider:
        poll(interfaces)
        earlier = list(app.grants)
        assert earlier
        clock.now = max(grant.expires_at for grant in earlier)  # all of them dead on GitHub
        with httpx.Client(base_url=fake_github.base_url) as client:
            dead = {"Authorization": f"token {earlier[-1].token}"}
            refused = client.get(
                f"/repos/{fake_github.owner}/{fake_github.repo}/issues", headers=dead
            )
        assert (refused.status_code, refused.json()["message"]) == (401, "Bad credentials")
        fake_github.clear_requests()

        poll(interfaces)

    assert all(r.status < 400 for r in fake_github.requests), "a 401 reached the provider"
    fresh = app.grants[len(earlier) :]
    assert fresh
    assert all(grant.expires_at > clock.now for grant in fresh)
    calls = [r for r in fake_github.requests if r.path != TOKENS_PATH]
    assert calls
    assert {r.authorization for r in calls} <= {f"token {grant.token}" for grant in fresh}


def test_a_wrong_private_key_fails_the_start_with_a_provider_error(
    fake_github: FakeGitHub,
    app: FakeApp,
    open_provider: Opener,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Without ``default_branch`` the provider asks GitHub for it at start: the token exchange
    fails there. GitHub's refusal reaches the caller as a ``ProviderError`` with its status,
    and neither the error nor the log holds the key."""
    caplog.set_level(logging.DEBUG)
    wrong = rsa_key_pair()[0]
    with pytest.raises(ProviderError) as raised:
        open_provider(wrong)

    assert "401" in str(raised.value)
    assert raised.value.status == 401
    assert not raised.value.transient  # retrying cannot mend a wrong key
    assert "cannot reach GitHub" not in str(raised.value)
    assert [(r.path, r.status) for r in fake_github.requests] == [(TOKENS_PATH, 401)]
    assert app.grants == []
    told = "".join(traceback.format_exception(raised.value)) + caplog.text
    assert_not_in(told, *key_lines(wrong))


def _another_key(keys: tuple[str, str]) -> str:
    return rsa_key_pair()[0]


def _truncated_key(keys: tuple[str, str]) -> str:
    lines = keys[0].splitlines()
    return "\n".join([*lines[: len(lines) // 2], lines[-1]]) + "\n"


@pytest.mark.parametrize(
    ("private_key", "installation", "refusals"),
    [
        (_another_key, INSTALLATION, [(TOKENS_PATH, 401)]),
        (
            lambda keys: keys[0],
            INSTALLATION + 1,
            [(f"/app/installations/{INSTALLATION + 1}/access_tokens", 404)],
        ),
    ],
    ids=["another key", "unknown installation"],
)
def test_bad_app_credentials_fail_the_first_poll_without_leaking_the_key(
    fake_github: FakeGitHub,
    app: FakeApp,
    keys: tuple[str, str],
    open_provider: Opener,
    caplog: pytest.LogCaptureFixture,
    *,
    private_key: Any,
    installation: int,
    refusals: list[tuple[str, int]],
) -> None:
    """With ``default_branch`` set (as ``adapters/cli/build.py`` sets it) the start only checks the
    status labels: its token exchange is refused, which is logged and left to the first poll.
    That poll fails, with a ``ProviderError`` that is not a ``NotFoundError`` (an unknown
    installation is no missing work item)."""
    caplog.set_level(logging.DEBUG)
    key = private_key(keys)
    provider, interfaces = open_provider(
        key, default_branch=fake_github.default_branch, app_installation_id=installation
    )
    with provider, pytest.raises(ProviderError) as raised:
        interfaces.work_item_reader.list_work_items()

    assert not isinstance(raised.value, NotFoundError)
    assert raised.value.status == refusals[0][1]
    assert not raised.value.transient
    assert [(r.path, r.status) for r in fake_github.requests] == refusals * 2  # the start, the poll
    assert app.grants == []
    told = "".join(traceback.format_exception(raised.value)) + caplog.text
    assert_not_in(told, *key_lines(key))


@pytest.mark.parametrize(
    "private_key",
    [_truncated_key, lambda keys: "not a key at all", lambda keys: keys[1]],
    ids=["truncated key", "garbage", "the public key"],
)
def test_a_private_key_that_cannot_sign_is_a_configuration_error_at_start(
    fake_github: FakeGitHub, keys: tuple[str, str], open_provider: Opener, private_key: Any
) -> None:
    """Caught before any request, naming the variable, never quoting the key."""
    key = private_key(keys)
    with pytest.raises(ConfigError, match=KEY_ENV) as raised:
        open_provider(key, default_branch=fake_github.default_branch)
    assert raised.value.key_path == "provider.github.app_private_key_env"
    assert_not_in(str(raised.value), *key_lines(key))
    assert fake_github.requests == []


def test_a_token_github_revokes_early_is_dropped_after_one_refused_call(
    fake_github: FakeGitHub, app: FakeApp, keys: tuple[str, str], open_provider: Opener
) -> None:
    """githubkit would reuse a cached token until its own idea of the expiry: after GitHub
    refuses it once, the provider drops it and the next call buys a new one."""
    provider, interfaces = open_provider(keys[0], default_branch=fake_github.default_branch)
    with provider:
        poll(interfaces)
        (first,) = app.grants
        app.revoke(first.token)
        with pytest.raises(ProviderError) as refused:
            poll(interfaces)
        assert refused.value.status == 401
        assert refused.value.transient  # worth retrying: the executor retries a write
        poll(interfaces)  # recovered: a new token
    assert app.grants[0].token == first.token
    assert len(app.grants) == 2
    last = fake_github.requests[-1]
    assert last.authorization == f"token {app.grants[1].token}"
    assert last.status < 400


def test_two_providers_with_one_app_id_do_not_share_tokens(
    fake_github: FakeGitHub, app: FakeApp, keys: tuple[str, str], open_provider: Opener
) -> None:
    """With githubkit's process-wide default cache, a provider with the wrong key used the
    tokens another provider with the same app id had bought, without signing anything."""
    good, good_interfaces = open_provider(keys[0], default_branch=fake_github.default_branch)
    with good:
        poll(good_interfaces)
        wrong, wrong_interfaces = open_provider(
            rsa_key_pair()[0], default_branch=fake_github.default_branch
        )
        with wrong, pytest.raises(ProviderError) as raised:
            poll(wrong_interfaces)
    assert raised.value.status == 401
    assert len(app.grants) == 1  # only the good key bought a token

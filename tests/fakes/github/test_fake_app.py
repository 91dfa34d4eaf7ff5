"""The fake GitHub's GitHub App: a JWT signed with the App's key buys an installation token
(answered in GitHub's shape, parsed here with githubkit's own model), the token works until it
expires, and a JWT that is badly signed, for another App or out of date is refused as GitHub
refuses it."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import jwt
import pytest
from githubkit_schemas.v2026_03_10 import models
from pydantic import TypeAdapter

from tests.fakes.clock import iso
from tests.fakes.github import FakeApp, FakeGitHub, ManualClock, rsa_key_pair
from tests.support.github import running_github

APP_ID = 31337
INSTALLATION = 4242
TOKENS = f"/app/installations/{INSTALLATION}/access_tokens"
REPO = "/repos/acme/widgets"


@pytest.fixture(scope="module")
def keys() -> tuple[str, str]:
    return rsa_key_pair()


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def fake_github(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, keys: tuple[str, str], clock: ManualClock
) -> Iterator[FakeGitHub]:
    app = FakeApp(APP_ID, INSTALLATION, keys[1], clock=clock)
    with running_github(tmp_path, monkeypatch, app=app) as fake:
        yield fake


@pytest.fixture
def http(fake_github: FakeGitHub) -> Iterator[httpx.Client]:
    headers = {"Accept": "application/vnd.github+json"}
    with httpx.Client(base_url=fake_github.base_url, headers=headers, timeout=30) as client:
        yield client


def app_jwt(
    private_key: str, *, iss: str | int = str(APP_ID), iat: float | None = None, life: int = 600
) -> str:
    """A JWT as githubkit signs one: issued a minute ago, for ten minutes. Signed as a raw JWS:
    PyJWT's ``encode`` refuses a numeric ``iss``, which GitHub takes."""
    issued = int(time.time()) - 60 if iat is None else int(iat)
    claims = {"iss": iss, "iat": issued, "exp": issued + life}
    return jwt.PyJWS().encode(json.dumps(claims).encode(), private_key, algorithm="RS256")


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def parse(model: Any, response: httpx.Response, status: int) -> Any:
    assert response.status_code == status, response.text
    return TypeAdapter(model).validate_python(response.json())


def test_a_valid_app_jwt_buys_an_installation_token(
    fake_github: FakeGitHub, http: httpx.Client, keys: tuple[str, str], clock: ManualClock
) -> None:
    signed = app_jwt(keys[0])
    token = parse(models.InstallationToken, http.post(TOKENS, json={}, headers=bearer(signed)), 201)
    assert fake_github.app is not None
    (grant,) = fake_github.app.grants
    assert token.token == grant.token
    assert token.token.startswith("ghs_")
    assert token.expires_at == iso(int(clock.now + 3600))
    assert token.repository_selection == "selected"
    assert [r.full_name for r in token.repositories] == ["acme/widgets"]
    assert token.permissions.issues == "write"
    assert grant.installation_id == INSTALLATION
    assert grant.claims["iss"] == str(APP_ID)
    (request,) = fake_github.requests
    assert (request.path, request.status, request.authorization) == (
        TOKENS,
        201,
        f"Bearer {signed}",
    )


def test_a_numeric_iss_is_taken_as_github_takes_it(
    fake_github: FakeGitHub, http: httpx.Client, keys: tuple[str, str]
) -> None:
    response = http.post(TOKENS, json={}, headers=bearer(app_jwt(keys[0], iss=APP_ID)))
    assert response.status_code == 201, response.text
    assert fake_github.app is not None
    assert fake_github.app.grants[0].claims["iss"] == APP_ID


def test_an_installation_token_works_until_it_expires(
    fake_github: FakeGitHub, http: httpx.Client, keys: tuple[str, str], clock: ManualClock
) -> None:
    token = http.post(TOKENS, json={}, headers=bearer(app_jwt(keys[0]))).json()["token"]
    as_token = {"Authorization": f"token {token}"}
    assert http.get(f"{REPO}/issues", headers=as_token).status_code == 200
    assert http.get(f"{REPO}/issues", headers=bearer(token)).status_code == 200
    created = http.post(f"{REPO}/issues", json={"title": "By the App"}, headers=as_token)
    assert created.json()["user"]["login"] == "cpe-app[bot]"
    assert created.json()["user"]["type"] == "Bot"

    assert fake_github.app is not None
    clock.now = fake_github.app.grants[0].expires_at
    refused = http.get(f"{REPO}/issues", headers=as_token)
    assert (refused.status_code, refused.json()["message"]) == (401, "Bad credentials")
    configured = {"Authorization": "token test-token"}
    assert http.get(f"{REPO}/issues", headers=configured).status_code == 200
    # A token issued now lives from now.
    fresh = http.post(TOKENS, json={}, headers=bearer(app_jwt(keys[0], iat=clock.now - 60)))
    assert fresh.json()["expires_at"] == iso(int(clock.now + 3600))


Header = Callable[[tuple[str, str], ManualClock], dict[str, str]]


def _other_key(keys: tuple[str, str], clock: ManualClock) -> dict[str, str]:
    return bearer(app_jwt(rsa_key_pair()[0]))


def _other_app(keys: tuple[str, str], clock: ManualClock) -> dict[str, str]:
    return bearer(app_jwt(keys[0], iss=str(APP_ID + 1)))


def _expired(keys: tuple[str, str], clock: ManualClock) -> dict[str, str]:
    signed = app_jwt(keys[0])
    clock.advance(600)  # ten minutes on: githubkit's JWT (exp = iat + 10 min) is out of date
    return bearer(signed)


def _too_long(keys: tuple[str, str], clock: ManualClock) -> dict[str, str]:
    return bearer(app_jwt(keys[0], life=3600))


def _issued_later(keys: tuple[str, str], clock: ManualClock) -> dict[str, str]:
    return bearer(app_jwt(keys[0], iat=clock.now + 120, life=300))


def _a_token(keys: tuple[str, str], clock: ManualClock) -> dict[str, str]:
    return bearer("test-token")


def _jwt_as_token(keys: tuple[str, str], clock: ManualClock) -> dict[str, str]:
    return {"Authorization": f"token {app_jwt(keys[0])}"}


def _none(keys: tuple[str, str], clock: ManualClock) -> dict[str, str]:
    return {}


@pytest.mark.parametrize(
    ("header", "message"),
    [
        (_other_key, "A JSON web token could not be decoded"),
        (_other_app, "Integration not found"),
        (_expired, "'Expiration time' claim ('exp') must be a numeric value"),
        (_too_long, "'Expiration time' claim ('exp') is too far in the future"),
        (_issued_later, "'Issued at' claim ('iat') must be an Integer"),
        (_a_token, "A JSON web token could not be decoded"),
        (_jwt_as_token, "A JSON web token could not be decoded"),
        (_none, "A JSON web token could not be decoded"),
    ],
    ids=lambda value: getattr(value, "__name__", "")[1:] or "refused",
)
def test_a_bad_app_jwt_is_refused_with_401(
    fake_github: FakeGitHub,
    http: httpx.Client,
    *,
    keys: tuple[str, str],
    clock: ManualClock,
    header: Header,
    message: str,
) -> None:
    refused = http.post(TOKENS, json={}, headers=header(keys, clock))
    error = parse(models.BasicError, refused, 401)
    assert error.message is not None
    assert error.message.startswith(message)
    assert error.status == "401"
    assert fake_github.app is not None
    assert fake_github.app.grants == []


def test_an_unknown_installation_is_404(
    fake_github: FakeGitHub, http: httpx.Client, keys: tuple[str, str]
) -> None:
    refused = http.post(
        f"/app/installations/{INSTALLATION + 1}/access_tokens",
        json={},
        headers=bearer(app_jwt(keys[0])),
    )
    assert parse(models.BasicError, refused, 404).message == "Not Found"
    assert fake_github.app is not None
    assert fake_github.app.grants == []


def test_the_app_jwt_is_no_token_for_the_repository(
    fake_github: FakeGitHub, http: httpx.Client, keys: tuple[str, str]
) -> None:
    refused = http.get(f"{REPO}/issues", headers=bearer(app_jwt(keys[0])))
    assert (refused.status_code, refused.json()["message"]) == (401, "Bad credentials")


def test_a_token_can_be_narrowed_but_not_widened(
    fake_github: FakeGitHub, http: httpx.Client, keys: tuple[str, str]
) -> None:
    narrowed = http.post(
        TOKENS,
        json={"repositories": ["widgets"], "permissions": {"issues": "read"}},
        headers=bearer(app_jwt(keys[0])),
    )
    assert parse(models.InstallationToken, narrowed, 201).permissions.issues == "read"
    for body in (
        {"repositories": ["gadgets"]},
        {"permissions": {"administration": "write"}},
        {"permissions": {"checks": "write"}},
    ):
        refused = http.post(TOKENS, json=body, headers=bearer(app_jwt(keys[0])))
        assert refused.status_code == 422, body


def test_without_an_app_there_is_no_app_endpoint(tmp_path: Path, keys: tuple[str, str]) -> None:
    with FakeGitHub(tmp_path / "plain") as fake, httpx.Client(base_url=fake.base_url) as client:
        signed = app_jwt(keys[0])
        assert client.post(TOKENS, json={}, headers=bearer(signed)).status_code == 401
        found = client.post(TOKENS, json={}, headers={"Authorization": "token test-token"})
        assert found.status_code == 404

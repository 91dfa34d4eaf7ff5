"""How the transport reads Jira's answers: the wait a 429 asks for, Jira's error words, the
authorization each deployment takes (pure: no Jira needed)."""

from __future__ import annotations

import base64
from datetime import UTC, datetime

import httpx
import pytest

from adapters.providers.jira.api import authorization, person_id, resolve_token
from adapters.providers.jira.settings import JiraSettings
from adapters.providers.jira.transport import jira_words, rate_limit_wait
from domain.errors import ConfigError

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC).timestamp()


def test_retry_after_in_seconds_wins() -> None:
    headers = httpx.Headers({"Retry-After": "30", "X-RateLimit-Reset": "2026-11-29T13:00Z"})
    assert rate_limit_wait(headers, NOW, 5.0) == 30.0


def test_cloud_s_reset_time_is_iso_8601_to_the_minute() -> None:
    headers = httpx.Headers({"X-RateLimit-Reset": "2026-11-29T12:02Z"})
    assert rate_limit_wait(headers, NOW, 5.0) == 121.0


def test_a_retry_after_date_and_no_hint_at_all() -> None:
    dated = httpx.Headers({"Retry-After": "Sun, 29 Nov 2026 12:00:10 GMT"})
    assert rate_limit_wait(dated, NOW, 5.0) == 10.0
    assert rate_limit_wait(httpx.Headers({}), NOW, 5.0) == 5.0


def test_jira_s_error_body_is_said_in_its_own_words() -> None:
    body = {"errorMessages": ["Issue does not exist"], "errors": {"summary": "required"}}
    response = httpx.Response(400, json=body)
    assert jira_words(response) == "Issue does not exist; summary: required"
    assert jira_words(httpx.Response(502, text="<html>")) == "HTTP 502 Bad Gateway"


def test_cloud_sends_basic_email_and_token_data_center_a_bearer_token() -> None:
    cloud = JiraSettings(base_url="https://a.atlassian.net", project="P", email="bot@a.dev")
    header = authorization(cloud, "secret")
    assert header.startswith("Basic ")
    assert base64.b64decode(header.removeprefix("Basic ")) == b"bot@a.dev:secret"
    dc = JiraSettings(base_url="https://jira.a.dev", project="P")
    assert authorization(dc, "pat") == "Bearer pat"


def test_a_missing_token_names_the_variable() -> None:
    dc = JiraSettings(base_url="https://jira.a.dev", project="P", token_env="MY_PAT")
    with pytest.raises(ConfigError, match=r"MY_PAT is not set.*personal access token"):
        resolve_token(dc, {})
    assert resolve_token(dc, {"MY_PAT": " pat \n"}) == "pat"


def test_a_person_is_an_account_id_on_cloud_a_name_on_data_center() -> None:
    assert person_id({"accountId": "5b10ac8d", "displayName": "Ann"}) == "5b10ac8d"
    assert person_id({"name": "ann", "key": "JIRAUSER10100"}) == "ann"
    assert person_id(None) is None

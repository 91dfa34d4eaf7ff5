"""The fake Jira's admin webhooks deliver as Atlassian documents: each change sends its
``webhookEvent``, ``X-Atlassian-Webhook-Identifier`` (kept by a retry, which counts in
``X-Atlassian-Webhook-Retry``) and, with a secret, ``X-Hub-Signature: sha256=<hex HMAC>``
(checked here with an HMAC computed independently); a receiver that is down costs the fake
nothing."""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Iterator

import pytest

from tests.fakes.jira import FakeJira
from tests.fakes.receiver import Receiver, closed_port_url

SECRET = "a jira webhook secret"


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    with Receiver(status=200) as hook:
        yield hook


def test_each_change_sends_its_event_signed(fake_jira: FakeJira, receiver: Receiver) -> None:
    jira = fake_jira
    jira.hooks.add(receiver.url, SECRET)
    key = jira.open_issue("Crash on start")
    jira.add_label(key, "cpe")
    jira.transition(key, "In Progress")
    jira.comment(key, "Same here")
    jira.delete_issue(key)
    jira.hooks.wait_idle()
    assert [d.event for d in jira.hooks.deliveries] == [
        "jira:issue_created",
        "jira:issue_updated",
        "jira:issue_updated",
        "comment_created",
        "jira:issue_deleted",
    ]
    for delivery, got in zip(jira.hooks.deliveries, receiver.received, strict=True):
        assert got.body == delivery.body
        assert got.headers["content-type"].startswith("application/json")
        assert got.headers["x-atlassian-webhook-identifier"] == delivery.id
        digest = hmac.new(SECRET.encode(), got.body, hashlib.sha256).hexdigest()
        assert got.headers["x-hub-signature"] == f"sha256={digest}"
        assert "x-hub-signature-256" not in got.headers
        payload = json.loads(got.body)
        assert payload["webhookEvent"] == delivery.event
        assert payload["issue"]["key"] == key
        assert delivery.status == 200
    labeled = json.loads(jira.hooks.deliveries[1].body)
    assert labeled["changelog"]["items"][0]["field"] == "labels"
    assert labeled["changelog"]["items"][0]["toString"] == "cpe"
    assert labeled["issue"]["fields"]["labels"] == ["cpe"]
    assert labeled["user"]["accountId"] == jira.account_id("alice")
    moved = json.loads(jira.hooks.deliveries[2].body)
    assert moved["issue"]["fields"]["status"]["name"] == "In Progress"


def test_a_retry_keeps_the_identifier_and_counts(fake_jira: FakeJira, receiver: Receiver) -> None:
    fake_jira.hooks.add(receiver.url)
    fake_jira.open_issue("Crash on start")
    fake_jira.hooks.wait_idle()
    (delivery,) = fake_jira.hooks.deliveries
    fake_jira.hooks.redeliver(delivery.id)
    fake_jira.hooks.wait_idle()
    first, again = receiver.received
    assert "x-hub-signature" not in first.headers  # no secret, no signature
    assert again.body == first.body
    assert (
        again.headers["x-atlassian-webhook-identifier"]
        == first.headers["x-atlassian-webhook-identifier"]
    )
    assert "x-atlassian-webhook-retry" not in first.headers
    assert again.headers["x-atlassian-webhook-retry"] == "1"


def test_a_receiver_that_is_down_does_not_break_the_fake(fake_jira: FakeJira) -> None:
    fake_jira.hooks.add(closed_port_url(), SECRET)
    key = fake_jira.open_issue("Crash on start")
    fake_jira.add_label(key, "cpe")
    assert fake_jira.issue(key)["labels"] == ["cpe"]
    fake_jira.hooks.wait_idle()
    attempts = [a for d in fake_jira.hooks.deliveries for a in d.attempts]
    assert len(attempts) == 2
    assert all(a.status is None for a in attempts)
    assert all("ConnectionRefused" in (a.error or "") for a in attempts)

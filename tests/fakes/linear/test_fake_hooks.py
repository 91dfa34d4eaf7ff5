"""The fake Linear's webhooks deliver as Linear documents: each change sends an
``EntityWebhookPayload`` with ``Linear-Delivery``, ``Linear-Event`` and ``Linear-Signature``
(hex HMAC-SHA256 of the raw body, checked here with an HMAC computed independently),
``webhookTimestamp`` in milliseconds from the clock it is given; a receiver that is down costs the
fake nothing."""

from __future__ import annotations

import hashlib
import hmac
import json
import re
import time
from collections.abc import Iterator

import pytest

from tests.fakes.linear import FakeLinear
from tests.fakes.receiver import Receiver, closed_port_url
from tests.support.linear import graphql

SECRET = "lin_wh_a-signing-secret"
UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[0-9a-f]{4}-[0-9a-f]{12}")
CREATE = """
mutation Create($input: IssueCreateInput!) {
  issueCreate(input: $input) { success issue { identifier } }
}
"""


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    with Receiver(status=200) as hook:
        yield hook


def test_each_change_sends_its_entity_signed(fake_linear: FakeLinear, receiver: Receiver) -> None:
    linear = fake_linear
    hook = linear.hooks.add(receiver.url, SECRET)
    before = int(time.time() * 1000)
    ident = linear.open_issue("Crash on start")
    linear.add_label(ident, "cpe")
    linear.move_to_state(ident, "In Progress")
    linear.comment(ident, "Same here")
    linear.archive(ident)
    linear.hooks.wait_idle()
    after = int(time.time() * 1000)
    sent = [(d.event, d.action) for d in linear.hooks.deliveries]
    assert sent == [
        ("Issue", "create"),
        ("Issue", "update"),
        ("Issue", "update"),
        ("Comment", "create"),
        ("Issue", "remove"),
    ]
    for delivery, got in zip(linear.hooks.deliveries, receiver.received, strict=True):
        assert got.body == delivery.body
        assert got.headers["content-type"].startswith("application/json")
        assert got.headers["linear-event"] == delivery.event
        assert UUID.fullmatch(got.headers["linear-delivery"])
        digest = hmac.new(SECRET.encode(), got.body, hashlib.sha256).hexdigest()
        assert got.headers["linear-signature"] == digest
        payload = json.loads(got.body)
        assert before <= payload["webhookTimestamp"] <= after
        assert payload["webhookId"] == hook.id
        assert payload["type"] == delivery.event
        assert payload["action"] == delivery.action
        assert delivery.status == 200
    payloads = [json.loads(d.body) for d in linear.hooks.deliveries]
    assert payloads[0]["data"]["identifier"] == ident
    assert payloads[0]["data"]["teamId"] == linear.team_id
    labeled = payloads[1]
    assert labeled["updatedFrom"]["labelIds"] == []
    assert [x["name"] for x in labeled["data"]["labels"]] == ["cpe"]
    assert labeled["actor"]["email"] == "someone@example.com"
    assert payloads[2]["data"]["state"]["name"] == "In Progress"
    assert "stateId" in payloads[2]["updatedFrom"]
    assert payloads[3]["data"]["issue"]["identifier"] == ident


def test_the_engines_own_writes_are_delivered_too(
    fake_linear: FakeLinear, receiver: Receiver
) -> None:
    fake_linear.hooks.add(receiver.url, SECRET)
    made = graphql(fake_linear, CREATE, {"input": {"teamId": fake_linear.team_id, "title": "T"}})
    assert made.status_code == 200, made.text
    fake_linear.hooks.wait_idle()
    (delivery,) = fake_linear.hooks.deliveries
    assert json.loads(delivery.body)["actor"]["email"] == "cpe@example.com"


def test_a_hook_hears_only_its_team_and_resource_types(
    fake_linear: FakeLinear, receiver: Receiver
) -> None:
    fake_linear.add_team("OPS", "Operations", members=["someone@example.com"])
    fake_linear.hooks.add(receiver.url, SECRET, team="ENG", resource_types=["Issue"])
    ours = fake_linear.open_issue("Ours")
    fake_linear.open_issue("Theirs", team="OPS")
    fake_linear.comment(ours, "A comment")
    fake_linear.hooks.wait_idle()
    (got,) = receiver.received
    assert json.loads(got.body)["data"]["identifier"] == ours


def test_the_timestamp_comes_from_the_clock_it_is_given(
    fake_linear: FakeLinear, receiver: Receiver
) -> None:
    fake_linear.hooks.add(receiver.url, SECRET)
    fake_linear.hooks.now = lambda: 1_767_225_600.0  # 2026-01-01: long ago for a receiver
    fake_linear.open_issue("Crash on start")
    fake_linear.hooks.wait_idle()
    (delivery,) = fake_linear.hooks.deliveries
    assert json.loads(delivery.body)["webhookTimestamp"] == 1_767_225_600_000
    fake_linear.hooks.redeliver(delivery.id)
    fake_linear.hooks.wait_idle()
    first, again = receiver.received
    assert (again.body, again.headers) == (first.body, first.headers)


def test_a_receiver_that_is_down_does_not_break_the_fake(fake_linear: FakeLinear) -> None:
    fake_linear.hooks.add(closed_port_url(), SECRET)
    ident = fake_linear.open_issue("Crash on start")
    fake_linear.add_label(ident, "cpe")
    assert fake_linear.issue(ident)["labels"] == ["cpe"]
    fake_linear.hooks.wait_idle()
    attempts = [a for d in fake_linear.hooks.deliveries for a in d.attempts]
    assert len(attempts) == 2
    assert all(a.status is None for a in attempts)
    assert all("ConnectionRefused" in (a.error or "") for a in attempts)

"""The fake GitLab's project hooks deliver as GitLab documents: each change sends its
``X-Gitlab-Event``, the secret token in ``X-Gitlab-Token`` (plain, compared as is), a stable
``Idempotency-Key`` and a new ``X-Gitlab-Webhook-UUID`` per attempt; a receiver that is down
costs the fake nothing."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator

import httpx
import pytest

from tests.fakes.gitlab import FakeGitLab
from tests.fakes.receiver import Receiver, closed_port_url

TOKEN = "a-secret-token"
UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[0-9a-f]{4}-[0-9a-f]{12}")


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    with Receiver(status=200) as hook:
        yield hook


def sent(gl: FakeGitLab) -> list[tuple[str, str | None]]:
    gl.hooks.wait_idle()
    return [(d.event, d.action) for d in gl.hooks.deliveries]


def test_each_change_sends_its_hook_with_gitlabs_headers(
    fake_gitlab: FakeGitLab, receiver: Receiver
) -> None:
    gl = fake_gitlab
    gl.hooks.add(receiver.url, TOKEN)
    iid = gl.open_issue("Crash on start")
    gl.label(iid, "cpe")
    gl.comment(iid, "Same here")
    gl.close_issue(iid)
    mr = gl.open_mr("feature", {"src/new.py": "x = 1\n"}, "A change")
    gl.push("feature", {"src/new.py": "x = 2\n"}, "second")
    head = gl.mr_or_fail(mr).head_sha
    gl.report_status(head, "ci", "success")
    gl.approve(mr, by="acme")
    assert sent(gl) == [
        ("Issue Hook", "open"),
        ("Issue Hook", "update"),
        ("Note Hook", "create"),
        ("Issue Hook", "close"),
        ("Merge Request Hook", "open"),
        ("Push Hook", None),
        ("Merge Request Hook", "update"),
        ("Pipeline Hook", "success"),
        ("Merge Request Hook", "approved"),
    ]
    assert len(receiver.received) == len(gl.hooks.deliveries)
    for delivery, got in zip(gl.hooks.deliveries, receiver.received, strict=True):
        assert got.body == delivery.body
        assert got.headers["content-type"] == "application/json"
        assert got.headers["user-agent"].startswith("GitLab/")
        assert got.headers["x-gitlab-event"] == delivery.event
        assert got.headers["x-gitlab-token"] == TOKEN
        assert got.headers["x-gitlab-instance"] == gl.base_url
        assert got.headers["idempotency-key"] == delivery.id
        for name in ("idempotency-key", "x-gitlab-event-uuid", "x-gitlab-webhook-uuid"):
            assert UUID.fullmatch(got.headers[name])
        assert delivery.status == 200
    payloads = [json.loads(d.body) for d in gl.hooks.deliveries]
    kinds = ["issue", "issue", "note", "issue", "merge_request", "push", "merge_request"]
    assert [p["object_kind"] for p in payloads] == [*kinds, "pipeline", "merge_request"]
    labeled = payloads[1]
    assert labeled["object_attributes"]["iid"] == iid
    assert labeled["project"]["path_with_namespace"] == "acme/widgets"
    assert [x["title"] for x in labeled["changes"]["labels"]["current"]] == ["cpe"]
    assert payloads[2]["object_attributes"]["noteable_type"] == "Issue"
    assert payloads[6]["object_attributes"]["last_commit"]["id"] == head
    assert payloads[7]["object_attributes"]["sha"] == head


def test_no_token_no_token_header_and_a_hook_gets_only_its_events(
    fake_gitlab: FakeGitLab, receiver: Receiver
) -> None:
    fake_gitlab.hooks.add(receiver.url, None, events=["issues_events"])
    iid = fake_gitlab.open_issue("Crash on start")
    fake_gitlab.comment(iid, "Same here")
    fake_gitlab.commit_to_default({"README.md": "hi\n"}, "docs")
    assert sent(fake_gitlab) == [("Issue Hook", "open")]
    (got,) = receiver.received
    assert "x-gitlab-token" not in got.headers


def test_one_event_to_two_hooks_shares_its_event_uuid_not_its_key(
    fake_gitlab: FakeGitLab,
) -> None:
    with Receiver() as first, Receiver() as second:
        fake_gitlab.hooks.add(first.url, "one")
        fake_gitlab.hooks.add(second.url, "two")
        fake_gitlab.open_issue("Crash on start")
        fake_gitlab.hooks.wait_idle()
        (a,), (b,) = first.received, second.received
    assert a.headers["x-gitlab-event-uuid"] == b.headers["x-gitlab-event-uuid"]
    assert a.headers["idempotency-key"] != b.headers["idempotency-key"]
    assert (a.headers["x-gitlab-token"], b.headers["x-gitlab-token"]) == ("one", "two")


def test_resend_keeps_the_idempotency_key_with_a_new_webhook_uuid(
    fake_gitlab: FakeGitLab, receiver: Receiver
) -> None:
    fake_gitlab.hooks.add(receiver.url, TOKEN)
    fake_gitlab.open_issue("Crash on start")
    fake_gitlab.hooks.wait_idle()
    (delivery,) = fake_gitlab.hooks.deliveries
    fake_gitlab.hooks.redeliver(delivery.id)
    fake_gitlab.hooks.wait_idle()
    first, again = receiver.received
    assert again.body == first.body
    assert again.headers["idempotency-key"] == first.headers["idempotency-key"]
    assert again.headers["x-gitlab-event-uuid"] == first.headers["x-gitlab-event-uuid"]
    assert again.headers["x-gitlab-webhook-uuid"] != first.headers["x-gitlab-webhook-uuid"]


def test_the_engines_own_writes_are_delivered_too(
    fake_gitlab: FakeGitLab, receiver: Receiver
) -> None:
    fake_gitlab.hooks.add(receiver.url, TOKEN)
    headers = {"PRIVATE-TOKEN": "test-token"}
    with httpx.Client(base_url=fake_gitlab.api_url, headers=headers, timeout=30) as http:
        created = http.post("/projects/4242/issues", json={"title": "Filed by a bot"})
        assert created.status_code == 201, created.text
        iid = created.json()["iid"]
        edited = http.put(f"/projects/4242/issues/{iid}", json={"add_labels": "cpe"})
        assert edited.status_code == 200, edited.text
    assert sent(fake_gitlab) == [("Issue Hook", "open"), ("Issue Hook", "update")]
    opened = json.loads(fake_gitlab.hooks.deliveries[0].body)
    assert opened["user"]["username"] == "cpe-bot"


def test_a_receiver_that_is_down_does_not_break_the_fake(fake_gitlab: FakeGitLab) -> None:
    fake_gitlab.hooks.add(closed_port_url(), TOKEN)
    iid = fake_gitlab.open_issue("Crash on start")
    fake_gitlab.label(iid, "cpe")
    assert fake_gitlab.issues[iid].labels == ["cpe"]
    fake_gitlab.hooks.wait_idle()
    attempts = [a for d in fake_gitlab.hooks.deliveries for a in d.attempts]
    assert len(attempts) == 2
    assert all(a.status is None for a in attempts)
    assert all("ConnectionRefused" in (a.error or "") for a in attempts)

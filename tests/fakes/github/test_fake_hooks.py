"""The fake GitHub's webhooks deliver as GitHub documents: each change the engine reads sends
its event, signed over the exact body (checked here with an HMAC computed independently, and
GitHub's published test vector), with GitHub's headers and a body githubkit's webhook models
parse; a receiver that is down or hangs costs the fake nothing."""

from __future__ import annotations

import hashlib
import hmac
import re
from collections.abc import Iterator
from urllib.parse import parse_qs

import githubkit.webhooks
import httpx
import pytest

from tests.fakes.github import FakeGitHub
from tests.fakes.github.hooks import signature_256
from tests.fakes.receiver import Receiver, closed_port_url

REPO = "/repos/acme/widgets"
SECRET = "It's a Secret to Everybody"
GUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-1[0-9a-f]{3}-[0-9a-f]{4}-[0-9a-f]{12}")


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    with Receiver() as hook:
        yield hook


@pytest.fixture
def http(fake_github: FakeGitHub) -> Iterator[httpx.Client]:
    headers = {"Authorization": "token test-token", "Accept": "application/vnd.github+json"}
    with httpx.Client(base_url=fake_github.base_url, headers=headers, timeout=30) as client:
        yield client


def sent(gh: FakeGitHub) -> list[tuple[str, str | None]]:
    gh.hooks.wait_idle()
    return [(d.event, d.action) for d in gh.hooks.deliveries]


def test_github_published_test_vector() -> None:
    # docs.github.com, "Validating webhook deliveries": the example secret, payload, signature.
    expected = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"
    assert signature_256(SECRET, b"Hello, World!") == expected


def test_each_change_sends_its_event_with_githubs_headers(
    fake_github: FakeGitHub, receiver: Receiver
) -> None:
    gh = fake_github
    hook = gh.hooks.add(receiver.url, SECRET)
    number = gh.add_issue("Crash on start", labels=("bug",))
    gh.label_issue(number, "cpe", "acme")
    gh.unlabel_issue(number, "bug", "acme")
    gh.edit_issue(number, title="Crash at start", state="closed")
    pull = gh.add_pull("feature", {"src/new.py": "x = 1\n"}, "A change")
    head = gh.push("feature", {"src/new.py": "x = 2\n"}, "second")
    gh.add_review(pull, "acme", "APPROVED")
    gh.add_check_run(head, "ci")
    gh.add_status(head, "lint", "success")
    gh.commit_to_default({"README.md": "hi\n"}, "docs")
    assert sent(gh) == [
        ("ping", None),
        ("issues", "opened"),
        ("issues", "labeled"),
        ("issues", "labeled"),
        ("issues", "unlabeled"),
        ("issues", "edited"),
        ("issues", "closed"),
        ("push", None),
        ("pull_request", "opened"),
        ("push", None),
        ("pull_request", "synchronize"),
        ("pull_request_review", "submitted"),
        ("check_run", "created"),
        ("check_run", "completed"),
        ("check_suite", "completed"),
        ("status", None),
        ("push", None),
    ]
    assert len(receiver.received) == len(gh.hooks.deliveries)
    for delivery, got in zip(gh.hooks.deliveries, receiver.received, strict=True):
        assert got.body == delivery.body
        assert got.headers["content-type"] == "application/json"
        assert got.headers["user-agent"].startswith("GitHub-Hookshot/")
        assert got.headers["x-github-event"] == delivery.event
        assert GUID.fullmatch(got.headers["x-github-delivery"])
        assert got.headers["x-github-hook-id"] == str(hook.id)
        assert got.headers["x-github-hook-installation-target-type"] == "repository"
        assert delivery.status == 202
        assert delivery.attempts[0].answer == b""  # the receiver's (empty) answer is kept
        # githubkit's webhook models (schemas 2026-03-10) accept every body.
        event = githubkit.webhooks.parse(delivery.event, delivery.body)  # type: ignore[arg-type]
        if delivery.action is not None:
            assert getattr(event, "action") == delivery.action  # noqa: B009
    guids = [d.id for d in gh.hooks.deliveries]
    assert len(set(guids)) == len(guids)


def test_what_the_payloads_name(fake_github: FakeGitHub, receiver: Receiver) -> None:
    gh = fake_github
    gh.hooks.add(receiver.url, SECRET)
    number = gh.add_issue("Crash on start")
    gh.label_issue(number, "cpe", "acme")
    head = gh.default_head()
    gh.add_check_run(head, "ci", conclusion="failure")
    gh.hooks.wait_idle()
    by_kind = {(d.event, d.action): d for d in gh.hooks.deliveries}
    labeled = githubkit.webhooks.parse("issues", by_kind["issues", "labeled"].body)
    assert labeled.issue.number == number  # type: ignore[union-attr]
    assert labeled.label.name == "cpe"  # type: ignore[union-attr]
    assert labeled.sender.login == "acme"  # type: ignore[union-attr]
    assert labeled.repository.full_name == "acme/widgets"  # type: ignore[union-attr]
    run = githubkit.webhooks.parse("check_run", by_kind["check_run", "completed"].body)
    assert run.check_run.head_sha == head  # type: ignore[union-attr]
    assert run.check_run.conclusion == "failure"  # type: ignore[union-attr]


def test_the_signature_verifies_with_an_independent_hmac(
    fake_github: FakeGitHub, receiver: Receiver
) -> None:
    gh = fake_github
    gh.hooks.add(receiver.url, SECRET)
    gh.add_issue("Crash on start")
    gh.hooks.wait_idle()
    assert len(receiver.received) == 2  # ping, opened
    for got in receiver.received:
        digest = hmac.new(SECRET.encode(), got.body, hashlib.sha256).hexdigest()
        assert got.headers["x-hub-signature-256"] == f"sha256={digest}"
        legacy = hmac.new(SECRET.encode(), got.body, hashlib.sha1).hexdigest()
        assert got.headers["x-hub-signature"] == f"sha1={legacy}"
        assert githubkit.webhooks.verify(SECRET, got.body, got.headers["x-hub-signature-256"])
        other = hmac.new(b"another secret", got.body, hashlib.sha256).hexdigest()
        assert got.headers["x-hub-signature-256"] != f"sha256={other}"


def test_a_hook_without_a_secret_gets_no_signature(
    fake_github: FakeGitHub, receiver: Receiver
) -> None:
    fake_github.hooks.add(receiver.url)
    fake_github.add_issue("Crash on start")
    fake_github.hooks.wait_idle()
    assert len(receiver.received) == 2
    for got in receiver.received:
        assert "x-hub-signature-256" not in got.headers
        assert "x-hub-signature" not in got.headers


def test_a_form_hook_signs_the_form_body(fake_github: FakeGitHub, receiver: Receiver) -> None:
    fake_github.hooks.add(receiver.url, SECRET, content_type="form")
    fake_github.hooks.wait_idle()
    (got,) = receiver.received
    assert got.headers["content-type"] == "application/x-www-form-urlencoded"
    payload = parse_qs(got.body.decode())["payload"][0]
    assert githubkit.webhooks.parse("ping", payload)
    digest = hmac.new(SECRET.encode(), got.body, hashlib.sha256).hexdigest()
    assert got.headers["x-hub-signature-256"] == f"sha256={digest}"


def test_one_event_goes_to_each_hook_with_one_guid(fake_github: FakeGitHub) -> None:
    with Receiver() as first, Receiver() as second:
        fake_github.hooks.add(first.url, "one")
        fake_github.hooks.add(second.url, "two")
        fake_github.add_issue("Crash on start")
        fake_github.hooks.wait_idle()
        (a,) = [r for r in first.received if r.headers["x-github-event"] == "issues"]
        (b,) = [r for r in second.received if r.headers["x-github-event"] == "issues"]
    assert a.headers["x-github-delivery"] == b.headers["x-github-delivery"]
    assert a.body == b.body
    assert a.headers["x-hub-signature-256"] == signature_256("one", a.body)
    assert b.headers["x-hub-signature-256"] == signature_256("two", b.body)


def test_a_hook_gets_only_the_events_it_subscribed_to(
    fake_github: FakeGitHub, receiver: Receiver
) -> None:
    fake_github.hooks.add(receiver.url, SECRET, events=("issues",))
    number = fake_github.add_issue("Crash on start")
    fake_github.commit_to_default({"README.md": "hi\n"}, "docs")
    fake_github.label_issue(number, "cpe", "acme")
    assert sent(fake_github) == [("ping", None), ("issues", "opened"), ("issues", "labeled")]


def test_the_engines_own_writes_are_delivered_too(
    fake_github: FakeGitHub, receiver: Receiver, http: httpx.Client
) -> None:
    fake_github.hooks.add(receiver.url, SECRET)
    created = http.post(f"{REPO}/issues", json={"title": "Filed by a bot", "labels": ["cpe"]})
    assert created.status_code == 201, created.text
    number = created.json()["number"]
    http.patch(f"{REPO}/issues/{number}", json={"state": "closed"})
    assert sent(fake_github) == [
        ("ping", None),
        ("issues", "opened"),
        ("issues", "labeled"),
        ("issues", "closed"),
    ]
    opened = githubkit.webhooks.parse("issues", fake_github.hooks.deliveries[1].body)
    assert opened.sender.login == "cpe-bot"  # type: ignore[union-attr]


def test_redeliver_sends_the_same_bytes_and_guid(
    fake_github: FakeGitHub, receiver: Receiver
) -> None:
    fake_github.hooks.add(receiver.url, SECRET)
    fake_github.add_issue("Crash on start")
    fake_github.hooks.wait_idle()
    opened = fake_github.hooks.deliveries[-1]
    fake_github.hooks.redeliver(opened.id)
    fake_github.hooks.wait_idle()
    first, again = receiver.received[-2:]
    assert again.body == first.body
    assert again.headers == first.headers
    assert [a.redelivery for a in opened.attempts] == [False, True]
    assert len(fake_github.hooks.deliveries) == 2  # a redelivery is an attempt, not a delivery
    with pytest.raises(KeyError, match="no delivery 'nope'"):
        fake_github.hooks.redeliver("nope")


def test_a_redelivery_is_signed_with_the_hooks_secret_as_it_is_now(
    fake_github: FakeGitHub, receiver: Receiver
) -> None:
    hook = fake_github.hooks.add(receiver.url, "a wrong secret")
    fake_github.hooks.wait_idle()
    (ping,) = fake_github.hooks.deliveries
    hook.secret = SECRET  # the person fixes the hook's secret, then redelivers
    fake_github.hooks.redeliver(ping.id)
    fake_github.hooks.wait_idle()
    first, again = receiver.received
    assert again.body == first.body
    assert again.headers["x-github-delivery"] == first.headers["x-github-delivery"]
    assert first.headers["x-hub-signature-256"] == signature_256("a wrong secret", first.body)
    assert again.headers["x-hub-signature-256"] == signature_256(SECRET, again.body)


def test_no_hook_no_delivery(fake_github: FakeGitHub) -> None:
    fake_github.add_issue("Crash on start")
    fake_github.hooks.wait_idle()
    assert fake_github.hooks.deliveries == []


def test_a_receiver_that_is_down_does_not_break_the_fake(
    fake_github: FakeGitHub, http: httpx.Client
) -> None:
    fake_github.hooks.add(closed_port_url(), SECRET)
    number = fake_github.add_issue("Crash on start")
    fake_github.label_issue(number, "cpe", "acme")
    assert http.get(f"{REPO}/issues/{number}").json()["labels"][0]["name"] == "cpe"
    fake_github.hooks.wait_idle()
    attempts = [a for d in fake_github.hooks.deliveries for a in d.attempts]
    assert len(attempts) == 3  # ping, opened, labeled: each tried once, none retried
    for attempt in attempts:
        assert attempt.status is None
        assert attempt.error is not None
        assert "ConnectionRefused" in attempt.error


def test_a_receiver_that_hangs_holds_up_nothing_but_its_delivery(
    fake_github: FakeGitHub, receiver: Receiver, http: httpx.Client
) -> None:
    fake_github.hooks.sender.timeout = 0.5  # GitHub's is 10 s: shorter, for the test
    receiver.hang = True
    fake_github.hooks.add(receiver.url, SECRET)
    receiver.wait_for(1)  # the ping arrived and is held
    # The delivery is held by the receiver; the fake's API (and its lock) are free.
    number = fake_github.add_issue("Crash on start")
    assert http.get(f"{REPO}/issues/{number}").status_code == 200
    fake_github.hooks.wait_idle()
    ping = fake_github.hooks.deliveries[0]
    (attempt,) = ping.attempts
    assert attempt.status is None
    assert attempt.error is not None
    assert "timed out" in attempt.error


def test_the_rest_api_manages_hooks(
    fake_github: FakeGitHub, receiver: Receiver, http: httpx.Client
) -> None:
    created = http.post(
        f"{REPO}/hooks",
        json={
            "name": "web",
            "events": ["issues", "pull_request"],
            "config": {"url": receiver.url, "content_type": "json", "secret": SECRET},
        },
    )
    assert created.status_code == 201, created.text
    hook = created.json()
    assert hook["config"]["secret"] == "********"
    assert hook["events"] == ["issues", "pull_request"]
    listed = http.get(f"{REPO}/hooks").json()
    assert [h["id"] for h in listed] == [hook["id"]]
    assert SECRET not in http.get(f"{REPO}/hooks").text
    assert http.post(f"{REPO}/hooks/{hook['id']}/pings").status_code == 204
    fake_github.hooks.wait_idle()
    assert [r.headers["x-github-event"] for r in receiver.received] == ["ping", "ping"]
    assert http.delete(f"{REPO}/hooks/{hook['id']}").status_code == 204
    fake_github.add_issue("Crash on start")
    fake_github.hooks.wait_idle()
    assert len(receiver.received) == 2
    missing = http.post(f"{REPO}/hooks", json={"name": "web", "config": {}})
    assert missing.status_code == 422

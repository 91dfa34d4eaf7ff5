"""Each vendor's check over headers, raw body, secret and clock: GitHub's published test vector,
every refusal with its status and reason, the pollers each event names by the roles the vendor
plays, and no refusal that repeats the secret."""

from __future__ import annotations

import hashlib
import hmac
import json

import pytest

from adapters.host.webhooks.verify import (
    LINEAR_WINDOW,
    Accepted,
    Refused,
    Role,
    Vendor,
    verify,
)

BOTH: frozenset[Role] = frozenset({"work_items", "revisions"})
TRACKER: frozenset[Role] = frozenset({"work_items"})
FORGE: frozenset[Role] = frozenset({"revisions"})
NOW = 1_780_000_000.0
SECRET = "s3cret-of-the-hook"

# GitHub's documented example (docs: validating-webhook-deliveries)
GITHUB_VECTOR_SECRET = "It's a Secret to Everybody"
GITHUB_VECTOR_BODY = b"Hello, World!"
GITHUB_VECTOR_SIGNATURE = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"


def _hex(secret: str, body: bytes) -> str:
    return hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def github(event: str, body: bytes = b"{}", secret: str = SECRET, **extra: str) -> dict[str, str]:
    headers = {
        "x-github-event": event,
        "x-github-delivery": "72d3162e-cc78-11e3-81ab-4c9367dc0958",
        "x-hub-signature-256": "sha256=" + _hex(secret, body),
    }
    headers.update(extra)
    return headers


def judge(
    vendor: Vendor,
    headers: dict[str, str],
    body: bytes = b"{}",
    *,
    roles: frozenset[Role] = BOTH,
    secret: str = SECRET,
    now: float = NOW,
) -> Accepted | Refused:
    return verify(vendor, headers, body, secret, roles=roles, now=now)


def test_githubs_published_test_vector_verifies() -> None:
    headers = {
        "x-github-event": "issues",
        "x-github-delivery": "d1",
        "x-hub-signature-256": GITHUB_VECTOR_SIGNATURE,
    }
    verdict = verify(
        "github", headers, GITHUB_VECTOR_BODY, GITHUB_VECTOR_SECRET, roles=BOTH, now=NOW
    )
    assert verdict == Accepted("d1", "issues", ("work_items", "ignored_items"))


def test_githubs_vector_with_one_byte_changed_is_refused() -> None:
    headers = {
        "x-github-event": "issues",
        "x-github-delivery": "d1",
        "x-hub-signature-256": GITHUB_VECTOR_SIGNATURE,
    }
    verdict = verify("github", headers, b"Hello, World?", GITHUB_VECTOR_SECRET, roles=BOTH, now=NOW)
    assert isinstance(verdict, Refused)
    assert (verdict.status, verdict.reason) == (401, "signature")


def test_github_without_a_signature_is_refused_and_the_sha1_header_is_not_enough() -> None:
    body = b'{"action":"opened"}'
    sha1 = "sha1=" + hmac.new(SECRET.encode(), body, hashlib.sha1).hexdigest()
    headers = {"x-github-event": "issues", "x-github-delivery": "d", "x-hub-signature": sha1}
    verdict = judge("github", headers, body)
    assert isinstance(verdict, Refused)
    assert (verdict.status, verdict.reason) == (401, "signature")
    assert "missing X-Hub-Signature-256" in verdict.message


def test_github_with_the_right_hex_but_no_prefix_is_refused() -> None:
    body = b"{}"
    headers = github("issues", body, **{"x-hub-signature-256": _hex(SECRET, body)})
    verdict = judge("github", headers, body)
    assert isinstance(verdict, Refused)
    assert verdict.reason == "signature"


def test_github_signed_with_another_secret_is_refused_without_saying_the_secret() -> None:
    verdict = judge("github", github("issues", secret="another"))
    assert isinstance(verdict, Refused)
    assert (verdict.status, verdict.reason) == (401, "signature")
    assert SECRET not in verdict.message
    assert _hex(SECRET, b"{}") not in verdict.message


def test_github_without_a_delivery_id_is_malformed() -> None:
    headers = github("issues")
    del headers["x-github-delivery"]
    verdict = judge("github", headers)
    assert isinstance(verdict, Refused)
    assert (verdict.status, verdict.reason) == (400, "malformed")


@pytest.mark.parametrize(
    ("event", "roles", "pollers"),
    [
        ("issues", BOTH, ("work_items", "ignored_items")),
        ("issues", FORGE, ()),
        ("issue_comment", BOTH, ("work_items", "ignored_items", "revisions")),
        ("issue_comment", FORGE, ("revisions",)),
        ("pull_request", BOTH, ("revisions",)),
        ("pull_request", TRACKER, ()),
        ("pull_request_review", BOTH, ("revisions",)),
        ("check_run", BOTH, ("revisions", "baseline")),
        ("check_suite", FORGE, ("revisions", "baseline")),
        ("status", BOTH, ("revisions", "baseline")),
        ("push", BOTH, ("revisions", "baseline", "specs")),
        ("ping", BOTH, ()),
        ("star", BOTH, ()),
    ],
)
def test_a_github_event_names_the_pollers_of_the_roles_github_plays(
    event: str, roles: frozenset[Role], pollers: tuple[str, ...]
) -> None:
    body = json.dumps({"action": "opened"}).encode()
    verdict = judge("github", github(event, body), body, roles=roles)
    assert verdict == Accepted("72d3162e-cc78-11e3-81ab-4c9367dc0958", event, pollers)


def test_the_payload_does_not_pick_the_pollers() -> None:
    """A body that claims to be a pull request changes nothing: the header says issues."""
    body = json.dumps({"action": "synchronize", "pull_request": {"number": 1}}).encode()
    verdict = judge("github", github("issues", body), body)
    assert isinstance(verdict, Accepted)
    assert verdict.pollers == ("work_items", "ignored_items")


def gitlab(event: str, token: str = SECRET, **extra: str) -> dict[str, str]:
    headers = {"x-gitlab-event": event, "x-gitlab-token": token, "idempotency-key": "k-1"}
    headers.update(extra)
    return headers


def test_gitlab_takes_its_token_and_dedupes_on_the_idempotency_key() -> None:
    verdict = judge("gitlab", gitlab("Merge Request Hook", **{"x-gitlab-event-uuid": "u-1"}))
    assert verdict == Accepted("k-1", "Merge Request Hook", ("revisions",))


def test_gitlab_without_an_idempotency_key_takes_the_event_uuid() -> None:
    headers = gitlab("Issue Hook", **{"x-gitlab-event-uuid": "u-1"})
    del headers["idempotency-key"]
    assert judge("gitlab", headers) == Accepted(
        "u-1", "Issue Hook", ("work_items", "ignored_items")
    )


@pytest.mark.parametrize("token", ["", "wrong", SECRET + "x", SECRET[:-1]])
def test_gitlab_with_no_or_a_wrong_token_is_refused(token: str) -> None:
    verdict = judge("gitlab", gitlab("Push Hook", token=token))
    assert isinstance(verdict, Refused)
    assert (verdict.status, verdict.reason) == (401, "signature")
    assert SECRET not in verdict.message


@pytest.mark.parametrize(
    ("event", "pollers"),
    [
        ("Pipeline Hook", ("revisions", "baseline")),
        ("Push Hook", ("revisions", "baseline", "specs")),
        ("Note Hook", ("work_items", "ignored_items", "revisions")),
        ("Tag Push Hook", ()),
    ],
)
def test_a_gitlab_event_names_its_pollers(event: str, pollers: tuple[str, ...]) -> None:
    verdict = judge("gitlab", gitlab(event))
    assert isinstance(verdict, Accepted)
    assert verdict.pollers == pollers


def linear_body(stamp_ms: float) -> bytes:
    return json.dumps({"action": "update", "type": "Issue", "webhookTimestamp": stamp_ms}).encode()


def linear(body: bytes, secret: str = SECRET) -> dict[str, str]:
    return {
        "linear-signature": _hex(secret, body),
        "linear-delivery": "ld-1",
        "linear-event": "Issue",
    }


def test_linear_signed_and_fresh_polls_the_tracker() -> None:
    body = linear_body(NOW * 1000 - 5_000)
    verdict = judge("linear", linear(body), body, roles=TRACKER)
    assert verdict == Accepted("ld-1", "Issue", ("work_items", "ignored_items"))


@pytest.mark.parametrize("off", [LINEAR_WINDOW + 1, -(LINEAR_WINDOW + 1), 3600])
def test_linear_with_a_stale_timestamp_is_refused_even_signed(off: float) -> None:
    body = linear_body((NOW - off) * 1000)
    verdict = judge("linear", linear(body), body, roles=TRACKER)
    assert isinstance(verdict, Refused)
    assert (verdict.status, verdict.reason) == (401, "stale")


def test_linear_with_a_bad_signature_is_refused_before_its_timestamp_is_read() -> None:
    body = linear_body(NOW * 1000)
    verdict = judge("linear", linear(body, secret="other"), body, roles=TRACKER)
    assert isinstance(verdict, Refused)
    assert verdict.reason == "signature"


def test_linear_without_a_timestamp_is_malformed() -> None:
    body = b'{"type":"Issue"}'
    verdict = judge("linear", linear(body), body, roles=TRACKER)
    assert isinstance(verdict, Refused)
    assert (verdict.status, verdict.reason) == (400, "malformed")


def test_linear_without_a_delivery_header_is_known_by_its_body() -> None:
    body = linear_body(NOW * 1000)
    headers = linear(body)
    del headers["linear-delivery"]
    first = judge("linear", headers, body, roles=TRACKER)
    again = judge("linear", headers, body, roles=TRACKER)
    assert isinstance(first, Accepted)
    assert first == again
    assert first.delivery.startswith("sha256:")


def test_jira_signed_like_websub_polls_the_tracker() -> None:
    body = b'{"webhookEvent":"jira:issue_updated"}'
    headers = {
        "x-hub-signature": "sha256=" + _hex(SECRET, body),
        "x-atlassian-webhook-identifier": "j-1",
    }
    verdict = judge("jira", headers, body, roles=TRACKER)
    assert verdict == Accepted("j-1", "jira:issue_updated", ("work_items", "ignored_items"))


def test_jira_unsigned_or_wrongly_signed_is_refused() -> None:
    body = b'{"webhookEvent":"jira:issue_updated"}'
    for headers in ({}, {"x-hub-signature": "sha256=" + _hex("other", body)}):
        verdict = judge("jira", headers, body, roles=TRACKER)
        assert isinstance(verdict, Refused)
        assert (verdict.status, verdict.reason) == (401, "signature")

"""Each vendor's delivery checked: pure functions over its headers, its raw body, the secret and
the clock, to ``Accepted`` (the delivery's id, its event, what it asks to poll) or ``Refused`` (the
HTTP status, the reason for the metrics, one line for the sender).

Nothing in a payload is trusted: the event header alone picks the pollers (Linear and Jira:
every event polls the tracker), by the roles the vendor plays here (the tracker's
``work_items``, the forge's ``revisions``); the poll then reads the truth from the vendor's
API. Signatures are compared in constant time (``hmac.compare_digest``), over the raw bytes,
before the body is parsed.

- GitHub: ``X-Hub-Signature-256: sha256=<hex HMAC-SHA256(secret, body)>`` only (never the SHA-1
  header), ``X-GitHub-Event``, ``X-GitHub-Delivery`` (its id; a redelivery keeps it).
- GitLab: ``X-Gitlab-Token`` (the secret itself), ``X-Gitlab-Event``, ``Idempotency-Key`` (its
  id, the same across retries) else ``X-Gitlab-Event-UUID``.
- Linear: ``Linear-Signature: <hex HMAC-SHA256(secret, body)>``, the body's ``webhookTimestamp``
  (ms) within ``LINEAR_WINDOW`` of now, ``Linear-Delivery`` (else the body's digest) as its id.
- Jira (an admin webhook with a secret): ``X-Hub-Signature: sha256=<hex>``,
  ``X-Atlassian-Webhook-Identifier`` (else the body's digest) as its id.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Literal

Vendor = Literal["github", "gitlab", "linear", "jira"]
VENDORS: tuple[Vendor, ...] = ("github", "gitlab", "linear", "jira")
Role = Literal["work_items", "revisions"]
Reason = Literal["signature", "stale", "size", "type", "unconfigured", "malformed"]

LINEAR_WINDOW = 60.0  # seconds a Linear delivery's webhookTimestamp may be from now (its SDK's)

# The pollers each role's hooks name (actors/pollers.py's names; an engine without one of them,
# ``baseline`` or ``ignored_items``, ignores it).
TRACKER = ("work_items", "ignored_items")
FORGE_REVIEW = ("revisions",)
FORGE_CHECKS = ("revisions", "baseline")
FORGE_PUSH = ("revisions", "baseline", "specs")


@dataclass(frozen=True)
class Accepted:
    delivery: str  # the vendor's delivery id (a duplicate is the same id again)
    event: str
    pollers: tuple[str, ...]  # empty: nothing to poll (a ping, an event cpe does not read)


@dataclass(frozen=True)
class Refused:
    status: int
    reason: Reason
    message: str


Verdict = Accepted | Refused
Headers = Mapping[str, str]  # names in lower case (Starlette's headers are)


def verify(
    vendor: Vendor,
    headers: Headers,
    body: bytes,
    secret: str,
    *,
    roles: frozenset[Role],
    now: float,
) -> Verdict:
    """``vendor``'s delivery judged; ``roles``: what the vendor keeps here; ``now``: Unix time
    in seconds (Linear's timestamp window)."""
    return _VERIFIERS[vendor](headers, body, secret.encode(), roles, now)


def _github(
    headers: Headers, body: bytes, secret: bytes, roles: frozenset[Role], _: float
) -> Verdict:
    given = headers.get("x-hub-signature-256", "")
    if not given:
        return _unsigned("X-Hub-Signature-256", "the hook has no secret")
    if not _hex_hmac_matches(given, "sha256=", secret, body):
        return _bad_signature("X-Hub-Signature-256")
    event = headers.get("x-github-event", "")
    delivery = headers.get("x-github-delivery", "")
    if not event or not delivery:
        return _malformed("X-GitHub-Event and X-GitHub-Delivery")
    return Accepted(delivery, event, _pollers(github_pollers(event), roles))


def github_pollers(event: str) -> dict[Role, tuple[str, ...]]:
    """What a GitHub event may have changed, by the role that reads it."""
    if event in {"issues", "issue_dependencies", "sub_issues", "label"}:
        return {"work_items": TRACKER}
    if event == "issue_comment":  # on an issue or on a pull request: the header does not say
        return {"work_items": TRACKER, "revisions": FORGE_REVIEW}
    if event in {
        "pull_request",
        "pull_request_review",
        "pull_request_review_comment",
        "pull_request_review_thread",
        "merge_group",
    }:
        return {"revisions": FORGE_REVIEW}
    if event in {"check_run", "check_suite", "status", "workflow_run"}:
        return {"revisions": FORGE_CHECKS}
    if event == "push":
        return {"revisions": FORGE_PUSH}
    return {}  # ping, and what cpe does not read


def _gitlab(
    headers: Headers, body: bytes, secret: bytes, roles: frozenset[Role], _: float
) -> Verdict:
    given = headers.get("x-gitlab-token", "")
    if not given:
        return _unsigned("X-Gitlab-Token", "the hook has no secret token")
    if not hmac.compare_digest(given.encode(), secret):
        return Refused(401, "signature", "wrong X-Gitlab-Token: expected the hook's secret token")
    event = headers.get("x-gitlab-event", "")
    delivery = headers.get("idempotency-key") or headers.get("x-gitlab-event-uuid", "")
    if not event or not delivery:
        return _malformed("X-Gitlab-Event and Idempotency-Key (or X-Gitlab-Event-UUID)")
    return Accepted(delivery, event, _pollers(gitlab_pollers(event), roles))


def gitlab_pollers(event: str) -> dict[Role, tuple[str, ...]]:
    """What a GitLab event may have changed, by the role that reads it."""
    if event in {"Issue Hook", "Confidential Issue Hook", "Work Item Hook"}:
        return {"work_items": TRACKER}
    if event in {"Note Hook", "Confidential Note Hook"}:
        return {"work_items": TRACKER, "revisions": FORGE_REVIEW}
    if event in {"Merge Request Hook", "Emoji Hook"}:
        return {"revisions": FORGE_REVIEW}
    if event in {"Pipeline Hook", "Job Hook"}:
        return {"revisions": FORGE_CHECKS}
    if event == "Push Hook":
        return {"revisions": FORGE_PUSH}
    return {}


def _linear(
    headers: Headers, body: bytes, secret: bytes, roles: frozenset[Role], now: float
) -> Verdict:
    given = headers.get("linear-signature", "")
    if not given:
        return _unsigned("Linear-Signature", "the webhook has no signing secret")
    if not _hex_hmac_matches(given, "", secret, body):
        return _bad_signature("Linear-Signature")
    payload = _json_object(body)
    stamp = payload.get("webhookTimestamp") if payload is not None else None
    if isinstance(stamp, bool) or not isinstance(stamp, int | float):
        return _malformed("a webhookTimestamp (milliseconds) in the body")
    if abs(now - stamp / 1000) > LINEAR_WINDOW:
        return Refused(
            401,
            "stale",
            f"webhookTimestamp is {abs(now - stamp / 1000):.0f} s from now: expected within "
            f"{LINEAR_WINDOW:.0f} s (a replay, or this machine's clock is off)",
        )
    event = headers.get("linear-event") or str((payload or {}).get("type") or "")
    delivery = headers.get("linear-delivery") or _digest(body)
    return Accepted(delivery, event or "?", _pollers({"work_items": TRACKER}, roles))


def _jira(
    headers: Headers, body: bytes, secret: bytes, roles: frozenset[Role], _: float
) -> Verdict:
    given = headers.get("x-hub-signature", "")
    if not given:
        return _unsigned("X-Hub-Signature", "the webhook has no secret")
    if not _hex_hmac_matches(given, "sha256=", secret, body):
        return _bad_signature("X-Hub-Signature")
    payload = _json_object(body) or {}
    event = str(payload.get("webhookEvent") or "?")
    delivery = headers.get("x-atlassian-webhook-identifier") or _digest(body)
    return Accepted(delivery, event, _pollers({"work_items": TRACKER}, roles))


_VERIFIERS: dict[Vendor, Callable[[Headers, bytes, bytes, frozenset[Role], float], Verdict]] = {
    "github": _github,
    "gitlab": _gitlab,
    "linear": _linear,
    "jira": _jira,
}


def _pollers(by_role: Mapping[Role, tuple[str, ...]], roles: frozenset[Role]) -> tuple[str, ...]:
    names = [name for role, found in by_role.items() if role in roles for name in found]
    return tuple(dict.fromkeys(names))


def _hex_hmac_matches(given: str, prefix: str, secret: bytes, body: bytes) -> bool:
    expected = prefix + hmac.new(secret, body, hashlib.sha256).hexdigest()
    return hmac.compare_digest(given.strip().lower().encode(), expected.encode())


def _json_object(body: bytes) -> dict[str, object] | None:
    try:
        value = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        return None
    return value if isinstance(value, dict) else None


def _digest(body: bytes) -> str:
    return "sha256:" + hashlib.sha256(body).hexdigest()[:32]


def _unsigned(header: str, why: str) -> Refused:
    return Refused(401, "signature", f"missing {header}: {why}; cpe takes only signed deliveries")


def _bad_signature(header: str) -> Refused:
    return Refused(
        401,
        "signature",
        f"wrong {header}: expected the HMAC-SHA256 of the body with the hook's secret",
    )


def _malformed(what: str) -> Refused:
    return Refused(400, "malformed", f"the delivery lacks {what}")

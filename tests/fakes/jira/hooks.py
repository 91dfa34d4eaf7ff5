"""Admin webhooks of the fake Jira: hooks (``FakeJira.hooks.add``) and the deliveries Jira sends
them when an issue of the project changes.

As Atlassian documents it (Jira Cloud platform, "Webhooks"; Data Center, "Managing webhooks"):
a POST of the event's JSON (``timestamp`` in ms, ``webhookEvent``: ``jira:issue_created``,
``jira:issue_updated`` with its ``changelog``, ``jira:issue_deleted``, ``comment_created``;
``user``, ``issue``) with ``X-Atlassian-Webhook-Identifier`` (one per delivery, unchanged by a
retry, which adds ``X-Atlassian-Webhook-Retry: <n>``) and, for a hook with a secret,
``X-Hub-Signature: sha256=<hex HMAC-SHA256 of the raw body>`` (WebSub's header name, not
GitHub's ``-256``). Payloads are rendered when the change is made (a deleted issue is gone
after), POSTed from the sender's thread outside the fake's lock (``tests/fakes/deliveries.py``).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tests.fakes.deliveries import DEFAULT_TIMEOUT, Delivery, Sender
from tests.fakes.jira.records import ChangeItem, CommentRecord, IssueRecord

if TYPE_CHECKING:
    from tests.fakes.jira.fake import FakeJira

Json = dict[str, Any]
EVENTS = ("jira:issue_created", "jira:issue_updated", "jira:issue_deleted", "comment_created")


def signature(secret: str, body: bytes) -> str:
    """Jira's ``X-Hub-Signature`` value for ``body``."""
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


@dataclass
class JiraHook:
    id: int
    url: str
    secret: str | None = None
    events: tuple[str, ...] = EVENTS


class JiraHooks:
    """The site's admin webhooks and its delivery log (``FakeJira.hooks``)."""

    def __init__(self, jira: FakeJira) -> None:
        self.jira = jira
        self.hooks: dict[int, JiraHook] = {}
        self.sender = Sender("fake-jira", DEFAULT_TIMEOUT)

    def add(self, url: str, secret: str | None = None, events: Iterable[str] = EVENTS) -> JiraHook:
        chosen = tuple(events)
        unknown = set(chosen) - set(EVENTS)
        if unknown:
            raise ValueError(f"the fake sends only {EVENTS}, not {sorted(unknown)}")
        with self.jira.lock:
            hook = JiraHook(len(self.hooks) + 1, url, secret, chosen)
            self.hooks[hook.id] = hook
            return hook

    @property
    def deliveries(self) -> list[Delivery]:
        return self.sender.deliveries()

    def redeliver(self, identifier: str) -> list[Delivery]:
        """Jira's retry: the same body and identifier, ``X-Atlassian-Webhook-Retry`` counting."""
        return self.sender.redeliver(identifier)

    def wait_idle(self, timeout: float = 30.0) -> None:
        self.sender.wait_idle(timeout)

    def close(self) -> None:
        self.sender.close()

    # ------------------------------------------------------------------ used by the site

    def changed(
        self,
        event: str,
        issue: IssueRecord,
        by: str,
        items: list[ChangeItem] | None = None,
        comment: CommentRecord | None = None,
    ) -> None:
        """``Site.listener``: ``event`` happened to ``issue`` (``items``: an update's changelog,
        ``comment``: the one created), by ``by``. Called under the fake's lock."""
        hooks = [h for h in self.hooks.values() if event in h.events]
        if not hooks:
            return
        site = self.jira.site
        payload: Json = {
            "timestamp": int(site.clock * 1000),
            "webhookEvent": event,
            "user": self._user(by),
            "issue": self._issue(issue),
        }
        if items is not None:
            payload["issue_event_type_name"] = "issue_generic"
            payload["changelog"] = {
                "id": site.next_id(),
                "items": [
                    {
                        "field": i.field,
                        "fieldtype": "jira",
                        "fieldId": i.field_id,
                        "from": i.from_id,
                        "fromString": i.from_string,
                        "to": i.to_id,
                        "toString": i.to_string,
                    }
                    for i in items
                ],
            }
        if comment is not None:
            payload["comment"] = {
                "id": comment.id,
                "self": f"{self.jira.rest_url}/issue/{issue.id}/comment/{comment.id}",
                "author": self._user(comment.author),
                "body": comment.body,
            }
        body = json.dumps(payload).encode()
        deliveries = [self._delivery(h, event, body) for h in hooks]
        self.sender.queue(lambda: deliveries)

    def _delivery(self, hook: JiraHook, event: str, body: bytes) -> Delivery:
        identifier = str(uuid.uuid4())
        headers = {
            "Content-Type": "application/json; charset=UTF-8",
            "User-Agent": "Atlassian Webhook HTTP Client",
            "X-Atlassian-Webhook-Identifier": identifier,
            "X-Atlassian-Webhook-Flow": "Primary",
        }
        if hook.secret:
            headers["X-Hub-Signature"] = signature(hook.secret, body)
        return Delivery(identifier, hook.url, event, None, body, headers, hook.id,
                        resend_headers=_retry)  # fmt: skip

    def _user(self, name: str) -> Json:
        user = self.jira.site.user(name)
        data: Json = {"displayName": user.display_name, "active": user.active}
        if self.jira.deployment == "cloud":
            data["accountId"] = user.account_id
        else:
            data.update(name=user.name, key=user.key)
        return data

    def _issue(self, issue: IssueRecord) -> Json:
        site = self.jira.site
        status = site.status(issue.status_id)
        return {
            "id": issue.id,
            "key": issue.key,
            "self": f"{self.jira.rest_url}/issue/{issue.id}",
            "fields": {
                "summary": issue.summary,
                "labels": list(issue.labels),
                "status": {"id": status.id, "name": status.name},
                "project": {"id": site.project_id, "key": site.project_key},
                "issuetype": {"id": issue.type_id},
                "created": int(issue.created * 1000),
                "updated": int(issue.updated * 1000),
            },
        }


def _retry(delivery: Delivery) -> dict[str, str]:
    return {**delivery.headers, "X-Atlassian-Webhook-Retry": str(len(delivery.attempts))}

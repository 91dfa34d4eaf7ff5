"""Webhooks of the fake Linear: hooks (``FakeLinear.hooks.add``) and the deliveries Linear sends
them when the workspace changes.

As Linear documents it (developers.linear.app, "Webhooks"; the SDK's ``LinearWebhooks``): a POST
of the ``EntityWebhookPayload`` JSON (``action`` create/update/remove, ``type`` ``Issue`` or
``Comment``, ``data``, ``updatedFrom`` on updates, ``actor``, ``createdAt``, ``url``,
``organizationId``, ``webhookId`` and ``webhookTimestamp``: epoch milliseconds when it was sent)
with ``Linear-Delivery`` (a UUID), ``Linear-Event`` (the entity type) and ``Linear-Signature``:
the lowercase hex HMAC-SHA256 of the raw body with the hook's signing secret, no prefix. A hook
is for one team or all public teams, and for some resource types. Linear gives the receiver 5 s
and wants a 200.

``webhookTimestamp`` comes from ``now`` (the wall clock by default: a receiver checks it against
its own, within a minute); a test sets ``hooks.now`` to send stale ones. Payloads are rendered on
the sender's thread under the fake's lock, POSTed outside it (``tests/fakes/deliveries.py``).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tests.fakes.deliveries import Delivery, Sender
from tests.fakes.linear.records import Comment, Issue, iso_ms, make_id

if TYPE_CHECKING:
    from tests.fakes.linear.fake import FakeLinear

Json = dict[str, Any]
TIMEOUT = 5.0  # Linear counts an answer slower than 5 s as a failure
RESOURCE_TYPES = ("Issue", "Comment")
ORGANIZATION_ID = make_id("organization", 1)
# Issue fields as ``updatedFrom`` names them -> the record's attribute.
UPDATED_FROM = {
    "title": "title",
    "description": "description",
    "stateId": "state_id",
    "labelIds": "label_ids",
    "priority": "priority",
    "projectId": "project_id",
    "updatedAt": "updated_at",
}


def signature(secret: str, body: bytes) -> str:
    """Linear's ``Linear-Signature`` for ``body``."""
    return hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


@dataclass
class LinearHook:
    """A webhook: where deliveries go, its signing secret, the team it listens to (None: all
    public teams) and the resource types it wants."""

    id: str
    url: str
    secret: str
    team_id: str | None = None
    resource_types: tuple[str, ...] = RESOURCE_TYPES


class LinearHooks:
    """The workspace's webhooks and its delivery log (``FakeLinear.hooks``)."""

    def __init__(self, linear: FakeLinear, now: Callable[[], float] = time.time) -> None:
        self.linear = linear
        self.now = now
        self.hooks: dict[str, LinearHook] = {}
        self.sender = Sender("fake-linear", TIMEOUT)
        self._serial = 0

    # ------------------------------------------------------------------ for tests

    def add(
        self,
        url: str,
        secret: str,
        *,
        team: str | None = None,
        resource_types: Iterable[str] = RESOURCE_TYPES,
    ) -> LinearHook:
        """A new webhook; ``team``: a team's key (None: all public teams)."""
        kinds = tuple(resource_types)
        unknown = set(kinds) - set(RESOURCE_TYPES)
        if unknown:
            raise ValueError(f"the fake sends only {RESOURCE_TYPES}, not {sorted(unknown)}")
        with self.linear.lock:
            team_id = self.linear.workspace.team_by_key(team).id if team else None
            self._serial += 1
            hook = LinearHook(make_id("webhook", self._serial), url, secret, team_id, kinds)
            self.hooks[hook.id] = hook
            return hook

    @property
    def deliveries(self) -> list[Delivery]:
        return self.sender.deliveries()

    def redeliver(self, delivery_id: str) -> list[Delivery]:
        """The same bytes again (its ``webhookTimestamp`` as it was: a replay, once stale)."""
        return self.sender.redeliver(delivery_id)

    def wait_idle(self, timeout: float = 30.0) -> None:
        self.sender.wait_idle(timeout)

    def close(self) -> None:
        self.sender.close()

    # ------------------------------------------------------------------ used by the workspace

    def changed(
        self, kind: str, action: str, entity_id: str, actor_id: str | None, before: Json
    ) -> None:
        """``Workspace.listener``: an ``Issue`` or ``Comment`` was created, updated (``before``:
        the issue's fields as they were) or removed."""
        if not self.hooks:
            return
        updated_from = {
            key: value
            for key, value in before.items()
            if key in UPDATED_FROM and value != self._issue_field(entity_id, key)
        }

        def build() -> list[Delivery]:
            with self.linear.lock:
                team_id = self._team_of(kind, entity_id)
                hooks = [
                    h
                    for h in self.hooks.values()
                    if kind in h.resource_types and h.team_id in (None, team_id)
                ]
                if not hooks:
                    return []
                data = self._entity(kind, entity_id)
                actor = self._actor(actor_id)
            payload: Json = {"action": action, "actor": actor, "data": data, "type": kind}
            if action == "update":
                payload["updatedFrom"] = {
                    k: (iso_ms(v) if k == "updatedAt" else v) for k, v in updated_from.items()
                }
            return [self._delivery(h, payload) for h in hooks]

        self.sender.queue(build)

    # ------------------------------------------------------------------ deliveries

    def _delivery(self, hook: LinearHook, fields: Json) -> Delivery:
        sent_ms = int(self.now() * 1000)
        kind, action = str(fields["type"]), str(fields["action"])
        payload: Json = {
            **fields,
            "createdAt": iso_ms(sent_ms),
            "url": fields["data"].get("url"),
            "organizationId": ORGANIZATION_ID,
            "webhookId": hook.id,
            "webhookTimestamp": sent_ms,
        }
        body = json.dumps(payload).encode()
        delivery_id = str(uuid.uuid4())
        headers = {
            "Content-Type": "application/json; charset=utf-8",
            "User-Agent": "Linear-Webhook",
            "Linear-Delivery": delivery_id,
            "Linear-Event": kind,
            "Linear-Signature": signature(hook.secret, body),
        }
        return Delivery(delivery_id, hook.url, kind, action, body, headers, hook.id)

    # ------------------------------------------------------------------ payloads

    def _issue_field(self, issue_id: str, key: str) -> Any:
        issue = self.linear.workspace.issues.get(issue_id)
        return None if issue is None else getattr(issue, UPDATED_FROM[key])

    def _team_of(self, kind: str, entity_id: str) -> str | None:
        ws = self.linear.workspace
        if kind == "Comment":
            entity_id = ws.comments[entity_id].issue_id
        return ws.issues[entity_id].team_id

    def _actor(self, user_id: str | None) -> Json | None:
        if user_id is None:
            return None
        user = self.linear.workspace.users[user_id]
        return {"id": user.id, "name": user.name, "email": user.email, "type": "user"}

    def _entity(self, kind: str, entity_id: str) -> Json:
        ws = self.linear.workspace
        if kind == "Comment":
            return self._comment(ws.comments[entity_id])
        return self._issue(ws.issues[entity_id])

    def _issue(self, issue: Issue) -> Json:
        ws = self.linear.workspace
        team, state = ws.teams[issue.team_id], ws.states[issue.state_id]
        labels = [ws.labels[i] for i in issue.label_ids]
        return {
            "id": issue.id,
            "createdAt": iso_ms(issue.created_at),
            "updatedAt": iso_ms(issue.updated_at),
            "archivedAt": iso_ms(issue.archived_at),
            "number": issue.number,
            "identifier": issue.identifier,
            "title": issue.title,
            "description": issue.description,
            "priority": issue.priority,
            "teamId": team.id,
            "team": {"id": team.id, "key": team.key, "name": team.name},
            "stateId": state.id,
            "state": {
                "id": state.id,
                "name": state.name,
                "type": state.type,
                "color": state.color,
            },
            "labelIds": list(issue.label_ids),
            "labels": [{"id": x.id, "name": x.name, "color": x.color} for x in labels],
            "projectId": issue.project_id,
            "creatorId": issue.creator_id,
            "startedAt": iso_ms(issue.started_at),
            "completedAt": iso_ms(issue.completed_at),
            "canceledAt": iso_ms(issue.canceled_at),
            "url": ws.url(issue),
        }

    def _comment(self, comment: Comment) -> Json:
        ws = self.linear.workspace
        issue = ws.issues[comment.issue_id]
        return {
            "id": comment.id,
            "createdAt": iso_ms(comment.created_at),
            "updatedAt": iso_ms(comment.updated_at),
            "body": comment.body,
            "issueId": issue.id,
            "issue": {
                "id": issue.id,
                "identifier": issue.identifier,
                "title": issue.title,
                "teamId": issue.team_id,
            },
            "userId": comment.user_id,
            "url": f"{ws.url(issue)}#comment-{comment.id[:8]}",
        }

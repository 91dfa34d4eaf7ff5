"""The calls the Linear provider makes, one method each, over ``LinearTransport``.

Ids cpe makes for its own creates are deterministic (``made_id``): Linear takes a client-chosen
UUID for a new issue, relation or comment (``IssueCreateInput.id``), so a create whose answer
was lost, or which a kill cut short before its acknowledgement, is found again by asking for
that id: one request, no search, and no marker in the text an agent reads.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Iterator, Mapping
from typing import Any

from adapters.providers.linear import documents as docs
from adapters.providers.linear.transport import Json, LinearTransport
from domain.errors import NotFoundError, ProviderError


def made_id(*parts: str) -> str:
    """A UUID (v4 in form, as Linear asks for) derived from ``parts``: the same key, the same
    id, every time."""
    digest = hashlib.sha256("\x1f".join(("cpe", *parts)).encode()).digest()
    return str(uuid.UUID(bytes=digest[:16], version=4))


def _payload(data: Json, field: str, what: str) -> Json:
    """A mutation's payload, refused unless it says ``success``."""
    payload = data.get(field)
    if not isinstance(payload, dict) or payload.get("success") is not True:
        raise ProviderError(f"{what}: Linear did not say it succeeded", transient=False)
    return payload


def nodes(connection: object) -> list[Json]:
    if not isinstance(connection, dict):
        return []
    return [n for n in connection.get("nodes") or [] if isinstance(n, dict)]


class LinearApi:
    def __init__(self, transport: LinearTransport) -> None:
        self.transport = transport

    def close(self) -> None:
        self.transport.close()

    # ------------------------------------------------------------------ reads

    def viewer(self) -> Json:
        return dict(self.transport.query(docs.VIEWER, {}, "read the token's user")["viewer"])

    def team(self, key: str) -> Json | None:
        data = self.transport.query(docs.TEAM, {"key": key}, f"read the team {key}")
        found = nodes(data.get("teams"))
        return found[0] if found else None

    def team_keys(self) -> list[str]:
        """The keys of the teams the token's user sees (the first 50), to name them when the
        configured one is not among them."""
        data = self.transport.query(docs.TEAMS, {}, "list the teams")
        return [str(t.get("key")) for t in nodes(data.get("teams")) if t.get("key")]

    def members(self, team_id: str) -> list[Json]:
        found: list[Json] = []
        after: str | None = None
        while True:
            data = self.transport.query(
                docs.MEMBERS, {"id": team_id, "after": after}, "read the team's members"
            )
            connection = (data.get("team") or {}).get("members") or {}
            found.extend(nodes(connection))
            page = connection.get("pageInfo") or {}
            if not page.get("hasNextPage") or not page.get("endCursor"):
                return found
            after = str(page["endCursor"])

    def projects(self, name: str) -> list[Json]:
        data = self.transport.query(docs.PROJECTS, {"name": name}, f"read the project {name!r}")
        return nodes(data.get("projects"))

    def team_labels(self, team_id: str) -> list[Json]:
        data = self.transport.query(docs.TEAM_LABELS, {"id": team_id}, "read the team's labels")
        return nodes((data.get("team") or {}).get("labels"))

    def labels(self, ids: list[str]) -> list[Json]:
        """Labels by id (a workspace label an issue carries, or one made since start)."""
        data = self.transport.query(docs.LABELS, {"ids": ids[:50]}, "read labels")
        return nodes(data.get("issueLabels"))

    def issue_pages(self, filter_: Mapping[str, Any], first: int) -> Iterator[list[Json]]:
        """The issues ``filter_`` selects, a page at a time (cursor pagination)."""
        after: str | None = None
        while True:
            data = self.transport.query(
                docs.ISSUES,
                {"filter": dict(filter_), "first": first, "after": after},
                "list issues",
            )
            connection = data.get("issues") or {}
            yield nodes(connection)
            page = connection.get("pageInfo") or {}
            if not page.get("hasNextPage") or not page.get("endCursor"):
                return
            after = str(page["endCursor"])

    def changed(self, filter_: Mapping[str, Any]) -> bool:
        """Whether any issue matches ``filter_`` (one issue asked for: a few points)."""
        data = self.transport.query(docs.CHANGED, {"filter": dict(filter_)}, "look for changes")
        return bool(nodes(data.get("issues")))

    def issue(self, id_or_identifier: str) -> Json:
        """One issue by its id or identifier (``ENG-12``); ``NotFoundError`` when none."""
        data = self.transport.query(
            docs.ISSUE, {"id": id_or_identifier}, f"read issue {id_or_identifier}"
        )
        issue = data.get("issue")
        if not isinstance(issue, dict):
            raise NotFoundError(f"issue {id_or_identifier} does not exist")
        return issue

    def find_issue(self, issue_id: str) -> Json | None:
        try:
            return self.issue(issue_id)
        except NotFoundError:
            return None

    def history(self, issue_id: str) -> list[Json]:
        """An issue's history entries, oldest page first as Linear lists them."""
        found: list[Json] = []
        after: str | None = None
        while True:
            data = self.transport.query(
                docs.HISTORY, {"id": issue_id, "after": after}, "read an issue's history"
            )
            connection = (data.get("issue") or {}).get("history") or {}
            found.extend(nodes(connection))
            page = connection.get("pageInfo") or {}
            if not page.get("hasNextPage") or not page.get("endCursor"):
                return found
            after = str(page["endCursor"])

    def comment_exists(self, comment_id: str) -> bool:
        data = self.transport.query(docs.COMMENT, {"id": comment_id}, "read a comment")
        return bool(nodes(data.get("comments")))

    # ------------------------------------------------------------------ writes

    def create_issue(self, fields: Mapping[str, Any]) -> Json:
        data = self.transport.mutate(docs.ISSUE_CREATE, {"input": dict(fields)}, "create issue")
        issue = _payload(data, "issueCreate", "create issue").get("issue")
        if not isinstance(issue, dict):
            raise ProviderError("create issue: Linear sent no issue back", transient=True)
        return issue

    def update_issue(self, issue_id: str, fields: Mapping[str, Any], what: str) -> Json:
        data = self.transport.mutate(
            docs.ISSUE_UPDATE, {"id": issue_id, "input": dict(fields)}, what
        )
        issue = _payload(data, "issueUpdate", what).get("issue")
        if not isinstance(issue, dict):
            raise ProviderError(f"{what}: Linear sent no issue back", transient=True)
        return issue

    def relate(self, relation_id: str, blocker_id: str, blocked_id: str) -> None:
        """``blocker`` blocks ``blocked`` (Linear's ``blocks``: the source blocks the target)."""
        fields = {
            "id": relation_id,
            "issueId": blocker_id,
            "relatedIssueId": blocked_id,
            "type": "blocks",
        }
        data = self.transport.mutate(docs.RELATION_CREATE, {"input": fields}, "relate issues")
        _payload(data, "issueRelationCreate", "relate issues")

    def comment(self, comment_id: str | None, issue_id: str, body: str) -> None:
        fields: Json = {"issueId": issue_id, "body": body}
        if comment_id is not None:
            fields["id"] = comment_id
        data = self.transport.mutate(docs.COMMENT_CREATE, {"input": fields}, "comment")
        _payload(data, "commentCreate", "comment")

    def create_label(self, team_id: str, name: str, color: str, description: str) -> Json:
        fields = {"teamId": team_id, "name": name, "color": color, "description": description}
        data = self.transport.mutate(
            docs.LABEL_CREATE, {"input": fields}, f"create the label {name!r}"
        )
        label = _payload(data, "issueLabelCreate", "create label").get("issueLabel")
        if not isinstance(label, dict):
            raise ProviderError("create label: Linear sent no label back", transient=True)
        return label

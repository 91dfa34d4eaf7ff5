"""How the fake Linear resolves the fields of its object types (``Issue``, ``Team``, the
connections, the payloads...): ``FIELDS[type][field]`` is a graphql-core resolver
``(parent, info, **arguments)``. The root fields (``Query``, ``Mutation``) are in ``roots.py``.

A connection field (``Team.states``, ``Issue.labels``...) pages and filters as every Linear
connection does (``connections.py``, ``filters.py``). ``Team.labels`` lists the team's own
labels (a workspace label is in ``issueLabels``, not here).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from graphql import GraphQLResolveInfo

from tests.fakes.linear.connections import connection
from tests.fakes.linear.filters import Scope, matches
from tests.fakes.linear.records import Comment, Credential, Issue, Team, User, iso_ms
from tests.fakes.linear.workspace import Workspace

Resolver = Callable[..., Any]


@dataclass(frozen=True)
class Context:
    """What every resolver is given (``info.context``): the workspace and who is asking."""

    workspace: Workspace
    viewer: User
    credential: Credential

    @property
    def scope(self) -> Scope:
        return Scope(self.workspace, self.viewer)


def ctx(info: GraphQLResolveInfo) -> Context:
    context: Context = info.context
    return context


def attr(name: str) -> Resolver:
    return lambda obj, info, **_: getattr(obj, name)


def key(name: str) -> Resolver:
    return lambda obj, info, **_: obj[name]


def stamp(name: str) -> Resolver:
    return lambda obj, info, **_: iso_ms(getattr(obj, name))


def listing(kind: str | None, nodes: Callable[[Any, Context], Iterable[Any]]) -> Resolver:
    """A connection field: ``nodes(parent, context)`` paged, ordered and filtered (by the
    ``filter`` argument, judged as a ``kind`` filter)."""

    def resolve(obj: Any, info: GraphQLResolveInfo, **args: Any) -> dict[str, Any]:
        context = ctx(info)
        flt = args.get("filter")
        scope = context.scope
        keep = (lambda n: matches(scope, kind, n, flt)) if kind and flt else (lambda _: True)
        return connection(nodes(obj, context), args, keep)

    return resolve


def _entity() -> dict[str, Resolver]:
    return {
        "id": attr("id"),
        "createdAt": stamp("created_at"),
        "updatedAt": stamp("updated_at"),
        "archivedAt": stamp("archived_at"),
    }


def _teams_of(user: User, c: Context) -> list[Team]:
    """``User.teams``: the teams the user is a member of."""
    return [t for t in c.workspace.teams.values() if c.workspace.is_member(t, user)]


def _members(obj: Team, info: GraphQLResolveInfo, **args: Any) -> dict[str, Any]:
    c = ctx(info)
    ws = c.workspace
    users = [
        ws.users[m.user_id]
        for m in ws.memberships.values()
        if m.team_id == obj.id and (ws.users[m.user_id].active or args.get("includeDisabled"))
    ]
    flt = args.get("filter")
    return connection(users, args, lambda u: matches(c.scope, "user", u, flt))


def _issue_url(obj: Issue, info: GraphQLResolveInfo, **_: Any) -> str:
    return ctx(info).workspace.url(obj)


def _comment_url(obj: Comment, info: GraphQLResolveInfo, **_: Any) -> str:
    ws = ctx(info).workspace
    return f"{ws.url(ws.issues[obj.issue_id])}#comment-{obj.id[:8]}"


def _user_of(field: str) -> Resolver:
    return lambda obj, info, **_: ctx(info).workspace.users.get(getattr(obj, field) or "")


def _team_of(obj: Any, info: GraphQLResolveInfo, **_: Any) -> Team | None:
    return ctx(info).workspace.teams.get(obj.team_id or "")


def _issue_of(field: str) -> Resolver:
    return lambda obj, info, **_: ctx(info).workspace.issues[getattr(obj, field)]


CONNECTIONS = (
    "User",
    "Team",
    "TeamMembership",
    "WorkflowState",
    "IssueLabel",
    "Project",
    "Issue",
    "IssueRelation",
    "IssueHistory",
    "Comment",
)

FIELDS: dict[str, dict[str, Resolver]] = {
    "Node": {"id": attr("id")},
    "User": {
        **_entity(),
        "name": attr("name"),
        "displayName": attr("display_name"),
        "email": attr("email"),
        "guest": attr("guest"),
        "admin": attr("admin"),
        "active": attr("active"),
        "isMe": lambda obj, info, **_: obj.id == ctx(info).viewer.id,
        "teams": listing("team", _teams_of),
        "teamMemberships": listing(
            None,
            lambda u, c: [m for m in c.workspace.memberships.values() if m.user_id == u.id],
        ),
    },
    "Team": {
        **_entity(),
        "key": attr("key"),
        "name": attr("name"),
        "states": listing("state", lambda t, c: c.workspace.team_states(t)),
        "labels": listing(
            "label", lambda t, c: [lb for lb in c.workspace.labels.values() if lb.team_id == t.id]
        ),
        "members": _members,
        "memberships": listing(
            None,
            lambda t, c: [m for m in c.workspace.memberships.values() if m.team_id == t.id],
        ),
        "issues": listing(
            "issue", lambda t, c: [i for i in c.workspace.issues.values() if i.team_id == t.id]
        ),
    },
    "TeamMembership": {
        **_entity(),
        "owner": attr("owner"),
        "team": _team_of,
        "user": _user_of("user_id"),
    },
    "WorkflowState": {
        **_entity(),
        "name": attr("name"),
        "type": attr("type"),
        "position": attr("position"),
        "color": attr("color"),
        "description": attr("description"),
        "team": _team_of,
    },
    "IssueLabel": {
        **_entity(),
        "name": attr("name"),
        "color": attr("color"),
        "description": attr("description"),
        "isGroup": attr("is_group"),
        "team": _team_of,
    },
    "Project": {
        **_entity(),
        "name": attr("name"),
        "slugId": attr("slug_id"),
        "url": lambda obj, info, **_: f"https://linear.app/acme/project/{obj.slug_id}",
    },
    "Issue": {
        **_entity(),
        "identifier": attr("identifier"),
        "number": attr("number"),
        "title": attr("title"),
        "description": attr("description"),
        "url": _issue_url,
        "priority": attr("priority"),
        "trashed": lambda obj, info, **_: obj.trashed or None,
        "startedAt": stamp("started_at"),
        "completedAt": stamp("completed_at"),
        "canceledAt": stamp("canceled_at"),
        "state": lambda obj, info, **_: ctx(info).workspace.states[obj.state_id],
        "team": _team_of,
        "creator": _user_of("creator_id"),
        "project": lambda obj, info, **_: ctx(info).workspace.projects.get(obj.project_id or ""),
        "labelIds": lambda obj, info, **_: list(obj.label_ids),
        "labels": listing("label", lambda i, c: [c.workspace.labels[x] for x in i.label_ids]),
        "relations": listing(
            None, lambda i, c: [r for r in c.workspace.relations.values() if r.issue_id == i.id]
        ),
        "inverseRelations": listing(
            None,
            lambda i, c: [r for r in c.workspace.relations.values() if r.related_issue_id == i.id],
        ),
        "history": listing(
            None, lambda i, c: [h for h in c.workspace.history.values() if h.issue_id == i.id]
        ),
        "comments": listing(
            "comment",
            lambda i, c: [x for x in c.workspace.comments.values() if x.issue_id == i.id],
        ),
    },
    "IssueRelation": {
        **_entity(),
        "type": attr("type"),
        "issue": _issue_of("issue_id"),
        "relatedIssue": _issue_of("related_issue_id"),
    },
    "IssueHistory": {
        **_entity(),
        "issue": _issue_of("issue_id"),
        "actor": _user_of("actor_id"),
        "actorId": attr("actor_id"),
        "addedLabelIds": attr("added_label_ids"),
        "removedLabelIds": attr("removed_label_ids"),
        "fromStateId": attr("from_state_id"),
        "toStateId": attr("to_state_id"),
    },
    "Comment": {
        **_entity(),
        "body": attr("body"),
        "url": _comment_url,
        "editedAt": stamp("edited_at"),
        "issue": _issue_of("issue_id"),
        "issueId": attr("issue_id"),
        "user": _user_of("user_id"),
    },
    "PageInfo": {
        name: key(name) for name in ("hasNextPage", "hasPreviousPage", "startCursor", "endCursor")
    },
    **{f"{n}Connection": {f: key(f) for f in ("edges", "nodes", "pageInfo")} for n in CONNECTIONS},
    **{f"{n}Edge": {f: key(f) for f in ("node", "cursor")} for n in CONNECTIONS},
    "IssuePayload": {f: key(f) for f in ("lastSyncId", "issue", "success")},
    "IssueArchivePayload": {f: key(f) for f in ("lastSyncId", "entity", "success")},
    "IssueRelationPayload": {f: key(f) for f in ("lastSyncId", "issueRelation", "success")},
    "DeletePayload": {f: key(f) for f in ("lastSyncId", "entityId", "success")},
    "CommentPayload": {f: key(f) for f in ("lastSyncId", "comment", "success")},
    "IssueLabelPayload": {f: key(f) for f in ("lastSyncId", "issueLabel", "success")},
}

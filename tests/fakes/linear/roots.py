"""The fake Linear's root fields: ``ROOTS["Query"]`` and ``ROOTS["Mutation"]``, resolvers
over the workspace as the viewer (the token's user) sees it.

Who sees what: a member sees every team (the fake's teams are public), a guest only the teams
they were invited to; an issue, state, label or comment of a team one cannot see is "not
found", as Linear answers. Ids: ``issue(id:)``, ``issueUpdate(id:)``, ``issueArchive(id:)``
and the relation's ``issueId``/``relatedIssueId`` take an issue's UUID or its identifier
(``ENG-12``); ``team(id:)`` and every other id take the UUID. A mutation's input may choose the
new entity's ``id`` (a UUID v4), as Linear allows; one already taken is refused.

Input fields Linear's schema has but the fake does not model (``assigneeId``, ``cycleId``,
``createAsUser``...) are refused with ``FAKE_NOT_IMPLEMENTED`` when given a value.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from graphql import GraphQLResolveInfo

from tests.fakes.linear.errors import invalid, not_found, not_implemented
from tests.fakes.linear.fields import Context, Resolver, ctx, listing
from tests.fakes.linear.records import Issue, Label, Project, State, Team, User
from tests.fakes.linear.workspace import Workspace


def _only(input_name: str, given: Mapping[str, Any], handled: Iterable[str]) -> None:
    """Refuse a value for an input field the fake does not model."""
    for name, value in given.items():
        if value is not None and name not in handled:
            raise not_implemented(f"{input_name}.{name}")


def _team(c: Context, team_id: str) -> Team:
    team = c.workspace.teams.get(team_id)
    if team is None or not c.workspace.can_see(c.viewer, team):
        raise not_found("Team")
    return team


def _issue(c: Context, ref: str) -> Issue:
    issue = c.workspace.issue(ref)
    if not c.workspace.can_see(c.viewer, c.workspace.teams[issue.team_id]):
        raise not_found("Issue")
    return issue


def _state(ws: Workspace, state_id: str) -> State:
    return ws.entity(ws.states, state_id, "WorkflowState")


def _labels(ws: Workspace, ids: Iterable[str]) -> list[Label]:
    return [ws.entity(ws.labels, i, "IssueLabel") for i in ids]


def _project(ws: Workspace, project_id: str) -> Project:
    return ws.entity(ws.projects, project_id, "Project")


def _visible(c: Context) -> list[Team]:
    return [t for t in c.workspace.teams.values() if c.workspace.can_see(c.viewer, t)]


def _seen_team_ids(c: Context) -> set[str]:
    return {t.id for t in _visible(c)}


def _issues_seen(c: Context) -> list[Issue]:
    seen = _seen_team_ids(c)
    return [i for i in c.workspace.issues.values() if i.team_id in seen]


# ---------------------------------------------------------------------- queries


def _user(obj: Any, info: GraphQLResolveInfo, id: str) -> User:
    ws = ctx(info).workspace
    return ws.entity(ws.users, id, "User")


def _users(c: Context, include_disabled: bool) -> list[User]:
    return [u for u in c.workspace.users.values() if u.active or include_disabled]


def _users_field(obj: Any, info: GraphQLResolveInfo, **args: Any) -> dict[str, Any]:
    inner = listing("user", lambda _, c: _users(c, bool(args.get("includeDisabled"))))
    return inner(obj, info, **args)  # type: ignore[no-any-return]


QUERY: dict[str, Resolver] = {
    "viewer": lambda obj, info: ctx(info).viewer,
    "user": _user,
    "users": _users_field,
    "teams": listing("team", lambda _, c: _visible(c)),
    "team": lambda obj, info, id: _team(ctx(info), id),
    "issues": listing("issue", lambda _, c: _issues_seen(c)),
    "issue": lambda obj, info, id: _issue(ctx(info), id),
    "issueLabels": listing(
        "label",
        lambda _, c: [
            lb
            for lb in c.workspace.labels.values()
            if lb.team_id is None or lb.team_id in _seen_team_ids(c)
        ],
    ),
    "workflowStates": listing(
        "state",
        lambda _, c: [s for s in c.workspace.states.values() if s.team_id in _seen_team_ids(c)],
    ),
    "comments": listing(
        "comment",
        lambda _, c: [
            x
            for x in c.workspace.comments.values()
            if c.workspace.issues[x.issue_id].team_id in _seen_team_ids(c)
        ],
    ),
    "projects": listing("project", lambda _, c: list(c.workspace.projects.values())),
}

# ---------------------------------------------------------------------- mutations


def _issue_create(obj: Any, info: GraphQLResolveInfo, input: dict[str, Any]) -> dict[str, Any]:
    c = ctx(info)
    ws = c.workspace
    _only(
        "IssueCreateInput",
        input,
        ("teamId", "title", "description", "stateId", "labelIds", "projectId", "priority", "id"),
    )
    team = _team(c, input["teamId"])
    priority = input.get("priority") or 0
    if priority not in range(5):
        raise invalid("Argument Validation Error", "priority must be 0 to 4.")
    issue = ws.create_issue(
        c.viewer,
        team,
        input.get("title") or "",
        input.get("description"),
        state=_state(ws, input["stateId"]) if input.get("stateId") else None,
        labels=_labels(ws, input.get("labelIds") or ()),
        project=_project(ws, input["projectId"]) if input.get("projectId") else None,
        priority=priority,
        issue_id=input.get("id"),
    )
    return {"success": True, "issue": issue, "lastSyncId": ws.sync_id}


def _issue_update(
    obj: Any, info: GraphQLResolveInfo, id: str, input: dict[str, Any]
) -> dict[str, Any]:
    c = ctx(info)
    ws = c.workspace
    _only(
        "IssueUpdateInput",
        input,
        (
            "title",
            "description",
            "stateId",
            "labelIds",
            "addedLabelIds",
            "removedLabelIds",
            "projectId",
            "priority",
            "trashed",
        ),
    )
    issue = _issue(c, id)
    replace = input.get("labelIds")
    added, removed = input.get("addedLabelIds"), input.get("removedLabelIds")
    if replace is not None and (added or removed):
        raise invalid(
            "Argument Validation Error",
            "Give labelIds, or addedLabelIds/removedLabelIds, not both.",
        )
    label_ids: list[str] | None = None
    if replace is not None:
        label_ids = [lb.id for lb in _labels(ws, replace)]
    elif added or removed:
        gone = {lb.id for lb in _labels(ws, removed or ())}
        fresh = [lb.id for lb in _labels(ws, added or ())]
        label_ids = [i for i in issue.label_ids if i not in gone]
        label_ids += [i for i in fresh if i not in label_ids and i not in gone]
    project: Project | bool | None = False
    if "projectId" in input:
        project = _project(ws, input["projectId"]) if input["projectId"] else None
    ws.update_issue(
        c.viewer,
        issue,
        title=input.get("title"),
        description=input.get("description"),
        state=_state(ws, input["stateId"]) if input.get("stateId") else None,
        label_ids=label_ids,
        project=project,
        priority=input.get("priority"),
    )
    if input.get("trashed") is True and not issue.trashed:
        ws.archive_issue(issue, trash=True)
    elif input.get("trashed") is False and issue.trashed:
        issue.trashed, issue.archived_at = False, None
        ws.touch(issue)
    return {"success": True, "issue": issue, "lastSyncId": ws.sync_id}


def _issue_archive(
    obj: Any, info: GraphQLResolveInfo, id: str, trash: bool | None = None
) -> dict[str, Any]:
    c = ctx(info)
    issue = _issue(c, id)
    if issue.archived_at is None:
        c.workspace.archive_issue(issue, trash=bool(trash))
    return {"success": True, "entity": issue, "lastSyncId": c.workspace.sync_id}


def _relation_create(
    obj: Any,
    info: GraphQLResolveInfo,
    input: dict[str, Any],
    overrideCreatedAt: str | None = None,
) -> dict[str, Any]:
    c = ctx(info)
    if overrideCreatedAt is not None:
        raise not_implemented("issueRelationCreate(overrideCreatedAt:)")
    _only("IssueRelationCreateInput", input, ("id", "issueId", "relatedIssueId", "type"))
    relation = c.workspace.relate(
        c.viewer,
        _issue(c, input["issueId"]),
        _issue(c, input["relatedIssueId"]),
        input["type"],
        relation_id=input.get("id"),
    )
    return {"success": True, "issueRelation": relation, "lastSyncId": c.workspace.sync_id}


def _relation_delete(obj: Any, info: GraphQLResolveInfo, id: str) -> dict[str, Any]:
    c = ctx(info)
    ws = c.workspace
    relation = ws.entity(ws.relations, id, "IssueRelation")
    _issue(c, relation.issue_id)  # one must see the issue to unrelate it
    ws.unrelate(c.viewer, relation)
    return {"success": True, "entityId": id, "lastSyncId": ws.sync_id}


def _comment_create(obj: Any, info: GraphQLResolveInfo, input: dict[str, Any]) -> dict[str, Any]:
    c = ctx(info)
    _only("CommentCreateInput", input, ("body", "issueId", "id", "doNotSubscribeToIssue"))
    if not input.get("issueId"):
        raise invalid(
            "Argument Validation Error",
            "A comment needs an issueId (the fake keeps comments on issues only).",
        )
    comment = c.workspace.comment(
        c.viewer, _issue(c, input["issueId"]), input.get("body") or "", comment_id=input.get("id")
    )
    return {"success": True, "comment": comment, "lastSyncId": c.workspace.sync_id}


def _label_create(
    obj: Any,
    info: GraphQLResolveInfo,
    input: dict[str, Any],
    replaceTeamLabels: bool | None = None,
) -> dict[str, Any]:
    c = ctx(info)
    if replaceTeamLabels:
        raise not_implemented("issueLabelCreate(replaceTeamLabels: true)")
    _only("IssueLabelCreateInput", input, ("name", "teamId", "color", "description", "id"))
    team = _team(c, input["teamId"]) if input.get("teamId") else None
    label = c.workspace.create_label(
        c.viewer,
        input["name"],
        team,
        color=input.get("color"),
        description=input.get("description"),
        label_id=input.get("id"),
    )
    return {"success": True, "issueLabel": label, "lastSyncId": c.workspace.sync_id}


MUTATION: dict[str, Resolver] = {
    "issueCreate": _issue_create,
    "issueUpdate": _issue_update,
    "issueArchive": _issue_archive,
    "issueRelationCreate": _relation_create,
    "issueRelationDelete": _relation_delete,
    "commentCreate": _comment_create,
    "issueLabelCreate": _label_create,
}

ROOTS: dict[str, dict[str, Resolver]] = {"Query": QUERY, "Mutation": MUTATION}

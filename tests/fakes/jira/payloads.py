"""The fake Jira's JSON, laid out as Jira's REST API lays it out (the shapes are checked against
Atlassian's OpenAPI description by the fake's tests).

Dates are Jira's ``2026-11-29T12:00:00.000+0000``, written with the offset of the reader's time
zone. Users: on Cloud an ``accountId`` (no ``name`` or ``key``: GDPR removed them), on Data
Center a ``name`` and ``key``. Issue ``fields`` are chosen as Jira chooses them from the
``fields`` parameter (``*all``, ``*navigable``, names, ``-name`` to leave one out).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

from tests.fakes.jira.records import (
    CATEGORIES,
    ChangeGroup,
    CommentRecord,
    IssueRecord,
    IssueType,
    Link,
    LinkType,
    Status,
    User,
)
from tests.fakes.jira.site import Site

NAVIGABLE = (
    "summary",
    "description",
    "status",
    "issuetype",
    "project",
    "labels",
    "issuelinks",
    "reporter",
    "creator",
    "assignee",
    "created",
    "updated",
    "resolution",
    "resolutiondate",
)
ALL = (*NAVIGABLE, "comment")


def jira_date(stamp: float, zone: str = "UTC") -> str:
    moment = datetime.fromtimestamp(stamp, ZoneInfo(zone))
    return (
        moment.strftime("%Y-%m-%dT%H:%M:%S.")
        + f"{int(stamp * 1000) % 1000:03d}"
        + (moment.strftime("%z"))
    )


def wanted_fields(requested: list[str], default: str) -> list[str]:
    """The fields an answer carries for a ``fields`` parameter (its comma lists, repeated)."""
    names = [n.strip() for item in requested for n in item.split(",") if n.strip()] or [default]
    chosen: list[str] = []
    for name in names:
        if name == "*all":
            chosen += ALL
        elif name == "*navigable":
            chosen += NAVIGABLE
        elif not name.startswith("-") and name in ALL:
            chosen.append(name)
    if all(n.startswith("-") for n in names):
        chosen += NAVIGABLE
    dropped = {n[1:] for n in names if n.startswith("-")}
    return [n for n in dict.fromkeys(chosen) if n not in dropped]


@dataclass
class View:
    """Who reads (their time zone, Cloud or Data Center) and where (``base_url``, API ``api``)."""

    site: Site
    base_url: str
    api: str  # "3" or "2"
    zone: str = "UTC"

    @property
    def rest(self) -> str:
        return f"{self.base_url}/rest/api/{self.api}"

    @property
    def cloud(self) -> bool:
        return self.site.deployment == "cloud"

    def date(self, stamp: float | None) -> str | None:
        return None if stamp is None else jira_date(stamp, self.zone)

    # ------------------------------------------------------------------ people

    def avatars(self, seed: str) -> dict[str, str]:
        return {
            size: f"{self.base_url}/avatar/{seed}?s={size}"
            for size in ("16x16", "24x24", "32x32", "48x48")
        }

    def user(self, user: User, *, full: bool = False) -> dict[str, Any]:
        """``UserDetails`` (``full``: ``User``, as ``/myself`` and ``/user`` answer)."""
        out: dict[str, Any] = {
            "displayName": user.display_name,
            "active": user.active,
            "timeZone": user.time_zone,
            "avatarUrls": self.avatars(user.account_id),
        }
        if self.cloud:
            out["self"] = f"{self.rest}/user?accountId={user.account_id}"
            out["accountId"] = user.account_id
            out["accountType"] = user.account_type
            if full:
                out["emailAddress"] = user.email
        else:
            out["self"] = f"{self.rest}/user?username={user.name}"
            out["name"] = user.name
            out["key"] = user.key
            out["emailAddress"] = user.email
        if full:
            out["locale"] = "en_US"
            out["groups"] = {"size": len(user.groups), "items": []}
            out["applicationRoles"] = {"size": 1, "items": []}
            out["expand"] = "groups,applicationRoles"
        return out

    def group(self, name: str) -> dict[str, Any]:
        group_id = self.site.groups[name]
        out = {"name": name, "self": f"{self.rest}/group?groupId={group_id}"}
        if self.cloud:
            out["groupId"] = group_id
        return out

    def person(self, name: str | None) -> dict[str, Any] | None:
        return None if name is None else self.user(self.site.users[name])

    # ------------------------------------------------------------------ the project

    def category(self, key: str) -> dict[str, Any]:
        number, name, color = CATEGORIES[key]
        return {
            "self": f"{self.rest}/statuscategory/{number}",
            "id": number,
            "key": key,
            "colorName": color,
            "name": name,
        }

    def status(self, status: Status) -> dict[str, Any]:
        return {
            "self": f"{self.rest}/status/{status.id}",
            "description": "",
            "iconUrl": f"{self.base_url}/images/icons/statuses/generic.png",
            "name": status.name,
            "id": status.id,
            "statusCategory": self.category(status.category),
        }

    def issue_type(self, kind: IssueType) -> dict[str, Any]:
        return {
            "self": f"{self.rest}/issuetype/{kind.id}",
            "id": kind.id,
            "description": "",
            "iconUrl": f"{self.base_url}/images/icons/issuetypes/{kind.name.lower()}.png",
            "name": kind.name,
            "subtask": kind.subtask,
            "avatarId": 10318,
            "hierarchyLevel": kind.hierarchy,
        }

    def project_ref(self) -> dict[str, Any]:
        site = self.site
        return {
            "self": f"{self.rest}/project/{site.project_id}",
            "id": site.project_id,
            "key": site.project_key,
            "name": site.project_name,
            "projectTypeKey": "software",
            "simplified": False,
            "avatarUrls": self.avatars(site.project_key),
        }

    def project(self) -> dict[str, Any]:
        lead = next(iter(self.site.users.values()))
        return {
            **self.project_ref(),
            "expand": "description,lead,issueTypes,url,projectKeys,permissions,insight",
            "description": "",
            "lead": self.user(lead),
            "components": [],
            "issueTypes": [self.issue_type(t) for t in self.site.issue_types],
            "assigneeType": "UNASSIGNED",
            "versions": [],
            "roles": {},
            "style": "classic",
            "isPrivate": False,
            "properties": {},
        }

    def project_statuses(self) -> list[dict[str, Any]]:
        return [
            {
                "self": f"{self.rest}/issuetype/{kind.id}",
                "id": kind.id,
                "name": kind.name,
                "subtask": kind.subtask,
                "statuses": [self.status(s) for s in self.site.statuses],
            }
            for kind in self.site.issue_types
        ]

    def link_type(self, kind: LinkType) -> dict[str, Any]:
        return {
            "id": kind.id,
            "name": kind.name,
            "inward": kind.inward,
            "outward": kind.outward,
            "self": f"{self.rest}/issueLinkType/{kind.id}",
        }

    # ------------------------------------------------------------------ issues

    def issue_ref(self, issue: IssueRecord) -> dict[str, Any]:
        return {
            "id": issue.id,
            "key": issue.key,
            "self": f"{self.rest}/issue/{issue.id}",
            "fields": {
                "summary": issue.summary,
                "status": self.status(self.site.status(issue.status_id)),
                "issuetype": self.issue_type(self.site.issue_type(issue.type_id)),
            },
        }

    def link(self, link: Link, seen_from: str) -> dict[str, Any]:
        kind = self.site.link_type(type_id=link.type_id)
        assert kind is not None
        out: dict[str, Any] = {
            "id": link.id,
            "self": f"{self.rest}/issueLink/{link.id}",
            "type": self.link_type(kind),
        }
        if link.source == seen_from:  # this issue [outward] the other
            out["outwardIssue"] = self.issue_ref(self.site.issues[link.destination])
        else:  # this issue [inward] the other
            out["inwardIssue"] = self.issue_ref(self.site.issues[link.source])
        return out

    def comment(self, comment: CommentRecord, issue: IssueRecord) -> dict[str, Any]:
        author = self.person(comment.author)
        out: dict[str, Any] = {
            "self": f"{self.rest}/issue/{issue.id}/comment/{comment.id}",
            "id": comment.id,
            "author": author,
            "body": comment.body,
            "updateAuthor": author,
            "created": self.date(comment.created),
            "updated": self.date(comment.updated),
        }
        if self.cloud:
            out["jsdPublic"] = True
        return out

    def comments(self, issue: IssueRecord, start: int = 0, limit: int = 5000) -> dict[str, Any]:
        chunk = issue.comments[start : start + limit]
        return {
            "comments": [self.comment(c, issue) for c in chunk],
            "maxResults": limit,
            "total": len(issue.comments),
            "startAt": start,
        }

    def change_group(self, group: ChangeGroup) -> dict[str, Any]:
        return {
            "id": group.id,
            "author": self.person(group.author),
            "created": self.date(group.created),
            "items": [
                {  # what is null is left out: the description's ChangeDetails has no nulls
                    key: value
                    for key, value in (
                        ("field", item.field),
                        ("fieldtype", "jira"),
                        ("fieldId", item.field_id),
                        ("from", item.from_id),
                        ("fromString", item.from_string),
                        ("to", item.to_id),
                        ("toString", item.to_string),
                    )
                    if value is not None
                }
                for item in group.items
            ],
        }

    def field(self, issue: IssueRecord, name: str) -> Any:
        site = self.site
        values: dict[str, Any] = {
            "summary": lambda: issue.summary,
            "description": lambda: issue.description,
            "status": lambda: self.status(site.status(issue.status_id)),
            "issuetype": lambda: self.issue_type(site.issue_type(issue.type_id)),
            "project": self.project_ref,
            "labels": lambda: list(issue.labels),
            "issuelinks": lambda: [self.link(ln, issue.key) for ln in site.links_of(issue.key)],
            "reporter": lambda: self.person(issue.reporter),
            "creator": lambda: self.person(issue.creator),
            "assignee": lambda: self.person(issue.assignee),
            "created": lambda: self.date(issue.created),
            "updated": lambda: self.date(issue.updated),
            "resolution": lambda: (
                None
                if issue.resolution is None
                else {
                    "self": f"{self.rest}/resolution/10000",
                    "id": "10000",
                    "name": issue.resolution,
                    "description": "Work has been completed on this issue.",
                }
            ),
            "resolutiondate": lambda: self.date(issue.resolution_date),
            "comment": lambda: self.comments(issue),
        }
        return values[name]()

    def issue(
        self, issue: IssueRecord, fields: list[str], expand: set[str] | None = None
    ) -> dict[str, Any]:
        out: dict[str, Any] = {
            "expand": "renderedFields,names,schema,operations,editmeta,changelog,"
            "versionedRepresentations",
            "id": issue.id,
            "self": f"{self.rest}/issue/{issue.id}",
            "key": issue.key,
        }
        if fields:
            out["fields"] = {name: self.field(issue, name) for name in fields}
        if expand and "changelog" in expand:
            histories = [self.change_group(g) for g in reversed(issue.history)]
            out["changelog"] = {
                "startAt": 0,
                "maxResults": len(histories),
                "total": len(histories),
                "histories": histories,
            }
        if expand and "transitions" in expand:
            out["transitions"] = self.transitions(issue)["transitions"]
        return out

    def transitions(self, issue: IssueRecord) -> dict[str, Any]:
        return {
            "expand": "transitions",
            "transitions": [
                {
                    "id": t.id,
                    "name": t.name,
                    "to": self.status(self.site.status(t.to)),
                    "hasScreen": False,
                    "isGlobal": not t.sources,
                    "isInitial": False,
                    "isAvailable": True,
                    "isConditional": False,
                    "isLooped": False,
                }
                for t in self.site.available(issue)
            ],
        }

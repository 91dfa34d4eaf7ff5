"""JSON payloads of the fake GitLab's tracker side (users, the project, members, labels, issues,
notes, label events, issue links), with the fields GitLab's REST API sends for each entity
(``entities.py`` keeps the field lists the tests check them against). Fields the fake has no
world for (milestones, time tracking, award emoji) are sent with the values a project that does
not use them shows."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tests.fakes.clock import EPOCH_START
from tests.fakes.clock import iso_ms as iso
from tests.fakes.gitlab.records import IssueRecord, LabelEventRecord, LabelRecord, NoteRecord

Json = dict[str, Any]

PROJECT_ID = 4242
NAMESPACE_ID = 77


@dataclass(frozen=True)
class Site:
    """Where the fake is (``base``: ``http://127.0.0.1:port``) and its project's path."""

    base: str
    path: str  # "acme/widgets"

    @property
    def namespace(self) -> str:
        return self.path.rpartition("/")[0]

    @property
    def name(self) -> str:
        return self.path.rpartition("/")[2]

    @property
    def web(self) -> str:
        return f"{self.base}/{self.path}"

    @property
    def api(self) -> str:
        return f"{self.base}/api/v4/projects/{PROJECT_ID}"


def user(site: Site, username: str, user_id: int) -> Json:
    """``UserBasic``: how GitLab shows a person anywhere (an author, a member, a note's)."""
    return {
        "id": user_id,
        "username": username,
        "public_email": None,
        "name": username.replace(".", " ").title(),
        "state": "active",
        "locked": False,
        "avatar_url": None,
        "web_url": f"{site.base}/{username}",
    }


def current_user(site: Site, username: str, user_id: int, bot: bool) -> Json:
    """``GET /user``: the token's user, with what a user sees of their own account."""
    return {
        **user(site, username, user_id),
        "created_at": iso(EPOCH_START),
        "bio": "",
        "location": "",
        "linkedin": "",
        "twitter": "",
        "discord": "",
        "website_url": "",
        "organization": "",
        "job_title": "",
        "pronouns": None,
        "bot": bot,
        "work_information": None,
        "local_time": None,
        "last_sign_in_at": None,
        "confirmed_at": iso(EPOCH_START),
        "last_activity_on": None,
        "email": f"{username}@example.invalid",
        "theme_id": 1,
        "color_scheme_id": 1,
        "projects_limit": 100000,
        "current_sign_in_at": None,
        "identities": [],
        "can_create_group": not bot,
        "can_create_project": not bot,
        "two_factor_enabled": False,
        "external": False,
        "private_profile": False,
        "commit_email": f"{username}@example.invalid",
    }


def member(site: Site, username: str, user_id: int, access_level: int) -> Json:
    """A project member (``GET /projects/:id/members/all/:user_id``)."""
    return {
        **user(site, username, user_id),
        "access_level": access_level,
        "created_at": iso(EPOCH_START),
        "created_by": None,
        "expires_at": None,
        "membership_state": "active",
    }


def project(site: Site, settings: Json, access_level: int, default_branch: str) -> Json:
    """A project as ``GET /projects/:id`` shows it to a signed-in user (``permissions``: theirs)."""
    return {
        "id": PROJECT_ID,
        "description": None,
        "name": site.name,
        "name_with_namespace": f"{site.namespace} / {site.name}",
        "path": site.name,
        "path_with_namespace": site.path,
        "created_at": iso(EPOCH_START),
        "default_branch": default_branch,
        "tag_list": [],
        "topics": [],
        "ssh_url_to_repo": f"git@127.0.0.1:{site.path}.git",
        "http_url_to_repo": f"{site.web}.git",
        "web_url": site.web,
        "readme_url": None,
        "forks_count": 0,
        "avatar_url": None,
        "star_count": 0,
        "last_activity_at": iso(EPOCH_START),
        "namespace": {
            "id": NAMESPACE_ID,
            "name": site.namespace,
            "path": site.namespace,
            "kind": "group",
            "full_path": site.namespace,
            "parent_id": None,
            "avatar_url": None,
            "web_url": f"{site.base}/groups/{site.namespace}",
        },
        "_links": {
            "self": site.api,
            "issues": f"{site.api}/issues",
            "merge_requests": f"{site.api}/merge_requests",
            "repo_branches": f"{site.api}/repository/branches",
            "labels": f"{site.api}/labels",
            "events": f"{site.api}/events",
            "members": f"{site.api}/members",
            "cluster_agents": f"{site.api}/cluster_agents",
        },
        "empty_repo": False,
        "archived": False,
        "visibility": "public",
        "issues_enabled": True,
        "merge_requests_enabled": True,
        "jobs_enabled": True,
        "wiki_enabled": False,
        "snippets_enabled": False,
        "creator_id": 1,
        "open_issues_count": settings.get("open_issues_count", 0),
        "ci_config_path": None,
        "squash_option": "default_off",
        "squash_commit_template": None,
        "merge_commit_template": None,
        "issue_branch_template": None,
        "autoclose_referenced_issues": True,
        "permissions": {
            "project_access": (
                {"access_level": access_level, "notification_level": 3} if access_level else None
            ),
            "group_access": None,
        },
        **{key: value for key, value in settings.items() if key != "open_issues_count"},
    }


def label(rec: LabelRecord, open_issues: int = 0) -> Json:
    return {
        "id": rec.id,
        "name": rec.name,
        "description": rec.description,
        "description_html": rec.description or "",
        "text_color": "#FFFFFF",
        "color": rec.color,
        "archived": False,
        "subscribed": False,
        "priority": None,
        "is_project_label": True,
        "open_issues_count": open_issues,
        "closed_issues_count": 0,
        "open_merge_requests_count": 0,
    }


def label_brief(rec: LabelRecord) -> Json:
    """A label inside a label event."""
    return {
        "id": rec.id,
        "name": rec.name,
        "color": rec.color,
        "description": rec.description,
        "description_html": rec.description or "",
        "text_color": "#FFFFFF",
    }


def issue(
    site: Site,
    rec: IssueRecord,
    *,
    author: Json,
    closed_by: Json | None,
    notes: int,
    premium: bool,
    blocking: int = 0,
) -> Json:
    url = f"{site.web}/-/issues/{rec.iid}"
    api = f"{site.api}/issues/{rec.iid}"
    payload: Json = {
        "id": rec.id,
        "iid": rec.iid,
        "project_id": PROJECT_ID,
        "title": rec.title,
        "description": rec.description,
        "state": rec.state,
        "created_at": iso(rec.created_at),
        "updated_at": iso(rec.updated_at),
        "closed_at": iso(rec.closed_at),
        "closed_by": closed_by,
        "labels": sorted(rec.labels),
        "milestone": None,
        "assignees": [],
        "author": author,
        "type": "ISSUE",
        "assignee": None,
        "user_notes_count": notes,
        "merge_requests_count": 0,
        "upvotes": 0,
        "downvotes": 0,
        "due_date": None,
        "confidential": False,
        "discussion_locked": None,
        "issue_type": "issue",
        "web_url": url,
        "time_stats": {
            "time_estimate": 0,
            "total_time_spent": 0,
            "human_time_estimate": None,
            "human_total_time_spent": None,
        },
        "task_completion_status": {"count": 0, "completed_count": 0},
        "has_tasks": False,
        "task_status": "",
        "_links": {
            "self": api,
            "notes": f"{api}/notes",
            "award_emoji": f"{api}/award_emoji",
            "project": site.api,
            "closed_as_duplicate_of": None,
        },
        "references": {
            "short": f"#{rec.iid}",
            "relative": f"#{rec.iid}",
            "full": f"{site.path}#{rec.iid}",
        },
        "severity": "UNKNOWN",
        "moved_to_id": None,
        "imported": False,
        "imported_from": "none",
        "service_desk_reply_to": None,
    }
    if premium:
        payload.update(blocking_issues_count=blocking, weight=None, epic_iid=None, epic=None)
    return payload


def note(rec: NoteRecord, author: Json, noteable_id: int) -> Json:
    payload: Json = {
        "id": rec.id,
        "type": "DiffNote" if rec.position else (None if rec.individual else "DiscussionNote"),
        "body": rec.body,
        "author": author,
        "created_at": iso(rec.created_at),
        "updated_at": iso(rec.created_at),
        "system": rec.system,
        "noteable_id": noteable_id,
        "noteable_type": rec.noteable,
        "project_id": PROJECT_ID,
        "resolvable": rec.resolvable,
        "confidential": False,
        "internal": False,
        "imported": False,
        "imported_from": "none",
        "noteable_iid": rec.iid,
        "commands_changes": {},
    }
    if rec.resolvable:
        payload.update(resolved=rec.resolved, resolved_by=None, resolved_at=None)
    if rec.position is not None:
        payload["position"] = rec.position
    return payload


def label_event(rec: LabelEventRecord, by: Json, brief: Json, resource_id: int) -> Json:
    return {
        "id": rec.id,
        "user": by,
        "created_at": iso(rec.created_at),
        "resource_type": rec.noteable,
        "resource_id": resource_id,
        "label": brief,
        "action": rec.action,
    }

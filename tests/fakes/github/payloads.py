"""JSON payloads of the fake GitHub, complete enough for githubkit's strict response models.

Every builder takes the server's ``Urls`` so links point back at the fake. Fields GitHub always
sends are sent, even those the provider never reads: githubkit validates whole payloads, and a
fake that sends less would hide parsing failures the real API would not cause. Fields an API
version removed are sent only to requests that name an older version (``legacy``): API
2026-03-10 dropped ``merge_commit_sha`` from pull requests and the singular ``assignee`` from
issues and pull requests, and a fake that still sent them would hide a provider relying on them.
"""

from __future__ import annotations

import base64
import hashlib
from dataclasses import dataclass
from typing import Any

from tests.fakes.clock import EPOCH_START, iso
from tests.fakes.github.records import EventRecord, IssueRecord, PullRecord

Json = dict[str, Any]

REPOSITORY_ID = 424242
LABEL_COLOR = "ededed"  # every label's (the fake keeps no colors)

_REPO_URL_KEYS = [
    "archive",
    "assignees",
    "blobs",
    "branches",
    "collaborators",
    "comments",
    "commits",
    "compare",
    "contents",
    "contributors",
    "deployments",
    "downloads",
    "events",
    "forks",
    "git_commits",
    "git_refs",
    "git_tags",
    "issue_comment",
    "issue_events",
    "issues",
    "keys",
    "labels",
    "languages",
    "merges",
    "milestones",
    "notifications",
    "pulls",
    "releases",
    "stargazers",
    "statuses",
    "subscribers",
    "subscription",
    "tags",
    "teams",
    "trees",
    "hooks",
]


def node_id(kind: str, key: object) -> str:
    return base64.b64encode(f"{kind}:{key}".encode()).decode()


@dataclass(frozen=True)
class Urls:
    base: str  # http://127.0.0.1:port (no trailing slash)
    owner: str
    repo: str

    @property
    def api(self) -> str:
        return f"{self.base}/repos/{self.owner}/{self.repo}"

    @property
    def html(self) -> str:
        return f"{self.base}/{self.owner}/{self.repo}"


def user(urls: Urls, login: str) -> Json:
    uid = int(hashlib.sha1(login.encode()).hexdigest()[:6], 16)
    base = f"{urls.base}/users/{login}"
    return {
        "login": login,
        "id": uid,
        "node_id": node_id("User", uid),
        "avatar_url": f"{urls.base}/avatars/{login}",
        "gravatar_id": "",
        "url": base,
        "html_url": f"{urls.base}/{login}",
        "followers_url": f"{base}/followers",
        "following_url": f"{base}/following{{/other_user}}",
        "gists_url": f"{base}/gists{{/gist_id}}",
        "starred_url": f"{base}/starred{{/owner}}{{/repo}}",
        "subscriptions_url": f"{base}/subscriptions",
        "organizations_url": f"{base}/orgs",
        "repos_url": f"{base}/repos",
        "events_url": f"{base}/events{{/privacy}}",
        "received_events_url": f"{base}/received_events",
        "type": "Bot" if login.endswith("[bot]") else "User",
        "site_admin": False,
        "user_view_type": "public",
    }


def repository(
    urls: Urls,
    default_branch: str,
    full: bool = False,
    *,
    pushed_at: int = EPOCH_START,
    merge_methods: dict[str, bool] | None = None,
) -> Json:
    """The repository; ``pushed_at`` moves with every push, so every payload embedding the
    repository (a pull request's ``head.repo`` and ``base.repo``) changes with it."""
    data: Json = {
        "id": REPOSITORY_ID,
        "node_id": node_id("Repository", REPOSITORY_ID),
        "name": urls.repo,
        "full_name": f"{urls.owner}/{urls.repo}",
        "license": None,
        "forks": 0,
        "owner": user(urls, urls.owner),
        "private": False,
        "html_url": urls.html,
        "description": "A repository served by the fake GitHub",
        "fork": False,
        "url": urls.api,
        "git_url": f"git://fake/{urls.owner}/{urls.repo}.git",
        "ssh_url": f"git@fake:{urls.owner}/{urls.repo}.git",
        "clone_url": f"{urls.html}.git",
        "svn_url": urls.html,
        "mirror_url": None,
        "homepage": None,
        "language": "Python",
        "forks_count": 0,
        "stargazers_count": 0,
        "watchers_count": 0,
        "size": 1,
        "default_branch": default_branch,
        "open_issues_count": 0,
        "open_issues": 0,
        "watchers": 0,
        "has_pages": False,
        "has_issues": True,
        "has_projects": False,
        "has_wiki": False,
        "has_discussions": False,
        "archived": False,
        "disabled": False,
        "pushed_at": iso(pushed_at),
        "created_at": iso(EPOCH_START),
        "updated_at": iso(EPOCH_START),
    }
    for key in _REPO_URL_KEYS:
        data[f"{key}_url"] = f"{urls.api}/{key.replace('_', '/')}"
    if full:
        methods = merge_methods or {}
        data.update(
            subscribers_count=0,
            network_count=0,
            allow_merge_commit=methods.get("merge", True),
            allow_squash_merge=methods.get("squash", True),
            allow_rebase_merge=methods.get("rebase", True),
        )
    return data


def label(urls: Urls, name: str, label_id: int, *, embedded: bool = False) -> Json:
    """A label; ``embedded`` in an issue or a pull request, which carries no ``archived_at``."""
    data: Json = {
        "id": label_id,
        "node_id": node_id("Label", label_id),
        "url": f"{urls.api}/labels/{name}",
        "name": name,
        "description": None,
        "color": LABEL_COLOR,
        "default": False,
        "archived_at": None,
        "archived_by": None,
    }
    if embedded:
        del data["archived_at"]
    return data


def issue(
    urls: Urls,
    rec: IssueRecord,
    labels: dict[str, int],
    pull: PullRecord | None,
    *,
    association: str,
    legacy: bool = False,
) -> Json:
    """An issue (or a pull request read as one); ``association``: its author's
    ``author_association`` with the repository (``people.py``)."""
    api = f"{urls.api}/issues/{rec.number}"
    blockers = len(rec.blocked_by) + len(rec.foreign_blockers)
    data: Json = {
        "id": rec.id,
        "node_id": node_id("Issue", rec.id),
        "url": api,
        "repository_url": urls.api,
        "labels_url": f"{api}/labels{{/name}}",
        "comments_url": f"{api}/comments",
        "events_url": f"{api}/events",
        "html_url": f"{urls.html}/{'pull' if rec.is_pull else 'issues'}/{rec.number}",
        "timeline_url": f"{api}/timeline",
        "number": rec.number,
        "state": rec.state,
        "state_reason": rec.state_reason,
        "title": rec.title,
        "body": rec.body,
        "user": user(urls, rec.user),
        "labels": [label(urls, name, labels[name], embedded=True) for name in rec.labels],
        "assignees": [],
        "milestone": None,
        "locked": False,
        "active_lock_reason": None,
        "comments": 0,
        "closed_at": iso(rec.closed_at),
        "created_at": iso(rec.created_at),
        "updated_at": iso(rec.updated_at),
        "closed_by": None,
        "author_association": association,
        "reactions": _reactions(api),
        "issue_dependencies_summary": {
            "blocked_by": blockers,
            "blocking": 0,
            "total_blocked_by": blockers,
            "total_blocking": 0,
        },
    }
    if rec.is_pull and pull is not None:
        pulls = f"{urls.api}/pulls/{rec.number}"
        data["pull_request"] = {
            "url": pulls,
            "html_url": f"{urls.html}/pull/{rec.number}",
            "diff_url": f"{urls.html}/pull/{rec.number}.diff",
            "patch_url": f"{urls.html}/pull/{rec.number}.patch",
            "merged_at": iso(pull.merged_at),
        }
        data["draft"] = pull.draft
    if legacy:
        data["assignee"] = None
    return data


def _reactions(api: str) -> Json:
    counts = ("+1", "-1", "laugh", "confused", "heart", "hooray", "eyes", "rocket")
    return {"url": f"{api}/reactions", "total_count": 0, **dict.fromkeys(counts, 0)}


def link(href: str) -> Json:
    return {"href": href}


def pull(
    urls: Urls,
    issue_rec: IssueRecord,
    rec: PullRecord,
    labels: dict[str, int],
    default_branch: str,
    *,
    association: str,
    full: bool = False,
    mergeable: bool | None = None,
    mergeable_state: str = "unknown",
    stats: tuple[int, int, int] = (0, 0, 0),
    commits: int = 1,
    legacy: bool = False,
    pushed_at: int = EPOCH_START,
) -> Json:
    api = f"{urls.api}/pulls/{rec.number}"
    issue_api = f"{urls.api}/issues/{rec.number}"
    repo = repository(urls, default_branch, pushed_at=pushed_at)
    data: Json = {
        "url": api,
        "id": rec.id,
        "node_id": node_id("PullRequest", rec.id),
        "html_url": f"{urls.html}/pull/{rec.number}",
        "diff_url": f"{urls.html}/pull/{rec.number}.diff",
        "patch_url": f"{urls.html}/pull/{rec.number}.patch",
        "issue_url": issue_api,
        "commits_url": f"{api}/commits",
        "review_comments_url": f"{api}/comments",
        "review_comment_url": f"{urls.api}/pulls/comments{{/number}}",
        "comments_url": f"{issue_api}/comments",
        "statuses_url": f"{urls.api}/statuses/{rec.head_sha}",
        "number": rec.number,
        "state": issue_rec.state,
        "locked": False,
        "title": issue_rec.title,
        "user": user(urls, issue_rec.user),
        "body": issue_rec.body,
        "labels": [label(urls, name, labels[name], embedded=True) for name in issue_rec.labels],
        "milestone": None,
        "active_lock_reason": None,
        "created_at": iso(issue_rec.created_at),
        "updated_at": iso(issue_rec.updated_at),
        "closed_at": iso(issue_rec.closed_at),
        "merged_at": iso(rec.merged_at),
        "assignees": [],
        "requested_reviewers": [],
        "requested_teams": [],
        "head": {
            "label": f"{urls.owner}:{rec.head_ref}",
            "ref": rec.head_ref,
            "sha": rec.head_sha,
            "user": user(urls, urls.owner),
            "repo": repo,
        },
        "base": {
            "label": f"{urls.owner}:{rec.base_ref}",
            "ref": rec.base_ref,
            "sha": rec.base_sha,
            "user": user(urls, urls.owner),
            "repo": repo,
        },
        "_links": {
            "self": link(api),
            "html": link(f"{urls.html}/pull/{rec.number}"),
            "issue": link(issue_api),
            "comments": link(f"{issue_api}/comments"),
            "review_comments": link(f"{api}/comments"),
            "review_comment": link(f"{urls.api}/pulls/comments{{/number}}"),
            "commits": link(f"{api}/commits"),
            "statuses": link(f"{urls.api}/statuses/{rec.head_sha}"),
        },
        "author_association": association,
        "auto_merge": None,
        "draft": rec.draft,
    }
    if legacy:
        data.update(merge_commit_sha=rec.merge_commit_sha, assignee=None)
    if full:
        additions, deletions, changed = stats
        data.update(
            merged=rec.merged,
            mergeable=mergeable,
            rebaseable=None,
            mergeable_state=mergeable_state,
            merged_by=user(urls, rec.merged_by) if rec.merged_by else None,
            comments=0,
            review_comments=0,
            maintainer_can_modify=False,
            commits=commits,
            additions=additions,
            deletions=deletions,
            changed_files=changed,
        )
    return data


def timeline_event(urls: Urls, rec: EventRecord) -> Json:
    """An entry of a timeline: a state change (``merged`` names its merge commit), a label
    added or removed (``label``: its name and color, as GitHub's ``labeled`` and ``unlabeled``
    events carry it), a new title (``rename``)."""
    data: Json = {
        "id": rec.id,
        "node_id": node_id("Event", rec.id),
        "url": f"{urls.api}/issues/events/{rec.id}",
        "actor": user(urls, rec.actor),
        "event": rec.event,
        "commit_id": rec.commit_id,
        "commit_url": f"{urls.api}/commits/{rec.commit_id}" if rec.commit_id else None,
        "created_at": iso(rec.created_at),
        "performed_via_github_app": None,
    }
    if rec.label is not None:
        data["label"] = {"name": rec.label, "color": LABEL_COLOR}
    if rec.rename is not None:
        data["rename"] = {"from": rec.rename[0], "to": rec.rename[1]}
    return data


def error(message: str, status: int) -> Json:
    return {
        "message": message,
        "documentation_url": "https://docs.github.com/rest",
        "status": str(status),
    }

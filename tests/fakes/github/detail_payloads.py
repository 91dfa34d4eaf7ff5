"""More payloads of the fake GitHub: pull request files, reviews, CI and git data."""

from __future__ import annotations

import base64

from tests.fakes.clock import iso
from tests.fakes.gitdata import CommitInfo, FileChange, TreeEntry
from tests.fakes.github.payloads import Json, Urls, link, node_id, repository, user
from tests.fakes.github.records import (
    CheckRunRecord,
    ReviewCommentRecord,
    ReviewRecord,
    StatusRecord,
)


def diff_entry(urls: Urls, change: FileChange, head: str) -> Json:
    data: Json = {
        "sha": change.sha,
        "filename": change.filename,
        "status": change.status,
        "additions": change.additions,
        "deletions": change.deletions,
        "changes": change.additions + change.deletions,
        "blob_url": f"{urls.html}/blob/{head}/{change.filename}",
        "raw_url": f"{urls.html}/raw/{head}/{change.filename}",
        "contents_url": f"{urls.api}/contents/{change.filename}?ref={head}",
    }
    if change.patch is not None:
        data["patch"] = change.patch
    if change.previous_filename is not None:
        data["previous_filename"] = change.previous_filename
    return data


def review(urls: Urls, rec: ReviewRecord, association: str) -> Json:
    """A review; ``association``: its author's ``author_association`` (``people.py``)."""
    pull_api = f"{urls.api}/pulls/{rec.pull}"
    html = f"{urls.html}/pull/{rec.pull}#pullrequestreview-{rec.id}"
    return {
        "id": rec.id,
        "node_id": node_id("PullRequestReview", rec.id),
        "user": user(urls, rec.user),
        "body": rec.body,
        "state": rec.state,
        "html_url": html,
        "pull_request_url": pull_api,
        "_links": {"html": link(html), "pull_request": link(pull_api)},
        "submitted_at": iso(rec.submitted_at),
        "commit_id": rec.commit_id,
        "author_association": association,
    }


def review_comment(urls: Urls, rec: ReviewCommentRecord, association: str) -> Json:
    """A review comment; ``association``: its author's ``author_association``."""
    api = f"{urls.api}/pulls/comments/{rec.id}"
    pull_api = f"{urls.api}/pulls/{rec.pull}"
    html = f"{urls.html}/pull/{rec.pull}#discussion_r{rec.id}"
    return {
        "url": api,
        "pull_request_review_id": rec.review_id,
        "id": rec.id,
        "node_id": node_id("PullRequestReviewComment", rec.id),
        "diff_hunk": rec.diff_hunk,
        "path": rec.path,
        "position": None,
        "original_position": None,
        "commit_id": rec.commit_id,
        "original_commit_id": rec.commit_id,
        "user": user(urls, rec.user),
        "body": rec.body,
        "created_at": iso(rec.created_at),
        "updated_at": iso(rec.created_at),
        "html_url": html,
        "pull_request_url": pull_api,
        "author_association": association,
        "_links": {"self": link(api), "html": link(html), "pull_request": link(pull_api)},
        "start_line": None,
        "original_start_line": None,
        "start_side": None,
        "line": rec.line,
        "original_line": rec.line,
        "side": rec.side,
        "subject_type": "line",
    }


def combined_status(
    urls: Urls, sha: str, statuses: list[StatusRecord], default_branch: str, pushed_at: int
) -> Json:
    states = {s.state for s in statuses}
    if not statuses:
        overall = "pending"
    elif states & {"failure", "error"}:
        overall = "failure"
    elif "pending" in states:
        overall = "pending"
    else:
        overall = "success"
    embedded = repository(urls, default_branch, pushed_at=pushed_at)
    minimal = {k: v for k, v in embedded.items() if k not in ("license",)}
    return {
        "state": overall,
        "statuses": [
            {
                "url": f"{urls.api}/statuses/{s.sha}",
                "avatar_url": None,
                "id": s.id,
                "node_id": node_id("StatusContext", s.id),
                "state": s.state,
                "description": s.description,
                "target_url": s.target_url,
                "context": s.context,
                "created_at": iso(s.created_at),
                "updated_at": iso(s.updated_at),
            }
            for s in statuses
        ],
        "sha": sha,
        "total_count": len(statuses),
        "repository": minimal,
        "commit_url": f"{urls.api}/commits/{sha}",
        "url": f"{urls.api}/commits/{sha}/status",
    }


def commit_status(urls: Urls, s: StatusRecord, creator: str = "ci-bot") -> Json:
    """One status of a commit, as the list of a commit's statuses gives it (no repository)."""
    return {
        "url": f"{urls.api}/statuses/{s.sha}",
        "avatar_url": None,
        "id": s.id,
        "node_id": node_id("StatusContext", s.id),
        "state": s.state,
        "description": s.description,
        "target_url": s.target_url,
        "context": s.context,
        "created_at": iso(s.created_at),
        "updated_at": iso(s.updated_at),
        "creator": user(urls, creator),
    }


def check_run(urls: Urls, rec: CheckRunRecord) -> Json:
    api = f"{urls.api}/check-runs/{rec.id}"
    return {
        "id": rec.id,
        "head_sha": rec.head_sha,
        "node_id": node_id("CheckRun", rec.id),
        "external_id": None,
        "url": api,
        "html_url": f"{urls.html}/runs/{rec.id}",
        "details_url": rec.details_url,
        "status": rec.status,
        "conclusion": rec.conclusion,
        "started_at": iso(rec.started_at),
        "completed_at": iso(rec.completed_at),
        "output": {
            "title": None,
            "summary": None,
            "text": None,
            "annotations_count": 0,
            "annotations_url": f"{api}/annotations",
        },
        "name": rec.name,
        "check_suite": {"id": rec.id},
        "app": None,
        "pull_requests": [],
    }


def _person(who: tuple[str, str, int]) -> Json:
    return {"name": who[0], "email": who[1], "date": iso(who[2])}


_UNSIGNED: Json = {
    "verified": False,
    "reason": "unsigned",
    "signature": None,
    "payload": None,
    "verified_at": None,
}


def git_commit(urls: Urls, info: CommitInfo) -> Json:
    return {
        "sha": info.sha,
        "node_id": node_id("Commit", info.sha),
        "url": f"{urls.api}/git/commits/{info.sha}",
        "html_url": f"{urls.html}/commit/{info.sha}",
        "author": _person(info.author),
        "committer": _person(info.committer),
        "message": info.message,
        "tree": {"sha": info.tree, "url": f"{urls.api}/git/trees/{info.tree}"},
        "parents": [
            {
                "sha": p,
                "url": f"{urls.api}/git/commits/{p}",
                "html_url": f"{urls.html}/commit/{p}",
            }
            for p in info.parents
        ],
        "verification": dict(_UNSIGNED),
    }


def commit(
    urls: Urls,
    info: CommitInfo,
    login: str | None = None,
    files: list[FileChange] | None = None,
) -> Json:
    """A commit as the REST commits endpoints give it (``Commit``: the git commit inside, the
    GitHub users its author and committer are, its parents). ``login``: the user GitHub matched
    the author to (None: an email it knows no user for). With ``files`` (against the first
    parent), the ``stats`` and ``files`` that a single commit's answer carries."""
    api = f"{urls.api}/commits/{info.sha}"
    account = user(urls, login) if login else None
    data: Json = {
        "url": api,
        "sha": info.sha,
        "node_id": node_id("Commit", info.sha),
        "html_url": f"{urls.html}/commit/{info.sha}",
        "comments_url": f"{api}/comments",
        "commit": {
            "url": f"{urls.api}/git/commits/{info.sha}",
            "author": _person(info.author),
            "committer": _person(info.committer),
            "message": info.message,
            "comment_count": 0,
            "tree": {"sha": info.tree, "url": f"{urls.api}/git/trees/{info.tree}"},
            "verification": dict(_UNSIGNED),
        },
        "author": account,
        "committer": account,
        "parents": [
            {"sha": p, "url": f"{urls.api}/commits/{p}", "html_url": f"{urls.html}/commit/{p}"}
            for p in info.parents
        ],
    }
    if files is not None:
        additions = sum(f.additions for f in files)
        deletions = sum(f.deletions for f in files)
        data["stats"] = {"additions": additions, "deletions": deletions,
                         "total": additions + deletions}  # fmt: skip
        data["files"] = [diff_entry(urls, f, info.sha) for f in files]
    return data


def comparison(
    urls: Urls,
    basehead: str,
    *,
    status: str,
    ahead_by: int,
    behind_by: int,
    base: Json,
    merge_base: Json,
    commits: list[Json],
    files: list[Json],
) -> Json:
    """A ``CommitComparison``: what ``head`` has that ``base`` lacks, and the reverse count."""
    return {
        "url": f"{urls.api}/compare/{basehead}",
        "html_url": f"{urls.html}/compare/{basehead}",
        "permalink_url": f"{urls.html}/compare/{basehead}",
        "diff_url": f"{urls.html}/compare/{basehead}.diff",
        "patch_url": f"{urls.html}/compare/{basehead}.patch",
        "base_commit": base,
        "merge_base_commit": merge_base,
        "status": status,
        "ahead_by": ahead_by,
        "behind_by": behind_by,
        "total_commits": ahead_by,
        "commits": commits,
        "files": files,
    }


def git_tree(urls: Urls, sha: str, entries: list[TreeEntry]) -> Json:
    items: list[Json] = []
    for e in entries:
        item: Json = {"path": e.path, "mode": e.mode, "type": e.type, "sha": e.sha}
        kind = "blobs" if e.type == "blob" else "trees"
        item["url"] = f"{urls.api}/git/{kind}/{e.sha}"
        if e.size is not None:
            item["size"] = e.size
        items.append(item)
    return {
        "sha": sha,
        "url": f"{urls.api}/git/trees/{sha}",
        "truncated": False,
        "tree": items,
    }


def git_ref(urls: Urls, ref: str, sha: str) -> Json:
    return {
        "ref": ref,
        "node_id": node_id("Ref", ref),
        "url": f"{urls.api}/git/{ref}",
        "object": {"type": "commit", "sha": sha, "url": f"{urls.api}/git/commits/{sha}"},
    }


def blob(urls: Urls, sha: str, content: bytes) -> Json:
    return {
        "content": base64.encodebytes(content).decode(),
        "encoding": "base64",
        "url": f"{urls.api}/git/blobs/{sha}",
        "sha": sha,
        "size": len(content),
        "node_id": node_id("Blob", sha),
    }


def short_blob(urls: Urls, sha: str) -> Json:
    return {"url": f"{urls.api}/git/blobs/{sha}", "sha": sha}

"""Webhook payloads of the fake GitHub, shaped as GitHub documents them (webhook events and
payloads: ``issues``, ``pull_request``, ``pull_request_review``, ``check_run``, ``check_suite``,
``status``, ``push``, ``ping``) and complete enough for ``githubkit.webhooks.parse`` (schemas
2026-03-10), which the fake's tests run over every body it sends.

Each builder returns the event's own fields; ``hooks.py`` adds ``repository`` and ``sender`` (the
person who made the change), as GitHub does on every repository hook's delivery.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tests.fakes.clock import iso
from tests.fakes.github import detail_payloads, payloads
from tests.fakes.github.payloads import REPOSITORY_ID, Json, node_id, user
from tests.fakes.github.records import CheckRunRecord, ReviewRecord, StatusRecord
from tests.fakes.github.routes_merge import mergeability

if TYPE_CHECKING:
    from tests.fakes.github.fake import FakeGitHub
    from tests.fakes.github.hooks import RepoHook

APP_ID = 15368  # the GitHub Actions app, which owns the fake's check suites
ZEN = "Design for failure."


def repository(gh: FakeGitHub) -> Json:
    """The repository as webhooks embed it (``RepositoryWebhooks``)."""
    data = payloads.repository(
        gh.urls, gh.default_branch, pushed_at=gh.pushed_at, merge_methods=gh.merge_methods
    )
    data.update(
        visibility="public",
        topics=[],
        is_template=False,
        allow_forking=True,
        web_commit_signoff_required=False,
    )
    return data


def issue(gh: FakeGitHub, number: int) -> Json:
    rec = gh.issues[number]
    data = payloads.issue(
        gh.urls, rec, gh.labels, gh.pulls.get(number), association=gh.association(rec.user)
    )
    data["labels"] = [payloads.label(gh.urls, n, gh.labels[n]) for n in rec.labels]
    return data


def label(gh: FakeGitHub, name: str) -> Json:
    return payloads.label(gh.urls, name, gh.label_id(name))


def issues(
    gh: FakeGitHub,
    action: str,
    number: int,
    *,
    label_name: str | None = None,
    changes: Json | None = None,
) -> Json:
    """``issues``: opened, edited (``changes``: ``{"title": {"from": ...}}``), closed, reopened,
    labeled and unlabeled (``label_name``)."""
    data: Json = {"action": action, "issue": issue(gh, number)}
    if label_name is not None:
        data["label"] = label(gh, label_name)
    if changes is not None:
        data["changes"] = changes
    return data


def pull_request_object(gh: FakeGitHub, number: int) -> Json:
    rec = gh.issues[number]
    pr = gh.pulls[number]
    mergeable, state = mergeability(gh, pr) if rec.state == "open" else (None, "unknown")
    data = payloads.pull(
        gh.urls,
        rec,
        pr,
        gh.labels,
        gh.default_branch,
        association=gh.association(rec.user),
        full=True,
        mergeable=mergeable,
        mergeable_state=state,
        pushed_at=gh.pushed_at,
    )
    data["labels"] = [payloads.label(gh.urls, n, gh.labels[n]) for n in rec.labels]
    data["merge_commit_sha"] = pr.merge_commit_sha
    data["assignee"] = None
    for side in ("head", "base"):
        data[side]["repo"] = repository(gh)
    data.update(
        allow_auto_merge=False,
        allow_update_branch=False,
        delete_branch_on_merge=False,
        merge_commit_message="PR_TITLE",
        merge_commit_title="MERGE_MESSAGE",
        squash_merge_commit_message="COMMIT_MESSAGES",
        squash_merge_commit_title="COMMIT_OR_PR_TITLE",
        use_squash_pr_title_as_default=False,
    )
    return data


def pull_request(
    gh: FakeGitHub,
    action: str,
    number: int,
    *,
    label_name: str | None = None,
    changes: Json | None = None,
    before: str | None = None,
    after: str | None = None,
) -> Json:
    """``pull_request``: opened, edited, closed (``pull_request.merged`` says whether it
    merged), reopened, labeled, unlabeled, synchronize (``before``/``after``: the head moved)."""
    data: Json = {
        "action": action,
        "number": number,
        "pull_request": pull_request_object(gh, number),
    }
    if label_name is not None:
        data["label"] = label(gh, label_name)
    if changes is not None:
        data["changes"] = changes
    if action == "synchronize":
        data.update(before=before, after=after)
    return data


def pull_request_review(gh: FakeGitHub, review: ReviewRecord) -> Json:
    """``pull_request_review`` submitted."""
    data = detail_payloads.review(gh.urls, review, gh.association(review.user))
    data["state"] = review.state.lower()  # webhooks spell it lower case, unlike REST
    data["updated_at"] = data["submitted_at"]
    return {
        "action": "submitted",
        "review": data,
        "pull_request": pull_request_object(gh, review.pull),
    }


def _pulls_with_head(gh: FakeGitHub, sha: str) -> list[Json]:
    """The open pull requests whose head is ``sha``, as a check names them."""
    found = []
    for number, pr in sorted(gh.pulls.items()):
        if pr.head_sha == sha and gh.issues[number].state == "open":
            branch_repo = {"id": REPOSITORY_ID, "url": gh.urls.api, "name": gh.repo}
            found.append(
                {
                    "id": pr.id,
                    "number": number,
                    "url": f"{gh.urls.api}/pulls/{number}",
                    "head": {"ref": pr.head_ref, "sha": pr.head_sha, "repo": branch_repo},
                    "base": {"ref": pr.base_ref, "sha": pr.base_sha, "repo": branch_repo},
                }
            )
    return found


def _branch_of(gh: FakeGitHub, sha: str) -> str | None:
    for _, pr in sorted(gh.pulls.items()):
        if pr.head_sha == sha:
            return pr.head_ref
    return gh.default_branch if gh.git.resolve(f"refs/heads/{gh.default_branch}") == sha else None


def _app(gh: FakeGitHub) -> Json:
    stamp = iso(gh.clock)
    return {
        "id": APP_ID,
        "slug": "github-actions",
        "node_id": node_id("App", APP_ID),
        "client_id": "Iv1.fake",
        "owner": user(gh.urls, "github"),
        "name": "GitHub Actions",
        "description": "Automate your workflow from idea to production",
        "external_url": "https://help.github.com/en/actions",
        "html_url": f"{gh.urls.base}/apps/github-actions",
        "created_at": stamp,
        "updated_at": stamp,
        "permissions": {"checks": "write", "metadata": "read"},
        "events": ["check_run", "check_suite"],
    }


def check_suite(gh: FakeGitHub, run: CheckRunRecord) -> Json:
    """The suite a check run belongs to: the fake gives each run its own (id = the run's)."""
    pulls = _pulls_with_head(gh, run.head_sha)
    return {
        "id": run.id,
        "node_id": node_id("CheckSuite", run.id),
        "head_branch": _branch_of(gh, run.head_sha),
        "head_sha": run.head_sha,
        "status": run.status,
        "conclusion": run.conclusion,
        "url": f"{gh.urls.api}/check-suites/{run.id}",
        "before": None,
        "after": run.head_sha,
        "pull_requests": pulls,
        "app": _app(gh),
        "created_at": iso(run.started_at),
        "updated_at": iso(run.completed_at or run.started_at),
        "latest_check_runs_count": 1,
        "check_runs_url": f"{gh.urls.api}/check-suites/{run.id}/check-runs",
        "head_commit": _head_commit(gh, run.head_sha),
        "rerequestable": True,
        "runs_rerequestable": True,
    }


def _head_commit(gh: FakeGitHub, sha: str) -> Json:
    info = gh.git.commit_info(sha)
    return {
        "id": sha,
        "tree_id": info.tree,
        "message": info.message.rstrip("\n"),
        "timestamp": iso(info.committer[2]),
        "author": {"name": info.author[0], "email": info.author[1]},
        "committer": {"name": info.committer[0], "email": info.committer[1]},
    }


def check_run(gh: FakeGitHub, action: str, run: CheckRunRecord) -> Json:
    """``check_run``: created or completed (what a repository hook gets)."""
    data = detail_payloads.check_run(gh.urls, run)
    suite = check_suite(gh, run)
    data["check_suite"] = {k: v for k, v in suite.items() if k != "head_commit"}
    data["app"] = _app(gh)
    data["pull_requests"] = suite["pull_requests"]
    data["external_id"] = ""  # a string in webhooks (GitHub Actions sends its job's id)
    return {"action": action, "check_run": data}


def check_suite_completed(gh: FakeGitHub, run: CheckRunRecord) -> Json:
    return {"action": "completed", "check_suite": check_suite(gh, run)}


def status(gh: FakeGitHub, rec: StatusRecord) -> Json:
    """``status`` (no action): a commit status was set."""
    commit = detail_payloads.commit(gh.urls, gh.git.commit_info(rec.sha))
    branches = [
        {
            "name": name,
            "commit": {"sha": rec.sha, "url": f"{gh.urls.api}/commits/{rec.sha}"},
            "protected": name in gh.protection,
        }
        for name in _branches_at(gh, rec.sha)
    ]
    return {
        "id": rec.id,
        "sha": rec.sha,
        "name": f"{gh.owner}/{gh.repo}",
        "target_url": rec.target_url,
        "avatar_url": None,
        "context": rec.context,
        "description": rec.description,
        "state": rec.state,
        "commit": commit,
        "branches": branches,
        "created_at": iso(rec.created_at),
        "updated_at": iso(rec.updated_at),
    }


def _branches_at(gh: FakeGitHub, sha: str) -> list[str]:
    """The branches whose head is ``sha`` (a status names them)."""
    out = gh.git.line("for-each-ref", f"--points-at={sha}", "--format=%(refname)", "refs/heads/")
    return [line.removeprefix("refs/heads/") for line in out.splitlines() if line]


def _commits_between(gh: FakeGitHub, before: str, after: str) -> list[str]:
    """The commits reachable from ``after`` and not from ``before``, oldest first."""
    out = gh.git.line("rev-list", "--reverse", after, f"^{before}")
    return out.split()


def push(gh: FakeGitHub, branch: str, before: str, after: str, pusher: str) -> Json:
    """``push`` (no action): ``branch`` moved from ``before`` (all zeros: created) to
    ``after``; ``commits``: the commits new to it (at most 20, as GitHub sends)."""
    zero = "0" * 40
    shas = [after] if before == zero else _commits_between(gh, before, after)
    commits = [_push_commit(gh, sha) for sha in shas[-20:]]
    forced = before != zero and not gh.git.is_ancestor(before, after)
    repo = repository(gh)
    repo.update(
        created_at=gh.pushed_at - 1,  # push payloads give the repository's times as epochs
        pushed_at=gh.pushed_at,
        stargazers=0,
        master_branch=gh.default_branch,
    )
    pushed_by = user(gh.urls, pusher)
    return {
        "ref": f"refs/heads/{branch}",
        "before": before,
        "after": after,
        "created": before == zero,
        "deleted": False,
        "forced": forced,
        "base_ref": None,
        "compare": f"{gh.urls.html}/compare/{before[:12]}...{after[:12]}",
        "commits": commits,
        "head_commit": commits[-1] if commits else None,
        "pusher": {"name": pusher, "email": f"{pusher}@users.noreply.fake"},
        "repository": repo,
        "sender": pushed_by,
    }


def _push_commit(gh: FakeGitHub, sha: str) -> Json:
    info = gh.git.commit_info(sha)
    parent = info.parents[0] if info.parents else None
    added, removed, modified = [], [], []
    for change in gh.git.changed_files(parent, sha) if parent else []:
        {"added": added, "removed": removed}.get(change.status, modified).append(change.filename)
    return {
        "id": sha,
        "tree_id": info.tree,
        "distinct": True,
        "message": info.message.rstrip("\n"),
        "timestamp": iso(info.committer[2]),
        "url": f"{gh.urls.html}/commit/{sha}",
        "author": {"name": info.author[0], "email": info.author[1]},
        "committer": {"name": info.committer[0], "email": info.committer[1]},
        "added": added,
        "removed": removed,
        "modified": modified,
    }


def ping(gh: FakeGitHub, hook: RepoHook) -> Json:
    """``ping``: sent once when a hook is created."""
    return {"zen": ZEN, "hook_id": hook.id, "hook": hook_object(gh, hook)}


def hook_object(gh: FakeGitHub, hook: RepoHook) -> Json:
    """A repository hook as the REST API and the ping give it (never its secret)."""
    api = f"{gh.urls.api}/hooks/{hook.id}"
    config: dict[str, Any] = {
        "content_type": hook.content_type,
        "url": hook.url,
        "insecure_ssl": "0",
    }
    if hook.secret:
        config["secret"] = "********"
    return {
        "type": "Repository",
        "id": hook.id,
        "name": "web",
        "active": hook.active,
        "events": list(hook.events),
        "config": config,
        "updated_at": iso(hook.created_at),
        "created_at": iso(hook.created_at),
        "url": api,
        "test_url": f"{api}/test",
        "ping_url": f"{api}/pings",
        "deliveries_url": f"{api}/deliveries",
        "last_response": {"code": None, "status": "unused", "message": None},
    }

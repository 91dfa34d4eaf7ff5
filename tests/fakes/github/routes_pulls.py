"""Pull request, review and CI endpoints of the fake GitHub."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from tests.fakes.github import detail_payloads, payloads
from tests.fakes.github.records import IssueRecord, PullRecord, ReviewCommentRecord, ReviewRecord
from tests.fakes.github.routes_merge import mergeability
from tests.fakes.github.server import Call
from tests.fakes.http import HttpError, Reply, Router

if TYPE_CHECKING:
    from tests.fakes.github.fake import FakeGitHub

N = r"(?P<number>\d+)"
HUNK = re.compile(r"^@@ -\d+(?:,\d+)? \+(\d+)(?:,\d+)? @@")
REVIEW_STATES = {
    "APPROVE": "APPROVED",
    "REQUEST_CHANGES": "CHANGES_REQUESTED",
    "COMMENT": "COMMENTED",
}


def hunks_by_line(patch: str | None) -> dict[int, str]:
    """Each new-side line a patch shows (context or added), with the hunk text up to it."""
    found: dict[int, str] = {}
    line, hunk = 0, []
    for text in (patch or "").split("\n"):
        start = HUNK.match(text)
        if start:
            line, hunk = int(start.group(1)), [text]
            continue
        hunk.append(text)
        if text.startswith((" ", "+")):
            found[line] = "\n".join(hunk)
            line += 1
    return found


def submit_review(
    gh: FakeGitHub,
    pr: PullRecord,
    login: str,
    event: str,
    *,
    body: str,
    comments: Sequence[dict[str, Any]] = (),
    commit: str | None = None,
    single_comment: bool = False,
) -> ReviewRecord:
    """``login`` reviews ``pr`` (``event``: APPROVE, REQUEST_CHANGES or COMMENT), with
    ``comments`` (``path``, ``line``, ``body``) on lines of its diff, or GitHub's 422.
    ``single_comment``: one comment made on its own, which GitHub files as a review of its own
    with an empty body."""
    issue = gh.issues[pr.number]
    # GitHub's 422s here are "Unprocessable Entity" with the reasons as plain strings.
    if event not in REVIEW_STATES:
        raise HttpError(422, "Unprocessable Entity", [f"Unknown event {event}"])
    if event != "COMMENT" and issue.user == login and not gh.allow_self_review:
        verb = "approve" if event == "APPROVE" else "request changes on"
        raise HttpError(422, "Unprocessable Entity", [f"Can not {verb} your own pull request"])
    if event != "APPROVE" and not body and not single_comment:
        raise HttpError(422, "Unprocessable Entity", ["Body is required"])
    by_path = {f.filename: hunks_by_line(f.patch) for f in gh.pull_files(pr)}
    for comment in comments:
        lines = by_path.get(str(comment.get("path")), {})
        if comment.get("line") not in lines or comment.get("side", "RIGHT") != "RIGHT":
            raise HttpError(
                422,
                "Unprocessable Entity",
                ["Pull request review thread line must be part of the diff"],
            )
    commit = commit or pr.head_sha
    stamp = gh.tick()
    review = ReviewRecord(gh.next_id(), pr.number, login, body, REVIEW_STATES[event], commit, stamp)
    gh.reviews.append(review)
    gh.hooks.review(review)
    for comment in comments:
        line = int(comment["line"])
        gh.review_comments.append(
            ReviewCommentRecord(
                gh.next_id(), review.id, pr.number, login, str(comment["path"]), line,
                "RIGHT", str(comment.get("body", "")), commit,
                by_path[str(comment["path"])][line], stamp,
            )
        )  # fmt: skip
    issue.updated_at = stamp
    return review


def register(router: Router, prefix: str, gh: FakeGitHub) -> None:
    def render(pr: PullRecord, call: Call, full: bool = False) -> dict[str, Any]:
        issue = gh.issues[pr.number]
        common: dict[str, Any] = {
            "legacy": call.legacy,
            "pushed_at": gh.pushed_at,
            "association": gh.association(issue.user),
        }
        if not full:
            return payloads.pull(gh.urls, issue, pr, gh.labels, gh.default_branch, **common)
        files = gh.pull_files(pr)
        mergeable, state = mergeability(gh, pr)
        stats = (
            sum(f.additions for f in files),
            sum(f.deletions for f in files),
            len(files),
        )
        return payloads.pull(
            gh.urls, issue, pr, gh.labels, gh.default_branch,
            full=True, mergeable=mergeable, mergeable_state=state, stats=stats, **common,
        )  # fmt: skip

    def may(call: Call, permission: str, level: str = "write") -> None:
        """Refuse what the token may not do, with GitHub's 403."""
        access = call.access
        if access is None:
            return
        granted = access.level(permission)
        if permission == "contents" and level == "write":
            allowed = access.can_push
        elif permission == "checks" and access.kind == "fine-grained":
            allowed = False  # GitHub offers fine-grained tokens no Checks permission
        else:
            allowed = granted == "write" or (level == "read" and granted == "read")
        if not allowed:
            raise HttpError(403, access.refusal)

    def list_pulls(call: Call) -> Reply:
        q = call.query
        state = q.get("state", "open")
        found = [
            p for p in gh.pulls.values() if state == "all" or gh.issues[p.number].state == state
        ]
        if "head" in q:
            owner, _, branch = q["head"].partition(":")
            found = [p for p in found if owner == gh.owner and p.head_ref == branch]
        if "base" in q:
            found = [p for p in found if p.base_ref == q["base"]]
        sort = q.get("sort", "created")
        default_direction = "desc" if sort == "created" else "asc"
        if sort == "updated":
            found.sort(key=lambda p: (gh.issues[p.number].updated_at, p.number))
        else:
            found.sort(key=lambda p: p.number)
        if q.get("direction", default_direction) == "desc":
            found.reverse()
        return Reply(body=[render(p, call) for p in found], paginate="")

    def create_pull(call: Call) -> Reply:
        may(call, "pull_requests")
        body = call.body or {}
        head_ref, base_ref = str(body.get("head", "")), str(body.get("base", ""))
        head_ref = head_ref.split(":", 1)[-1]
        head = gh.git.resolve(f"refs/heads/{head_ref}")
        base = gh.git.resolve(f"refs/heads/{base_ref}")
        if head is None or base is None or not body.get("title"):
            field = "title" if head is not None and base is not None else "head"
            raise HttpError(
                422,
                "Validation Failed",
                [{"resource": "PullRequest", "field": field, "code": "invalid"}],
            )
        for other in gh.pulls.values():
            if other.head_ref == head_ref and gh.issues[other.number].state == "open":
                reason = f"A pull request already exists for {gh.owner}:{head_ref}."
                raise HttpError(422, "Validation Failed", [custom(reason)])
        if gh.git.is_ancestor(head, base):
            raise HttpError(
                422, "Validation Failed", [custom(f"No commits between {base_ref} and {head_ref}")]
            )
        number, stamp = gh.next_number(), gh.tick()
        gh.issues[number] = IssueRecord(
            number, str(body["title"]), body.get("body"), call.login, stamp, stamp, is_pull=True
        )
        pr = PullRecord(number, head_ref, head, base_ref, base, draft=bool(body.get("draft")))
        gh.pulls[number] = pr
        gh.hooks.pull_request("opened", number, call.login)
        return Reply(201, render(pr, call, full=True))

    def get_pull(call: Call) -> Reply:
        return Reply(body=render(gh.pull(int(call.params["number"])), call, full=True))

    def update_pull(call: Call) -> Reply:
        pr = gh.pull(int(call.params["number"]))
        issue = gh.issues[pr.number]
        body = call.body or {}
        if "title" in body:
            gh.retitle(issue, str(body["title"]), call.login)
        if "body" in body:
            issue.body = body["body"]
        if "base" in body:
            pr.base_ref = str(body["base"])
        stamp = gh.tick()
        if body.get("state") in ("open", "closed") and not pr.merged:
            if body["state"] != issue.state:
                action = "closed" if body["state"] == "closed" else "reopened"
                gh.hooks.pull_request(action, pr.number, call.login)
            issue.state = body["state"]
            issue.closed_at = stamp if issue.state == "closed" else None
        issue.updated_at = stamp
        return Reply(body=render(pr, call, full=True))

    def list_files(call: Call) -> Reply:
        pr = gh.pull(int(call.params["number"]))
        entries = [detail_payloads.diff_entry(gh.urls, f, pr.head_sha) for f in gh.pull_files(pr)]
        return Reply(body=entries, paginate="")

    def list_reviews(call: Call) -> Reply:
        number = int(call.params["number"])
        gh.pull(number)
        found = [
            detail_payloads.review(gh.urls, r, gh.association(r.user))
            for r in gh.reviews
            if r.pull == number
        ]
        return Reply(body=found, paginate="")

    def create_review(call: Call) -> Reply:
        may(call, "pull_requests")
        pr = gh.pull(int(call.params["number"]))
        body = call.body or {}
        review = submit_review(
            gh,
            pr,
            call.login,
            str(body.get("event", "COMMENT")),
            body=str(body.get("body") or ""),
            comments=body.get("comments") or [],
            commit=body.get("commit_id"),
        )
        return Reply(body=detail_payloads.review(gh.urls, review, gh.association(call.login)))

    def list_comments(call: Call) -> Reply:
        number = int(call.params["number"])
        gh.pull(number)
        found = [
            detail_payloads.review_comment(gh.urls, c, gh.association(c.user))
            for c in gh.review_comments
            if c.pull == number
        ]
        return Reply(body=found, paginate="")

    def resolve_ref(ref: str) -> str:
        if re.fullmatch(r"[0-9a-f]{40}", ref):
            return ref
        sha = gh.git.resolve(f"refs/heads/{ref}") or gh.git.resolve(ref)
        if sha is None:
            raise HttpError(422, f"No commit found for SHA: {ref}")
        return sha

    def combined_status(call: Call) -> Reply:
        may(call, "statuses", "read")
        sha = resolve_ref(call.params["ref"])
        latest: dict[str, Any] = {}
        for status in gh.statuses:
            if status.sha == sha:
                latest[status.context] = status
        body = detail_payloads.combined_status(
            gh.urls, sha, list(latest.values()), gh.default_branch, gh.pushed_at
        )
        return Reply(body=body, paginate="statuses")

    def list_statuses(call: Call) -> Reply:
        may(call, "statuses", "read")
        sha = resolve_ref(call.params["ref"])
        found = sorted((s for s in gh.statuses if s.sha == sha), key=lambda s: -s.id)
        body = [detail_payloads.commit_status(gh.urls, s) for s in found]
        return Reply(body=body, paginate="")

    def check_runs(call: Call) -> Reply:
        may(call, "checks", "read")
        sha = resolve_ref(call.params["ref"])
        runs = [r for r in gh.check_runs if r.head_sha == sha]
        if call.query.get("filter", "latest") == "latest":
            newest = {r.name: r for r in runs}
            runs = list(newest.values())
        runs.sort(key=lambda r: r.id, reverse=True)
        body = {
            "total_count": len(runs),
            "check_runs": [detail_payloads.check_run(gh.urls, r) for r in runs],
        }
        return Reply(body=body, paginate="check_runs")

    add = router.add
    add("GET", f"{prefix}/pulls", list_pulls, "pulls/list")
    add("POST", f"{prefix}/pulls", create_pull, "pulls/create")
    add("GET", f"{prefix}/pulls/{N}", get_pull, "pulls/get")
    add("PATCH", f"{prefix}/pulls/{N}", update_pull, "pulls/update")
    add("GET", f"{prefix}/pulls/{N}/files", list_files, "pulls/list-files")
    add("GET", f"{prefix}/pulls/{N}/reviews", list_reviews, "pulls/list-reviews")
    add("POST", f"{prefix}/pulls/{N}/reviews", create_review, "pulls/create-review")
    add("GET", f"{prefix}/pulls/{N}/comments", list_comments, "pulls/list-review-comments")
    add("GET", f"{prefix}/commits/(?P<ref>[^/]+)/status", combined_status,
        "repos/get-combined-status-for-ref")  # fmt: skip
    add("GET", f"{prefix}/commits/(?P<ref>[^/]+)/statuses", list_statuses,
        "repos/list-commit-statuses-for-ref")  # fmt: skip
    add("GET", f"{prefix}/commits/(?P<ref>[^/]+)/check-runs", check_runs,
        "checks/list-for-ref")  # fmt: skip


def custom(message: str) -> dict[str, str]:
    """A ``Validation Failed`` reason GitHub gives in words (``code: custom``)."""
    return {"resource": "PullRequest", "code": "custom", "message": message}

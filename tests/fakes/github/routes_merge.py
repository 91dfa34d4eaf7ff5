"""The merge endpoint of the fake GitHub, with what refuses a merge on GitHub: conflicts, a
moved head, a merge method the repository does not allow, and branch protection (required
checks, required approving reviews), each with GitHub's own 405 or 409 message."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tests.fakes.github.records import PullRecord
from tests.fakes.github.server import Call, HttpError, Reply, Router

if TYPE_CHECKING:
    from tests.fakes.github.fake import FakeGitHub

N = r"(?P<number>\d+)"
NOT_MERGEABLE = "Pull Request is not mergeable"
HEAD_MODIFIED = "Head branch was modified. Review and try the merge again."
BASE_MODIFIED = "Base branch was modified. Review and try the merge again."
METHOD_NOT_ALLOWED = {
    "merge": "Merge commits are not allowed on this repository.",
    "squash": "Squash merges are not allowed on this repository.",
    "rebase": "Rebase merges are not allowed on this repository.",
}
GREEN = frozenset({"success", "neutral", "skipped"})


def protection_refusal(gh: FakeGitHub, pr: PullRecord) -> str | None:
    """What branch protection on the pull request's base still wants, in GitHub's words."""
    rule = gh.protection.get(pr.base_ref)
    if rule is None:
        return None
    states: dict[str, str] = {}
    for run in gh.check_runs:  # the newest run of a name decides
        if run.head_sha == pr.head_sha:
            done = run.status == "completed" and run.conclusion in GREEN
            states[run.name] = "success" if done else "pending"
    for status in gh.statuses:
        if status.sha == pr.head_sha:
            states[status.context] = status.state
    failing = [c for c in rule.checks if states.get(c) in ("failure", "error")]
    expected = [c for c in rule.checks if states.get(c) != "success" and c not in failing]
    if len(failing) + len(expected) == 1:
        name, verb = (failing or expected)[0], "failing" if failing else "expected"
        return f'Required status check "{name}" is {verb}.'
    if failing or expected:
        missing = len(failing) + len(expected)
        return f"{missing} of {len(rule.checks)} required status checks are expected."
    latest: dict[str, str] = {}
    author = gh.issues[pr.number].user
    for review in gh.reviews:
        if review.pull == pr.number and review.user != author and review.state != "COMMENTED":
            latest[review.user] = review.state
    approvals = sum(1 for state in latest.values() if state == "APPROVED")
    if approvals < rule.reviews:
        plural = "review is" if rule.reviews == 1 else "reviews are"
        return (
            f"At least {rule.reviews} approving {plural} required by reviewers with write access."
        )
    return None


def register(router: Router, prefix: str, gh: FakeGitHub) -> None:
    def merge_pull(call: Call) -> Reply:
        if call.access is not None and not call.access.can_push:
            raise HttpError(403, call.access.refusal)
        pr = gh.pull(int(call.params["number"]))
        issue = gh.issues[pr.number]
        body = call.body or {}
        if pr.merged or issue.state != "open":
            raise HttpError(405, NOT_MERGEABLE)
        if body.get("sha") and body["sha"] != pr.head_sha:
            raise HttpError(409, HEAD_MODIFIED)
        method = str(body.get("merge_method") or "merge")
        if method not in METHOD_NOT_ALLOWED:
            raise HttpError(
                422,
                "Validation Failed",
                [{"resource": "PullRequest", "field": "merge_method", "code": "invalid"}],
            )
        if not gh.merge_methods.get(method, False):
            raise HttpError(405, METHOD_NOT_ALLOWED[method])
        refusal = protection_refusal(gh, pr)
        if refusal is not None:
            raise HttpError(405, refusal)
        base_ref = f"refs/heads/{pr.base_ref}"
        base_head = gh.git.resolve(base_ref)
        assert base_head is not None
        tree, _conflicts = gh.git.merge_tree(base_head, pr.head_sha)
        if tree is None:
            raise HttpError(405, NOT_MERGEABLE)
        if method == "rebase":
            # Replaying each commit is more than the fake does; cpe never asks for it unless
            # the repository allows nothing else, and no test sets that up.
            raise HttpError(500, "fake GitHub: rebase merges are not implemented")
        if method == "squash":
            title = body.get("commit_title") or f"{issue.title} (#{pr.number})"
            parents = [base_head]
        else:
            title = body.get("commit_title") or (
                f"Merge pull request #{pr.number} from {gh.owner}/{pr.head_ref}"
            )
            parents = [base_head, pr.head_sha]
        message = f"{title}\n\n{body.get('commit_message') or issue.title}\n"
        sha = gh.git.commit(tree, parents, message)
        pr.merge_base = gh.git.merge_base(base_head, pr.head_sha)
        gh.git.set_ref(base_ref, sha, base_head)
        stamp = gh.tick()
        pr.merged, pr.merged_at, pr.merge_commit_sha, pr.merged_by = True, stamp, sha, call.login
        issue.state, issue.closed_at, issue.updated_at = "closed", stamp, stamp
        gh.event(pr.number, "merged", call.login, sha)
        gh.event(pr.number, "closed", call.login)
        gh.ref_moved(pr.base_ref, sha)
        gh.close_linked_issues(issue.body)
        return Reply(
            body={"sha": sha, "merged": True, "message": "Pull Request successfully merged"}
        )

    router.add("PUT", f"{prefix}/pulls/{N}/merge", merge_pull, "pulls/merge")

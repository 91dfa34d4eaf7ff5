"""Merging on the fake GitHub: a pull request's merge, with what refuses one on GitHub
(conflicts, a moved head, a merge method the repository does not allow, branch protection:
required checks, required approving reviews by people with write access, a head not up to
date), each with GitHub's own 405 or 409 message; a pull request's ``mergeable`` and
``mergeable_state``, computed lazily as GitHub computes them; "Merge a branch"
(``POST /merges``); and the comparison of two commits."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from tests.fakes.github import detail_payloads
from tests.fakes.github.records import PUSHING_ROLES, PullRecord
from tests.fakes.github.server import Call
from tests.fakes.http import HttpError, Reply, Router

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
BEHIND = "Head branch is not up to date with the base branch."
MERGE_CONFLICT = "Merge conflict"
GREEN = frozenset({"success", "neutral", "skipped"})
SHA = re.compile(r"[0-9a-f]{7,40}")


def base_branch_head(gh: FakeGitHub, pr: PullRecord) -> str:
    return gh.git.resolve(f"refs/heads/{pr.base_ref}") or pr.base_sha


def protection_refusal(gh: FakeGitHub, pr: PullRecord) -> str | None:
    """What branch protection on the pull request's base still wants, in GitHub's words."""
    rule = gh.protection.get(pr.base_ref)
    if rule is None:
        return None
    if rule.up_to_date and not gh.git.is_ancestor(base_branch_head(gh, pr), pr.head_sha):
        return BEHIND
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
    for review in gh.reviews:  # the newest review of each person decides
        if review.pull == pr.number and review.user != author and review.state != "COMMENTED":
            latest[review.user] = review.state
    # Only reviewers with write access count, as GitHub's message says: anyone may approve a
    # pull request of a public repository.
    latest = {who: state for who, state in latest.items() if gh.people.role(who) in PUSHING_ROLES}
    approvals = sum(1 for state in latest.values() if state == "APPROVED")
    if approvals < rule.reviews:
        plural = "review is" if rule.reviews == 1 else "reviews are"
        return (
            f"At least {rule.reviews} approving {plural} required by reviewers with write access."
        )
    return None


def passing(gh: FakeGitHub, sha: str) -> bool:
    """Every check of ``sha`` green: the newest run of each name completed green and the newest
    status of each context ``success``. A pending one is not passing yet."""
    runs = {run.name: run for run in gh.check_runs if run.head_sha == sha}
    statuses = {status.context: status for status in gh.statuses if status.sha == sha}
    return all(r.status == "completed" and r.conclusion in GREEN for r in runs.values()) and all(
        s.state == "success" for s in statuses.values()
    )


def mergeability(gh: FakeGitHub, pr: PullRecord) -> tuple[bool | None, str]:
    """``mergeable`` and ``mergeable_state`` as a read of the pull request gets them.

    GitHub computes mergeability in a background job that a read starts: the first read after
    the head or the base branch moved answers ``null`` (state ``unknown``), a later one the
    result. Then, as GitHub documents the states: ``dirty`` when the merge commit cannot be
    cleanly created; ``behind`` when the head is out of date (GitHub reports it only where
    branch protection requires branches to be up to date, which is what refuses the merge
    then); ``blocked`` when branch protection refuses the merge; ``unstable`` when it is
    mergeable with a non-passing (failed or pending) check that is not required; ``clean``
    otherwise. A closed or merged pull request has no mergeability (``null``, ``unknown``)."""
    if pr.merged or gh.issues[pr.number].state != "open":
        return None, "unknown"
    base = base_branch_head(gh, pr)
    if pr.mergeable_for != (base, pr.head_sha):
        pr.mergeable_for = (base, pr.head_sha)
        return None, "unknown"
    if gh.git.merge_tree(base, pr.head_sha)[0] is None:
        return False, "dirty"
    refusal = protection_refusal(gh, pr)
    if refusal == BEHIND:
        return True, "behind"
    if refusal is not None:
        return True, "blocked"
    return True, "clean" if passing(gh, pr.head_sha) else "unstable"


def commitish(gh: FakeGitHub, name: str) -> str | None:
    """The commit a branch name (``owner:branch`` too), a tag or a sha names, as GitHub takes
    them in ``head`` and in a comparison."""
    owner, colon, rest = name.partition(":")
    if colon:
        if owner != gh.owner:
            return None
        name = rest
    for ref in (f"refs/heads/{name}", f"refs/tags/{name}"):
        found = gh.git.resolve(ref)
        if found is not None:
            return found
    return gh.git.resolve(name) if SHA.fullmatch(name) else None


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
        gh.ref_moved(pr.base_ref, sha, base_head, call.login)
        gh.close_linked_issues(issue.body)
        return Reply(
            body={"sha": sha, "merged": True, "message": "Pull Request successfully merged"}
        )

    def merge_branch(call: Call) -> Reply:
        """GitHub's "Merge a branch": ``head`` (a branch or a sha) merged into the branch
        ``base`` with a merge commit the caller authors — 201 and the commit; 204 and no body
        when ``base`` already contains ``head``; 409 on a conflict (nothing written). The branch
        moves as a push moves it: a pull request from it gets the new head."""
        if call.access is not None and not call.access.can_push:
            raise HttpError(403, call.access.refusal)
        body = call.body or {}
        missing = [f for f in ("base", "head") if not isinstance(body.get(f), str) or not body[f]]
        if missing:
            raise HttpError(
                422,
                "Validation Failed",
                [{"resource": "Merge", "field": f, "code": "missing_field"} for f in missing],
            )
        base_name, head_name = str(body["base"]), str(body["head"])
        base_ref = f"refs/heads/{base_name}"
        base = gh.git.resolve(base_ref)
        if base is None:
            raise HttpError(404, "Base does not exist")
        head = commitish(gh, head_name)
        if head is None:
            raise HttpError(404, "Head does not exist")
        if gh.git.is_ancestor(head, base):
            return Reply(204)
        tree, _conflicts = gh.git.merge_tree(base, head)
        if tree is None:
            raise HttpError(409, MERGE_CONFLICT)
        message = str(body.get("commit_message") or f"Merge {head_name} into {base_name}")
        author = {"name": call.login, "email": f"{call.login}@users.noreply.github.invalid"}
        sha = gh.git.commit(tree, [base, head], message, author)
        gh.git.set_ref(base_ref, sha, base)
        gh.ref_moved(base_name, sha, base, call.login)
        files = gh.git.changed_files(base, sha)
        payload = detail_payloads.commit(gh.urls, gh.git.commit_info(sha), call.login, files)
        return Reply(201, payload)

    def compare(call: Call) -> Reply:
        """``base...head``: what ``head`` has that ``base`` lacks, its files from their merge
        base (``base..head``: from ``base`` itself), how far each is ahead of the other."""
        basehead = call.params["basehead"]
        three = "..." in basehead
        base_name, _, head_name = basehead.partition("..." if three else "..")
        base, head = commitish(gh, base_name), commitish(gh, head_name)
        if base is None or head is None:
            raise HttpError(404, "Not Found")
        merge_base = gh.git.merge_base(base, head)
        if merge_base is None:
            raise HttpError(404, f"No common ancestor between {base_name} and {head_name}.")
        ahead = int(gh.git.line("rev-list", "--count", f"{base}..{head}"))
        behind = int(gh.git.line("rev-list", "--count", f"{head}..{base}"))
        status = {(0, 0): "identical", (1, 0): "ahead", (0, 1): "behind"}.get(
            (min(ahead, 1), min(behind, 1)), "diverged"
        )
        listed = gh.git.line("rev-list", "--reverse", f"{base}..{head}").split()
        commits: list[Any] = [
            detail_payloads.commit(gh.urls, gh.git.commit_info(sha)) for sha in listed
        ]
        files = gh.git.changed_files(merge_base if three else base, head)
        body = detail_payloads.comparison(
            gh.urls, basehead, status=status, ahead_by=ahead, behind_by=behind,
            base=detail_payloads.commit(gh.urls, gh.git.commit_info(base)),
            merge_base=detail_payloads.commit(gh.urls, gh.git.commit_info(merge_base)),
            commits=commits,
            files=[detail_payloads.diff_entry(gh.urls, f, head) for f in files[:300]],
        )  # fmt: skip
        if "per_page" in call.query or "page" in call.query:
            if int(call.query.get("page") or 1) > 1:
                del body["files"]  # GitHub lists the files on the first page only
            return Reply(body=body, paginate="commits")
        # Without paging GitHub gives the newest 250 commits, and no Link to more.
        return Reply(body={**body, "commits": commits[-250:]})

    router.add("PUT", f"{prefix}/pulls/{N}/merge", merge_pull, "pulls/merge")
    router.add("POST", f"{prefix}/merges", merge_branch, "repos/merge")
    router.add("GET", f"{prefix}/compare/(?P<basehead>.+)", compare, "repos/compare-commits")

"""Merging a merge request (``PUT /merge_requests/:iid/merge`` with ``sha``), and what GitLab's
refusals mean.

The ``sha`` guards the head: GitLab answers 409 ("SHA does not match HEAD of source branch")
when the branch moved since cpe read it. Its other refusals (405 "Method Not Allowed", 406
"Branch cannot be merged" in older releases, 422) say little by themselves; the merge request's
``detailed_merge_status``, read right after (again for a few seconds while GitLab is still
checking whether it can merge: ``settled``), says why:

- **waiting** — the merge request waits for something not there yet: its pipeline
  (``ci_must_pass``, ``ci_still_running``), approvals (``not_approved``, ``approvals_syncing``,
  ``requested_changes``), resolved threads, a person taking it out of draft, external status
  checks, a merge time, a policy; or GitLab is still working out whether it can merge
  (``checking``, ``unchecked``, ``preparing``). Retrying at once cannot help; the revision
  waits (``MergeWaitError``) and the engine tries again on the next poll;
- **conflict** (``conflict``, ``broken_status``) — the branches conflict: a ``ConflictError``
  naming the files (the merge queue finds them exactly, ``landing``);
- **behind** (``need_rebase``) — the project merges fast-forward (or with semi-linear history)
  and the branch does not contain the default branch's head; the merge queue rebases it and
  tests again (``BaseMovedError``), a plain merge reports a conflict;
- **mergeable** after all — a race with GitLab's own check: transient, tried again;
- anything else (closed, no source branch or commits) cannot succeed as asked.

What landed is the merge request's ``merge_commit_sha`` (a merge commit), else its
``squash_commit_sha`` (squashed, fast-forward), else its head (fast-forward): the default branch
then points at it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Literal

from adapters.providers.gitlab.api import GitLabApi, Json
from adapters.providers.gitlab.errors import gitlab_reason
from domain.errors import ConflictError, MergeWaitError, ProviderError

log = logging.getLogger(__name__)

Refusal = Literal["waiting", "conflict", "behind", "transient", "closed"]

WAITING = frozenset(
    {
        "approvals_syncing",
        "checking",
        "ci_must_pass",
        "ci_still_running",
        "discussions_not_resolved",
        "draft_status",
        "external_status_checks",
        "jira_association_missing",
        "locked_lfs_files",
        "locked_paths",
        "merge_request_blocked",
        "merge_time",
        "not_approved",
        "preparing",
        "requested_changes",
        "security_policy_pipeline_check",
        "security_policy_violations",
        "status_checks_must_pass",
        "title_regex",
        "unchecked",
    }
)
_CONFLICT = frozenset({"conflict", "broken_status"})
# GitLab has not worked out yet whether the merge request can merge: read it again shortly.
CHECKING = frozenset({"approvals_syncing", "checking", "preparing", "unchecked"})
SETTLE_WAIT = 15.0  # seconds a refused merge request is read again while GitLab checks it
# What GitLab says a merge request waits for, in words for `cpe status`.
_WORDS = {
    "ci_must_pass": "its pipeline must succeed",
    "ci_still_running": "its pipeline is still running",
    "not_approved": "it is not approved",
    "requested_changes": "a reviewer requested changes",
    "discussions_not_resolved": "its threads must be resolved",
    "draft_status": "it is a draft",
    "checking": "GitLab is checking whether it can merge",
    "unchecked": "GitLab has not checked whether it can merge",
    "preparing": "GitLab is preparing it",
}


def refusal_kind(detailed_status: str | None, state: str | None) -> Refusal:
    """What a refused merge means, from the merge request as GitLab has it after the refusal."""
    if state not in ("opened", "locked"):
        return "closed"
    if detailed_status in WAITING:
        return "waiting"
    if detailed_status in _CONFLICT:
        return "conflict"
    if detailed_status == "need_rebase":
        return "behind"
    if detailed_status == "mergeable":
        return "transient"
    return "closed" if detailed_status in ("not_open", "commits_status") else "conflict"


def landed(mr: Json) -> str | None:
    """The commit a merged merge request put on its target."""
    if mr.get("state") != "merged":
        return None
    found = mr.get("merge_commit_sha") or mr.get("squash_commit_sha") or mr.get("sha")
    return str(found) if found else None


def settled(
    read: Callable[[], Json],
    *,
    sleep: Callable[[float], None],
    clock: Callable[[], float],
    limit: float = SETTLE_WAIT,
) -> Json:
    """The merge request (``read()``) once GitLab has checked whether it can merge, or as it
    is after ``limit`` seconds: a refusal read while GitLab was still checking would be sorted
    as a wait when it is a conflict, or the other way round."""
    deadline = clock() + limit
    wait = 0.2
    while True:
        mr = read()
        if str(mr.get("detailed_merge_status")) not in CHECKING or clock() >= deadline:
            return mr
        sleep(wait)
        wait = min(wait * 2, 2.0)


class Merger:
    def __init__(self, api: GitLabApi, default_branch: str) -> None:
        self._api = api
        self._default = default_branch

    def merge(self, iid: int, head_sha: str) -> str:
        """What landed; raises GitLab's refusal as it came (``refused`` sorts it)."""
        mr = self._api.put(f"merge !{iid}", f"/merge_requests/{iid}/merge", {"sha": head_sha})
        found = landed(mr) if isinstance(mr, dict) else None
        if found is not None:
            return found
        # Accepted, not merged (yet): GitLab merges in the background, or the merge failed.
        error = str(mr.get("merge_error") or "") if isinstance(mr, dict) else ""
        raise ProviderError(
            f"merge !{iid}: GitLab accepted the merge but has not merged it"
            + (f": {error}" if error else " yet"),
            status=422 if error else None,
            transient=not error,
        )


def refused(
    exc: ProviderError, mr: Json, default_branch: str, files: str | None = None
) -> ProviderError:
    """A failed merge as the error the engine acts on, ``mr`` read after it: waiting,
    transient, or a conflict (naming ``files`` when given, the files the revision changes)."""
    iid = mr.get("iid")
    reason = gitlab_reason(exc)
    status = str(mr.get("detailed_merge_status") or mr.get("merge_status") or "")
    kind = refusal_kind(status, str(mr.get("state") or ""))
    if exc.status in {401, 403}:
        return ProviderError(
            f"revision !{iid}: GitLab does not let cpe merge it: {reason}",
            status=exc.status,
            transient=False,
        )
    if exc.transient:
        return exc
    if exc.status == 409:
        # The head guard: a push to the branch since cpe read it. Read it again.
        return ProviderError(
            f"revision !{iid}: its branch moved since it was read ({reason})",
            status=409,
            transient=True,
        )
    said = _WORDS.get(status, status or reason)
    if kind == "waiting":
        return MergeWaitError(
            f"revision !{iid} waits to be merged into {default_branch}: {said}",
            reason=f"{said} ({status})" if status and said != status else said,
        )
    if kind == "transient":
        return ProviderError(f"revision !{iid}: {reason}", status=exc.status, transient=True)
    if kind == "closed":
        return ConflictError(
            f"revision !{iid} cannot be merged into {default_branch}: {said}",
            status=exc.status,
        )
    where = f"; it changes {files}" if files else ""
    why = "it is behind and the project merges fast-forward" if kind == "behind" else said
    return ConflictError(
        f"revision !{iid} cannot be merged into {default_branch}: {why} ({reason}){where}",
        status=exc.status,
    )

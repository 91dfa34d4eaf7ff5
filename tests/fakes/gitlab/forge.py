"""The fake GitLab's forge side: merge requests, their mergeability, merges and rebases, approvals,
pipelines and commit statuses, all on the project's bare repository.

As on GitLab:

- A merge request follows its source branch: a push makes a new diff version (``diff_refs``:
  ``base_sha`` the merge base, ``start_sha`` the target's head, ``head_sha`` the source's) and
  a system note ``added 1 commit``.
- Mergeability is checked in the background: the first read of a merge request after either
  branch moved says ``checking`` (and starts the check); the next says what it found
  (``detailed_merge_status``: ``mergeable``, ``conflict``, ``need_rebase``, ``ci_must_pass``,
  ``ci_still_running``, ``draft_status``, ``not_open``, ``discussions_not_resolved``,
  ``not_approved``, ``commits_status``). A merge checks afresh.
- The project's ``merge_method``: ``merge`` (a merge commit), ``rebase_merge`` (a merge
  commit, only onto a source that contains the target's head: ``need_rebase`` otherwise) or
  ``ff`` (the target fast-forwards to the source: no merge commit). ``squash`` squashes the
  source's commits into one first (``squash_commit_sha``).
- A commit status reported for a sha (``POST /statuses/:sha``) lands in that sha's external
  pipeline for its ref, made on first use; a pipeline's status is the composite of its jobs'.
- Merging into the default branch closes the issues its description closes (``Closes #N``).
"""

from __future__ import annotations

from typing import Any

from tests.fakes.gitlab import forge_payloads as fp
from tests.fakes.gitlab.project import Project
from tests.fakes.gitlab.records import (
    DEVELOPER,
    MAINTAINER,
    ApprovalRecord,
    JobRecord,
    MergeRequestRecord,
    PipelineRecord,
)
from tests.fakes.gitlab.server import not_found
from tests.fakes.http import HttpError

FINISHED = frozenset({"success", "failed", "canceled", "skipped"})
# What a commit status's state does to its job, as GitLab names the transition.
TRANSITIONS = {
    "pending": "enqueue",
    "running": "run",
    "success": "success",
    "failed": "drop",
    "canceled": "cancel",
    "skipped": "skip",
}
REBASE_FAILED = "Rebase failed: Rebase locally, resolve all conflicts, then push the branch."


class Forge(Project):
    """The merge requests, pipelines and approvals of the project (see the module)."""

    def __init__(self, root: Any, path: str, default_branch: str, tier: Any) -> None:
        super().__init__(root, path, default_branch, tier)
        self.merge_requests: dict[int, MergeRequestRecord] = {}
        self.approvals: list[ApprovalRecord] = []
        self.pipelines: list[PipelineRecord] = []
        self.settings: dict[str, Any] = {
            "merge_method": "merge",
            "squash_option": "default_off",
            "only_allow_merge_if_pipeline_succeeds": False,
            "only_allow_merge_if_all_discussions_are_resolved": False,
            "allow_merge_on_skipped_pipeline": False,
            "remove_source_branch_after_merge": True,
            "approvals_before_merge": 0,  # Premium: approvals a merge needs
            "merge_requests_author_approval": False,
        }

    def project_settings(self) -> dict[str, Any]:
        shown = dict(self.settings)
        if not self.premium:
            shown.pop("approvals_before_merge")
        shown.pop("merge_requests_author_approval")
        return shown

    # ------------------------------------------------------------------ merge requests

    def mr(self, iid: int) -> MergeRequestRecord:
        found = self.merge_requests.get(iid)
        if found is None:
            raise not_found()
        return found

    def head_of(self, branch: str) -> str | None:
        return self.git.resolve(f"refs/heads/{branch}")

    def open_merge_request(
        self,
        author: str,
        source: str,
        target: str,
        title: str,
        description: str | None = None,
        *,
        labels: list[str] | None = None,
        squash: bool = False,
        remove_source_branch: bool | None = None,
    ) -> MergeRequestRecord:
        """``author`` opens a merge request from ``source`` into ``target``; GitLab's refusals
        (the same branch, a branch that does not exist, an open one for the branch already)
        are ``HttpError``."""
        problems: list[str] = []
        if source == target:
            problems.append("You can't use same project/branch for source and target")
        head, start = self.head_of(source), self.head_of(target)
        if head is None:
            problems.append(f'Source branch "{source}" does not exist')
        if start is None:
            problems.append(f'Target branch "{target}" does not exist')
        for other in self.merge_requests.values():
            if other.state == "opened" and (other.source_branch, other.target_branch) == (
                source,
                target,
            ):
                message = (
                    "Another open merge request already exists for this source branch: "
                    f"!{other.iid}"
                )
                raise HttpError(409, message, body={"message": [message]})
        if problems:
            raise HttpError(422, problems[0], body={"message": problems})
        assert head is not None
        assert start is not None
        iid = max(self.merge_requests, default=0) + 1
        stamp = self.tick()
        base = self.git.merge_base(start, head) or start
        mr = MergeRequestRecord(
            iid,
            title,
            description,
            self.people.seen(author),
            source,
            target,
            head,
            base,
            start,
            stamp,
            stamp,
            squash=squash,
            remove_source_branch=remove_source_branch,
            diff_versions=[(base, start, head)],
        )
        self.merge_requests[iid] = mr
        if labels:
            self.relabel(mr, labels, author, moved=False, noteable="MergeRequest")
        self.hooks.merge_request(mr, "open", mr.author)
        return mr

    def branch_moved(self, branch: str) -> None:
        """A push to ``branch``: the open merge requests from it take the new head (a new diff
        version, a system note); those into it need their mergeability checked again."""
        super().branch_moved(branch)
        head = self.head_of(branch)
        for mr in self.merge_requests.values():
            if mr.state != "opened" or mr.source_branch != branch or head in (None, mr.head_sha):
                continue
            assert head is not None
            added = self.git.line("rev-list", "--count", f"{mr.head_sha}..{head}")
            self.hooks.merge_request(mr, "update", mr.author, oldrev=mr.head_sha)
            self.follow(mr, head)
            count = int(added or 0)
            noun = "commit" if count == 1 else "commits"
            self.add_note("MergeRequest", mr.iid, mr.author, f"added {count} {noun}", system=True)

    def follow(self, mr: MergeRequestRecord, head: str) -> None:
        """``mr``'s source branch is at ``head`` now: a new diff version against the target."""
        start = self.head_of(mr.target_branch) or mr.start_sha
        mr.head_sha, mr.start_sha = head, start
        mr.base_sha = self.git.merge_base(start, head) or start
        mr.diff_versions.append((mr.base_sha, mr.start_sha, mr.head_sha))
        mr.updated_at = self.tick()
        mr.auto_merge_by = None  # a push cancels merge when the pipeline succeeds

    # ------------------------------------------------------------------ mergeability

    def detailed_status(self, mr: MergeRequestRecord, *, recheck: bool = False) -> str:
        """``detailed_merge_status`` as a read shows it: ``checking`` once after a branch moved
        (``recheck``: the read that starts the check), then the result."""
        if mr.state != "opened":
            return "not_open"
        pair = (self.head_of(mr.target_branch) or "", self.head_of(mr.source_branch) or "")
        if mr.checked_for != pair:
            if recheck:
                mr.checked_for = pair
            return "checking"
        return self.mergeability(mr)

    def mergeability(self, mr: MergeRequestRecord) -> str:
        """What GitLab finds checking ``mr`` now (the first check that fails, in GitLab's
        order)."""
        if mr.state != "opened":
            return "not_open"
        head, target = self.head_of(mr.source_branch), self.head_of(mr.target_branch)
        if head is None or target is None or self.git.is_ancestor(head, target):
            return "commits_status"  # no source branch, or nothing on it the target lacks
        if mr.draft:
            return "draft_status"
        if self.has_conflicts(mr):
            return "conflict"
        if self.settings["merge_method"] != "merge" and not self.git.is_ancestor(target, head):
            return "need_rebase"
        pipeline = self.head_pipeline(mr)
        if self.settings["only_allow_merge_if_pipeline_succeeds"]:
            status = pipeline.status if pipeline else None
            if status in ("running", "pending", "created"):
                return "ci_still_running"
            skipped_ok = status == "skipped" and self.settings["allow_merge_on_skipped_pipeline"]
            if status != "success" and not skipped_ok:
                return "ci_must_pass"
        if self.settings["only_allow_merge_if_all_discussions_are_resolved"] and any(
            n.resolvable and not n.resolved
            for n in self.notes
            if n.noteable == "MergeRequest" and n.iid == mr.iid
        ):
            return "discussions_not_resolved"
        if self.premium and self.approvals_left(mr) > 0:
            return "not_approved"
        return "mergeable"

    def has_conflicts(self, mr: MergeRequestRecord) -> bool:
        head, target = self.head_of(mr.source_branch), self.head_of(mr.target_branch)
        if head is None or target is None:
            return False
        merged, _ = self.git.merge_tree(target, head)
        return merged is None

    def approvals_left(self, mr: MergeRequestRecord) -> int:
        required = int(self.settings["approvals_before_merge"]) if self.premium else 0
        return max(required - len(self.approvers(mr)), 0)

    def approvers(self, mr: MergeRequestRecord) -> list[ApprovalRecord]:
        return [a for a in self.approvals if a.iid == mr.iid]

    def may_approve(self, mr: MergeRequestRecord, user: str | None) -> bool:
        """A Developer who has not approved yet and (by the project's default) is not the
        author."""
        if user is None or self.people.level(user) < DEVELOPER or mr.state != "opened":
            return False
        if user == mr.author and not self.settings["merge_requests_author_approval"]:
            return False
        return all(a.user != user for a in self.approvers(mr))

    def approve_as(self, mr: MergeRequestRecord, user: str) -> None:
        self.approvals.append(ApprovalRecord(mr.iid, user, mr.head_sha, self.tick()))
        self.hooks.merge_request(mr, "approved", user)
        self.add_note("MergeRequest", mr.iid, user, "approved this merge request", system=True)
        mr.updated_at = self.clock

    # ------------------------------------------------------------------ merging

    def merge(
        self,
        mr: MergeRequestRecord,
        user: str,
        *,
        squash: bool | None = None,
        message: str | None = None,
        squash_message: str | None = None,
        remove_source_branch: bool | None = None,
    ) -> None:
        """Merges ``mr`` as ``user`` by the project's merge method (the caller checked that it
        may); a merge git cannot make is ``422 Branch cannot be merged``."""
        head, target = self.head_of(mr.source_branch), self.head_of(mr.target_branch)
        assert head is not None
        assert target is not None
        squashing = mr.squash if squash is None else squash
        tip = head
        if squashing:
            tree = self.git.line("rev-parse", f"{head}^{{tree}}")
            base = self.git.merge_base(target, head) or target
            text = squash_message or mr.title
            tip = self.git.commit(tree, [base], text + "\n", self._author(user))
            mr.squash_commit_sha = tip
        method = self.settings["merge_method"]
        if method == "ff":
            if not self.git.is_ancestor(target, tip):
                raise HttpError(422, "Branch cannot be merged")
            new_target, mr.merge_commit_sha = tip, None
        else:
            tree, conflicts = self.git.merge_tree(target, tip)
            if tree is None or conflicts:
                raise HttpError(422, "Branch cannot be merged")
            text = message or (
                f"Merge branch '{mr.source_branch}' into '{mr.target_branch}'\n\n{mr.title}\n\n"
                f"See merge request {self.project_path}!{mr.iid}"
            )
            new_target = self.git.commit(tree, [target, tip], text + "\n", self._author(user))
            mr.merge_commit_sha = new_target
        self.git.set_ref(f"refs/heads/{mr.target_branch}", new_target, target)
        stamp = self.tick()
        mr.state, mr.merged_at, mr.merged_by, mr.updated_at = "merged", stamp, user, stamp
        mr.auto_merge_by = None
        self.hooks.merge_request(mr, "merge", user)
        self.add_note("MergeRequest", mr.iid, user, "merged", system=True)
        remove = mr.remove_source_branch if remove_source_branch is None else remove_source_branch
        if remove is None:
            remove = bool(self.settings["remove_source_branch_after_merge"])
        if remove:
            self.git.git("update-ref", "-d", f"refs/heads/{mr.source_branch}")
        self.branch_moved(mr.target_branch)
        if mr.target_branch == self.default_branch:
            self.close_issues(mr.description, f"!{mr.iid}", user)

    def _author(self, user: str) -> dict[str, str]:
        return {"name": user, "email": f"{user}@example.invalid"}

    def may_merge(self, user: str | None) -> bool:
        """Pushing to the protected default branch (merging into it) takes Maintainer."""
        return self.people.level(user) >= MAINTAINER

    def may_push(self, user: str | None) -> bool:
        return self.people.level(user) >= DEVELOPER

    def run_rebase(self, mr: MergeRequestRecord) -> None:
        """The rebase asked for runs: the source branch's commits replayed on the target's head
        (``merge_error`` when they conflict, the branch left as it was)."""
        mr.rebasing = False
        target, head = self.head_of(mr.target_branch), self.head_of(mr.source_branch)
        if target is None or head is None:
            mr.merge_error = REBASE_FAILED
            return
        rebased = self.git.rebased(mr.source_branch, target)
        if rebased is None:
            mr.merge_error = REBASE_FAILED
            return
        mr.merge_error = None
        if rebased != head:
            self.git.set_ref(f"refs/heads/{mr.source_branch}", rebased, head)
            self.branch_moved(mr.source_branch)

    # ------------------------------------------------------------------ pipelines

    def head_pipeline(self, mr: MergeRequestRecord) -> PipelineRecord | None:
        found = [
            p
            for p in self.pipelines
            if p.sha == mr.head_sha
            and p.ref in (mr.source_branch, f"refs/merge-requests/{mr.iid}/head")
        ]
        return found[-1] if found else None

    def status_job(
        self,
        sha: str,
        name: str,
        state: str,
        user: str,
        *,
        ref: str | None = None,
        target_url: str | None = None,
        description: str | None = None,
    ) -> JobRecord:
        """A commit status for ``sha``, as ``POST /statuses/:sha`` makes it: the job ``name`` of
        the sha's external pipeline for ``ref`` (made on first use) moves to ``state``; a
        finished job is kept as retried and a new one takes its place; a job already in
        ``state`` cannot go there again (GitLab's 400)."""
        ref = ref or self._ref_of(sha)
        pipeline = next(
            (
                p
                for p in reversed(self.pipelines)
                if p.sha == sha and p.ref == ref and p.source == "external"
            ),
            None,
        )
        stamp = self.tick()
        if pipeline is None:
            pipeline = PipelineRecord(
                self.next_id(), len(self.pipelines) + 1, sha, ref, "external", user, stamp, stamp
            )
            self.pipelines.append(pipeline)
        job = next(
            (
                j
                for j in pipeline.jobs
                if j.name == name and not j.retried and j.status not in FINISHED
            ),
            None,
        )
        if job is not None and job.status == state:
            event = TRANSITIONS[state]
            raise HttpError(
                400,
                f"Cannot transition status via :{event} from :{state} "
                f'(Reason(s): Status cannot transition via "{event}")',
            )
        if job is None:
            for old in pipeline.jobs:
                if old.name == name:
                    old.retried = True
            job = JobRecord(
                self.next_id(),
                pipeline.id,
                name,
                "created",
                "external",
                target_url,
                description,
                user,
                stamp,
            )
            pipeline.jobs.append(job)
        job.status = state
        job.target_url = target_url or job.target_url
        job.description = description if description is not None else job.description
        if state == "running" or (state in FINISHED and job.started_at is None):
            job.started_at = stamp
        if state in FINISHED:
            job.finished_at = stamp
        pipeline.updated_at = stamp
        self.pipeline_changed(pipeline)
        return job

    def _ref_of(self, sha: str) -> str:
        """The branch a status is for when none is named: an open merge request's source
        branch whose head it is, else the default branch."""
        for mr in self.merge_requests.values():
            if mr.state == "opened" and self.head_of(mr.source_branch) == sha:
                return mr.source_branch
        return self.default_branch

    def pipeline_changed(self, pipeline: PipelineRecord) -> None:
        """Merge when the pipeline succeeds: an auto-merge waiting on this pipeline merges when
        it turns green (and is dropped if it fails). Hooks hear of it (``Pipeline Hook``)."""
        self.hooks.pipeline(pipeline)
        for mr in self.merge_requests.values():
            if mr.auto_merge_by is None or mr.state != "opened":
                continue
            if self.head_pipeline(mr) is not pipeline:
                continue
            if pipeline.status == "success" and self.mergeability(mr) == "mergeable":
                self.merge(mr, mr.auto_merge_by)
            elif pipeline.status in ("failed", "canceled"):
                mr.auto_merge_by = None

    # ------------------------------------------------------------------ payloads

    def mr_payload(
        self,
        mr: MergeRequestRecord,
        viewer: str | None,
        *,
        single: bool = True,
        recheck: bool = False,
    ) -> dict[str, Any]:
        """A merge request as GitLab shows it (``single``: the full entity a GET, a create or
        an update answers; else the list's); ``recheck``: this read starts a mergeability
        check if one is due."""
        detailed = self.detailed_status(mr, recheck=recheck)
        notes = sum(
            1
            for n in self.notes
            if n.noteable == "MergeRequest" and n.iid == mr.iid and not n.system
        )
        conflicts = detailed == "conflict" or (
            detailed != "checking" and mr.state == "opened" and self.has_conflicts(mr)
        )
        basic = fp.merge_request_basic(
            self.site,
            mr,
            author=self.user(mr.author),
            merged_by=self.user(mr.merged_by)
            if mr.merged_by
            else (self.user(mr.auto_merge_by) if mr.auto_merge_by else None),
            closed_by=self.user(mr.closed_by) if mr.closed_by else None,
            notes=notes,
            detailed=detailed,
            conflicts=conflicts,
            premium=self.premium,
        )
        if not single:
            return basic
        pipe = self.head_pipeline(mr)
        head = fp.pipeline(self.site, pipe, self.user(pipe.user)) if pipe else None
        base, _, tip = mr.diff_versions[-1]
        changes = len(self.git.changed_files(base, tip))
        opened_before = any(
            m.author == mr.author and m.iid < mr.iid for m in self.merge_requests.values()
        )
        return fp.merge_request(
            basic,
            mr,
            head_pipeline=head,
            changes=changes,
            can_merge=self.may_merge(viewer)
            if mr.target_branch == self.default_branch
            else self.may_push(viewer),
            first_contribution=not opened_before and self.people.level(mr.author) == 0,
        )

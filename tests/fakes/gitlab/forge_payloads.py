"""JSON payloads of the fake GitLab's forge side: commits, branches, diffs, tree entries, merge
requests, approvals, discussions, pipelines, jobs and commit statuses, with the fields GitLab's
REST API sends for each (``entities.py`` keeps the lists they are checked against)."""

from __future__ import annotations

from typing import Any

from tests.fakes.clock import iso_ms as iso
from tests.fakes.gitdata import CommitInfo, FileChange
from tests.fakes.gitlab.payloads import PROJECT_ID, Json, Site
from tests.fakes.gitlab.records import JobRecord, MergeRequestRecord, PipelineRecord


def commit(site: Site, info: CommitInfo) -> Json:
    """``Commit``: as lists and branches show a commit."""
    title, _, _ = info.message.partition("\n")
    author, committer = info.author, info.committer
    return {
        "id": info.sha,
        "short_id": info.sha[:8],
        "created_at": iso(committer[2]),
        "parent_ids": list(info.parents),
        "title": title,
        "message": info.message,
        "author_name": author[0],
        "author_email": author[1],
        "authored_date": iso(author[2]),
        "committer_name": committer[0],
        "committer_email": committer[1],
        "committed_date": iso(committer[2]),
        "trailers": {},
        "extended_trailers": {},
        "web_url": f"{site.web}/-/commit/{info.sha}",
    }


def commit_detail(
    site: Site, info: CommitInfo, stats: tuple[int, int], pipeline: Json | None, status: str | None
) -> Json:
    """``CommitDetail``: a single commit (``GET /repository/commits/:sha``, a new commit)."""
    additions, deletions = stats
    return {
        **commit(site, info),
        "stats": {"additions": additions, "deletions": deletions, "total": additions + deletions},
        "status": status,
        "project_id": PROJECT_ID,
        "last_pipeline": pipeline,
    }


def branch(site: Site, name: str, info: CommitInfo, *, default: bool, merged: bool) -> Json:
    return {
        "name": name,
        "commit": commit(site, info),
        "merged": merged,
        "protected": default,
        "developers_can_push": not default,
        "developers_can_merge": not default,
        "can_push": True,
        "default": default,
        "web_url": f"{site.web}/-/tree/{name}",
    }


def diff(change: FileChange) -> Json:
    """``Diff``: one file of a diff, its ``diff`` the hunks from the first ``@@``."""
    added, removed = change.status == "added", change.status == "removed"
    old_path = change.previous_filename or change.filename
    return {
        "diff": (change.patch + "\n") if change.patch else "",
        "new_path": change.filename,
        "old_path": old_path,
        "a_mode": "0" if added else change.old_mode,
        "b_mode": "0" if removed else change.new_mode,
        "new_file": added,
        "renamed_file": change.status == "renamed",
        "deleted_file": removed,
        "generated_file": False,
    }


def tree_entry(sha: str, name: str, kind: str, path: str, mode: str) -> Json:
    return {"id": sha, "name": name, "type": kind, "path": path, "mode": mode}


def pipeline_basic(site: Site, rec: PipelineRecord) -> Json:
    return {
        "id": rec.id,
        "iid": rec.iid,
        "project_id": PROJECT_ID,
        "sha": rec.sha,
        "ref": rec.ref,
        "status": rec.status,
        "source": rec.source,
        "created_at": iso(rec.created_at),
        "updated_at": iso(rec.updated_at),
        "web_url": f"{site.web}/-/pipelines/{rec.id}",
        "name": None,
    }


def pipeline(site: Site, rec: PipelineRecord, user: Json) -> Json:
    started = [j.started_at for j in rec.jobs if j.started_at is not None]
    finished = [j.finished_at for j in rec.jobs if j.finished_at is not None]
    done = rec.status in ("success", "failed", "canceled", "skipped")
    status = rec.status
    return {
        **pipeline_basic(site, rec),
        "before_sha": "0" * 40,
        "tag": False,
        "yaml_errors": None,
        "user": user,
        "started_at": iso(min(started)) if started else None,
        "finished_at": iso(max(finished)) if done and finished else None,
        "committed_at": None,
        "duration": (max(finished) - min(started)) if done and started and finished else None,
        "queued_duration": None,
        "coverage": None,
        "detailed_status": {
            "icon": f"status_{status}",
            "text": status,
            "label": status,
            "group": status,
            "tooltip": status,
            "has_details": True,
            "details_path": f"/{site.path}/-/pipelines/{rec.id}",
            "illustration": None,
            "favicon": f"/assets/ci_favicons/favicon_status_{status}.png",
        },
        "archived": False,
    }


def commit_status(site: Site, job: JobRecord, sha: str, ref: str, author: Json) -> Json:
    """``CommitStatus``: an external job, as ``POST /statuses/:sha`` and ``GET .../statuses``
    show it."""
    return {
        "id": job.id,
        "sha": sha,
        "ref": ref,
        "status": job.status,
        "name": job.name,
        "target_url": job.target_url,
        "description": job.description,
        "created_at": iso(job.created_at),
        "started_at": iso(job.started_at),
        "finished_at": iso(job.finished_at),
        "allow_failure": job.allow_failure,
        "coverage": None,
        "pipeline_id": job.pipeline,
        "author": author,
    }


def job(site: Site, rec: JobRecord, pipe: PipelineRecord, user: Json) -> Json:
    """``Job``: a CI job of a pipeline (``GET /pipelines/:id/jobs``)."""
    return {
        "id": rec.id,
        "status": rec.status,
        "stage": "test",
        "name": rec.name,
        "ref": pipe.ref,
        "tag": False,
        "coverage": None,
        "allow_failure": rec.allow_failure,
        "created_at": iso(rec.created_at),
        "started_at": iso(rec.started_at),
        "finished_at": iso(rec.finished_at),
        "erased_at": None,
        "duration": None,
        "queued_duration": None,
        "user": user,
        "commit": {"id": pipe.sha, "short_id": pipe.sha[:8]},
        "pipeline": pipeline_basic(site, pipe),
        "web_url": f"{site.web}/-/jobs/{rec.id}",
        "project": {"ci_job_token_scope_enabled": False},
        "artifacts": [],
        "runner": None,
        "runner_manager": None,
        "artifacts_expire_at": None,
        "archived": False,
        "tag_list": [],
        "failure_reason": "script_failure" if rec.status == "failed" else None,
    }


def merge_request_basic(
    site: Site,
    mr: MergeRequestRecord,
    *,
    author: Json,
    merged_by: Json | None,
    closed_by: Json | None,
    notes: int,
    detailed: str,
    conflicts: bool,
    premium: bool,
) -> Json:
    """``MergeRequestBasic``: a merge request as lists show it."""
    merge_status = {
        "mergeable": "can_be_merged",
        "checking": "checking",
        "conflict": "cannot_be_merged",
        "not_open": "can_be_merged" if mr.state == "merged" else "cannot_be_merged",
    }.get(detailed, "can_be_merged")
    payload: Json = {
        **_head(mr),
        "imported": False,
        "imported_from": "none",
        "created_at": iso(mr.created_at),
        "updated_at": iso(mr.updated_at),
        "merged_by": merged_by,
        "merge_user": merged_by or (author if mr.auto_merge_by else None),
        "merged_at": iso(mr.merged_at),
        "merge_after": None,
        "prepared_at": iso(mr.created_at),
        "closed_by": closed_by,
        "closed_at": iso(mr.closed_at),
        "target_branch": mr.target_branch,
        "source_branch": mr.source_branch,
        "user_notes_count": notes,
        "upvotes": 0,
        "downvotes": 0,
        "author": author,
        "assignees": [],
        "assignee": None,
        "reviewers": [],
        "source_project_id": PROJECT_ID,
        "target_project_id": PROJECT_ID,
        "labels": sorted(mr.labels),
        "draft": mr.draft,
        "work_in_progress": mr.draft,
        "milestone": None,
        "merge_when_pipeline_succeeds": mr.auto_merge_by is not None,
        "merge_status": merge_status,
        "detailed_merge_status": detailed,
        "sha": mr.head_sha,
        "merge_commit_sha": mr.merge_commit_sha,
        "squash_commit_sha": mr.squash_commit_sha,
        "discussion_locked": None,
        "should_remove_source_branch": mr.remove_source_branch,
        "force_remove_source_branch": mr.remove_source_branch,
        "reference": f"!{mr.iid}",
        "references": {
            "short": f"!{mr.iid}",
            "relative": f"!{mr.iid}",
            "full": f"{site.path}!{mr.iid}",
        },
        "web_url": f"{site.web}/-/merge_requests/{mr.iid}",
        "time_stats": {
            "time_estimate": 0,
            "total_time_spent": 0,
            "human_time_estimate": None,
            "human_total_time_spent": None,
        },
        "squash": mr.squash,
        "squash_on_merge": mr.squash,
        "task_completion_status": {"count": 0, "completed_count": 0},
        "has_conflicts": conflicts,
        "blocking_discussions_resolved": detailed != "discussions_not_resolved",
    }
    if premium:
        payload["approvals_before_merge"] = None
    return payload


def merge_request(
    basic: Json,
    mr: MergeRequestRecord,
    *,
    head_pipeline: Json | None,
    changes: int,
    can_merge: bool,
    first_contribution: bool,
) -> Json:
    """``MergeRequest``: a single merge request (``GET``, create, update, merge)."""
    base, start, head = mr.diff_versions[-1]
    pipeline_brief = None
    if head_pipeline is not None:
        pipeline_brief = {
            key: head_pipeline[key]
            for key in (
                "id",
                "iid",
                "project_id",
                "sha",
                "ref",
                "status",
                "source",
                "created_at",
                "updated_at",
                "web_url",
            )
        }
    return {
        **basic,
        "subscribed": False,
        "changes_count": str(changes),
        "latest_build_started_at": head_pipeline["started_at"] if head_pipeline else None,
        "latest_build_finished_at": head_pipeline["finished_at"] if head_pipeline else None,
        "first_deployed_to_production_at": None,
        "pipeline": pipeline_brief,
        "head_pipeline": head_pipeline,
        "diff_refs": {"base_sha": base, "head_sha": head, "start_sha": start},
        "merge_error": mr.merge_error,
        "first_contribution": first_contribution,
        "user": {"can_merge": can_merge},
    }


def approvals(mr: MergeRequestRecord, approved_by: list[Json], extra: dict[str, Any]) -> Json:
    """``GET /merge_requests/:iid/approvals`` (and the answer to an approval)."""
    return {
        **_head(mr),
        "created_at": iso(mr.created_at),
        "updated_at": iso(mr.updated_at),
        "merge_status": "can_be_merged",
        "approved": bool(approved_by),
        "approved_by": approved_by,
        **extra,
    }


def _head(mr: MergeRequestRecord) -> Json:
    """The fields every merge request payload starts with."""
    return {
        "id": mr.id,
        "iid": mr.iid,
        "project_id": PROJECT_ID,
        "title": mr.title,
        "description": mr.description,
        "state": mr.state,
    }

"""Approving, merging and rebasing merge requests on the fake GitLab.

Approvals (``merge_request_approvals.md``): ``POST /approve`` takes the Developer role (``403``
below it); a ``sha`` that is not the head is ``409 SHA does not match HEAD of source branch:
<head>``; approving twice, or one's own merge request (the project's default forbids it), is
``401``. ``GET /approvals`` answers who approved; on Premium also ``approvals_required`` and
``approvals_left`` (the project's ``approvals_before_merge``), and approval rules exist there
only (``GET /approval_rules`` is a 404 on Free).

Merging (``PUT /merge``, the status table of ``merge_requests.md``): ``401 Unauthorized`` for
someone who may not merge into the target; ``405 Method Not Allowed`` when the merge request
cannot merge (not open, a draft, a conflict, a rebase needed, a pipeline that must succeed and
has not, unresolved threads, missing approvals); ``409 SHA does not match HEAD of source
branch: <head>`` for a ``sha`` that is not its head; ``422 Branch cannot be merged`` when the
merge itself fails. With ``merge_when_pipeline_succeeds`` and a pipeline still running, the
merge waits for it (auto-merge) and happens when it succeeds.

Rebasing (``PUT /rebase``): ``202 {"rebase_in_progress": true}``; it runs after the next read of
the merge request (which shows ``rebase_in_progress: true`` when asked with
``include_rebase_in_progress``), and a conflict leaves ``merge_error``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tests.fakes.clock import iso_ms as iso
from tests.fakes.gitlab import forge_payloads as fp
from tests.fakes.gitlab.records import DEVELOPER, MergeRequestRecord
from tests.fakes.gitlab.server import Call, forbidden, not_found, unauthorized
from tests.fakes.http import HttpError, Reply

if TYPE_CHECKING:
    from tests.fakes.gitlab.fake import FakeGitLab

MR = r"/merge_requests/(?P<iid>\d+)"
NOT_ALLOWED = "405 Method Not Allowed"
# What keeps a merge request from merging now but lets it merge when its pipeline succeeds.
WAITING_ON_CI = frozenset({"ci_still_running", "ci_must_pass"})


def sha_mismatch(mr: MergeRequestRecord) -> HttpError:
    return HttpError(409, f"SHA does not match HEAD of source branch: {mr.head_sha}")


def register(gl: FakeGitLab) -> None:
    def approvals_payload(mr: MergeRequestRecord, viewer: str | None) -> dict[str, Any]:
        approved = [
            {"user": gl.user(a.user), "approved_at": iso(a.approved_at)} for a in gl.approvers(mr)
        ]
        # Every tier says whether the viewer approved and may approve (GitLab CE's
        # MergeRequestApprovals entity exposes both); Premium adds the rules.
        extra: dict[str, Any] = {
            "user_has_approved": any(a.user == viewer for a in gl.approvers(mr)),
            "user_can_approve": gl.may_approve(mr, viewer),
        }
        if gl.premium:
            required = int(gl.settings["approvals_before_merge"])
            extra |= {
                "approvals_required": required,
                "approvals_left": gl.approvals_left(mr),
                "approval_rules_left": [],
                "has_approval_rules": required > 0,
                "suggested_approvers": [],
                "approvers": [],
                "approver_groups": [],
                "merge_request_approvers_available": True,
                "multiple_approval_rules_available": True,
                "require_password_to_approve": False,
                "invalid_approvers_rules": [],
            }
        return fp.approvals(mr, approved, extra)

    def approve(call: Call) -> Reply:
        mr = gl.mr(int(call.params["iid"]))
        if gl.people.level(call.user) < DEVELOPER:
            raise forbidden()
        sha = call.text("sha")
        if sha and sha != mr.head_sha:
            raise sha_mismatch(mr)
        if not gl.may_approve(mr, call.user):
            raise unauthorized()
        gl.approve_as(mr, str(call.user))
        return Reply(201, approvals_payload(mr, call.user))

    def unapprove(call: Call) -> Reply:
        mr = gl.mr(int(call.params["iid"]))
        mine = [a for a in gl.approvers(mr) if a.user == call.user]
        if not mine:
            raise not_found()
        for approval in mine:
            gl.approvals.remove(approval)
        return Reply(201, approvals_payload(mr, call.user))

    def get_approvals(call: Call) -> Reply:
        mr = gl.mr(int(call.params["iid"]))
        return Reply(body=approvals_payload(mr, call.user))

    def approval_rules(call: Call) -> Reply:
        mr = gl.mr(int(call.params["iid"]))
        if not gl.premium:
            raise not_found()
        required = int(gl.settings["approvals_before_merge"])
        rules = (
            []
            if required == 0
            else [
                {
                    "id": 1,
                    "name": "All Members",
                    "rule_type": "any_approver",
                    "eligible_approvers": [],
                    "approvals_required": required,
                    "users": [],
                    "groups": [],
                    "contains_hidden_groups": False,
                    "approved_by": [gl.user(a.user) for a in gl.approvers(mr)],
                    "source_rule": None,
                    "approved": gl.approvals_left(mr) == 0,
                    "overridden": False,
                    "section": None,
                }
            ]
        )
        return Reply(body=rules)

    def merge(call: Call) -> Reply:
        mr = gl.mr(int(call.params["iid"]))
        can = (
            gl.may_merge(call.user)
            if mr.target_branch == gl.default_branch
            else gl.may_push(call.user)
        )
        if not can:
            raise unauthorized()
        status = gl.mergeability(mr)
        # The merge checked afresh: reads show what it found until a branch moves.
        mr.checked_for = (gl.head_of(mr.target_branch) or "", gl.head_of(mr.source_branch) or "")
        auto = bool(call.flag("merge_when_pipeline_succeeds"))
        pipeline = gl.head_pipeline(mr)
        running = pipeline is not None and pipeline.status in ("running", "pending", "created")
        waits = auto and running and (status == "mergeable" or status in WAITING_ON_CI)
        if status != "mergeable" and not waits:
            raise HttpError(405, NOT_ALLOWED)
        sha = call.text("sha")
        if sha and sha != mr.head_sha:
            raise sha_mismatch(mr)
        if call.flag("squash") is not None:
            mr.squash = bool(call.flag("squash"))
        if waits:
            mr.auto_merge_by, mr.auto_merge_sha = str(call.user), mr.head_sha
            mr.updated_at = gl.tick()
            gl.add_note(
                "MergeRequest",
                mr.iid,
                str(call.user),
                f"enabled an automatic merge when the pipeline for {mr.head_sha[:8]} succeeds",
                system=True,
            )
        else:
            gl.merge(
                mr,
                str(call.user),
                message=call.text("merge_commit_message"),
                squash_message=call.text("squash_commit_message"),
                remove_source_branch=call.flag("should_remove_source_branch"),
            )
        return Reply(body=gl.mr_payload(mr, call.user))

    def cancel_auto_merge(call: Call) -> Reply:
        mr = gl.mr(int(call.params["iid"]))
        if mr.state == "closed":
            raise HttpError(406, "Can't cancel the automatic merge")
        mr.auto_merge_by = None
        return Reply(201, gl.mr_payload(mr, call.user))

    def rebase(call: Call) -> Reply:
        mr = gl.mr(int(call.params["iid"]))
        if gl.head_of(mr.source_branch) is None:
            raise HttpError(403, "Source branch does not exist")
        if not gl.may_push(call.user) and call.user != mr.author:
            raise HttpError(403, "Cannot push to source branch")
        mr.rebasing, mr.merge_error = True, None
        return Reply(202, {"rebase_in_progress": True})

    route = gl.route
    route("POST", f"{MR}/approve", approve, "merge-request-approvals/approve")
    route("POST", f"{MR}/unapprove", unapprove, "merge-request-approvals/unapprove")
    route("GET", f"{MR}/approvals", get_approvals, "merge-request-approvals/get")
    route("GET", f"{MR}/approval_rules", approval_rules, "merge-request-approvals/rules")
    route("PUT", f"{MR}/merge", merge, "merge-requests/merge")
    route(
        "POST",
        f"{MR}/cancel_merge_when_pipeline_succeeds",
        cancel_auto_merge,
        "merge-requests/cancel-auto-merge",
    )
    route("PUT", f"{MR}/rebase", rebase, "merge-requests/rebase")

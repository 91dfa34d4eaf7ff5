"""Approving and merging on the fake GitLab, and the CI that gates it: approvals and their
refusals, the merge endpoint's status table (401, 405, 409, 422), the merge methods, merge when
the pipeline succeeds, commit statuses and pipelines, and the helpers that play CI and people."""

from __future__ import annotations

import httpx
import pytest

from tests.fakes.gitlab import FakeGitLab
from tests.support.gitlab import gitlab_project as project
from tests.support.gitlab import project_api as http


def merge(gl: FakeGitLab, iid: int, token: str = "test-token", **body: object) -> httpx.Response:
    with http(gl, token) as client:
        return client.put(f"/merge_requests/{iid}/merge", json=body)


# ---------------------------------------------------------------------- approvals


def test_approvals_and_gitlabs_refusals_of_them(fake_gitlab: FakeGitLab) -> None:
    iid = fake_gitlab.open_mr("a", {"a.txt": "a"}, "A")  # by someone
    head = fake_gitlab.head_of("a")
    with http(fake_gitlab, "developer-token") as client:
        stale = client.post(f"/merge_requests/{iid}/approve", json={"sha": "4" * 40})
        approved = client.post(f"/merge_requests/{iid}/approve", json={"sha": head})
        twice = client.post(f"/merge_requests/{iid}/approve")
    with http(fake_gitlab, "reporter-token") as client:
        reporter = client.post(f"/merge_requests/{iid}/approve")
    assert (stale.status_code, stale.json()) == (
        409,
        {"message": f"SHA does not match HEAD of source branch: {head}"},
    )
    assert approved.status_code == 201
    assert [a["user"]["username"] for a in approved.json()["approved_by"]] == ["dev"]
    assert (twice.status_code, twice.json()) == (401, {"message": "401 Unauthorized"})
    assert (reporter.status_code, reporter.json()) == (403, {"message": "403 Forbidden"})
    with pytest.raises(ValueError, match="cannot approve"):
        fake_gitlab.approve(iid, by="someone")  # its author
    fake_gitlab.approve(iid, by="cpe-bot")
    seen = project(fake_gitlab).mergerequests.get(iid).approvals.get()
    assert seen.approved is True
    assert [a["user"]["username"] for a in seen.approved_by] == ["dev", "cpe-bot"]
    assert not hasattr(seen, "approvals_required")  # Free: no approval rules
    # ...but every tier says whether the viewer approved and may approve (cpe-bot: it did).
    assert (seen.user_has_approved, seen.user_can_approve) == (True, False)
    with http(fake_gitlab, "developer-token") as client:
        other = fake_gitlab.open_mr("b", {"b.txt": "b"}, "B")
        fresh = client.get(f"/merge_requests/{other}/approvals").json()
    assert (fresh["user_has_approved"], fresh["user_can_approve"]) == (False, True)
    with http(fake_gitlab) as client:
        assert client.get(f"/merge_requests/{iid}/approval_rules").status_code == 404


def test_on_premium_missing_approvals_hold_a_merge_request_back(premium: FakeGitLab) -> None:
    premium.configure(approvals_before_merge=1)
    iid = premium.open_mr("a", {"a.txt": "a"}, "A")
    proj = project(premium)
    proj.mergerequests.get(iid)
    assert proj.mergerequests.get(iid).detailed_merge_status == "not_approved"
    approvals = proj.mergerequests.get(iid).approvals.get()
    assert (approvals.approvals_required, approvals.approvals_left) == (1, 1)
    assert merge(premium, iid).status_code == 405
    premium.approve(iid, by="dev")
    assert proj.mergerequests.get(iid).detailed_merge_status == "mergeable"
    rules = proj.mergerequests.get(iid, lazy=True).approval_rules.list(get_all=True)
    assert [r.approvals_required for r in rules] == [1]


# ---------------------------------------------------------------------- the merge endpoint


def test_a_merge_makes_a_merge_commit_removes_the_branch_and_closes_issues(
    fake_gitlab: FakeGitLab,
) -> None:
    issue = fake_gitlab.open_issue("Do A")
    iid = fake_gitlab.open_mr("a", {"a.txt": "a"}, "A", f"Closes #{issue}")
    target, head = fake_gitlab.default_head(), fake_gitlab.head_of("a")
    merged = merge(fake_gitlab, iid, sha=head)
    assert merged.status_code == 200
    body = merged.json()
    assert (body["state"], body["merged_by"]["username"]) == ("merged", "cpe-bot")
    info = fake_gitlab.git.commit_info(body["merge_commit_sha"])
    assert info.parents == (target, head)
    assert info.message.startswith("Merge branch 'a' into 'main'")
    assert fake_gitlab.default_head() == body["merge_commit_sha"]
    assert fake_gitlab.head_of("a") is None  # the project removes source branches
    closed = project(fake_gitlab).issues.get(issue)
    assert (closed.state, closed.attributes["closed_by"]["username"]) == ("closed", "cpe-bot")


def test_the_merge_endpoint_answers_its_documented_refusals(fake_gitlab: FakeGitLab) -> None:
    iid = fake_gitlab.open_mr("a", {"a.txt": "a"}, "A")
    head = fake_gitlab.head_of("a")
    developer = merge(fake_gitlab, iid, "developer-token")  # main is protected: Maintainers
    stale = merge(fake_gitlab, iid, sha="5" * 40)
    assert (developer.status_code, developer.json()) == (401, {"message": "401 Unauthorized"})
    assert (stale.status_code, stale.json()) == (
        409,
        {"message": f"SHA does not match HEAD of source branch: {head}"},
    )
    conflicted = fake_gitlab.open_mr("c", {"README.md": "ours\n"}, "C")
    draft = fake_gitlab.open_mr("d", {"d.txt": "d"}, "Draft: D")
    fake_gitlab.commit_to_default({"README.md": "theirs\n"}, "meanwhile")
    for cannot in (conflicted, draft):
        refused = merge(fake_gitlab, cannot)
        assert (refused.status_code, refused.json()) == (405, {"message": "405 Method Not Allowed"})
    fake_gitlab.close_mr(iid)
    closed = merge(fake_gitlab, iid)
    assert closed.status_code == 405


def test_a_required_pipeline_holds_a_merge_until_it_succeeds(fake_gitlab: FakeGitLab) -> None:
    fake_gitlab.configure(only_allow_merge_if_pipeline_succeeds=True)
    iid = fake_gitlab.open_mr("a", {"a.txt": "a"}, "A")
    head = fake_gitlab.head_of("a")
    assert head is not None
    assert merge(fake_gitlab, iid).status_code == 405  # ci_must_pass: no pipeline yet
    fake_gitlab.report_status(head, "test", "running")
    proj = project(fake_gitlab)
    proj.mergerequests.get(iid)
    waiting = proj.mergerequests.get(iid)
    assert waiting.detailed_merge_status == "ci_still_running"
    assert waiting.head_pipeline["status"] == "running"
    assert merge(fake_gitlab, iid).status_code == 405
    auto = merge(fake_gitlab, iid, merge_when_pipeline_succeeds=True, sha=head)
    assert auto.status_code == 200
    assert (auto.json()["state"], auto.json()["merge_when_pipeline_succeeds"]) == ("opened", True)
    fake_gitlab.report_status(head, "test", "success")
    done = proj.mergerequests.get(iid)
    assert done.state == "merged"
    assert fake_gitlab.default_head() == done.merge_commit_sha


def test_a_failing_pipeline_drops_an_automatic_merge(fake_gitlab: FakeGitLab) -> None:
    fake_gitlab.configure(only_allow_merge_if_pipeline_succeeds=True)
    iid = fake_gitlab.open_mr("a", {"a.txt": "a"}, "A")
    head = fake_gitlab.head_of("a")
    assert head is not None
    fake_gitlab.report_status(head, "test", "pending")
    assert merge(fake_gitlab, iid, merge_when_pipeline_succeeds=True).status_code == 200
    fake_gitlab.report_status(head, "test", "failed")
    mr = project(fake_gitlab).mergerequests.get(iid)
    assert (mr.state, mr.merge_when_pipeline_succeeds) == ("opened", False)


def test_fast_forward_and_squash_merges(fake_gitlab: FakeGitLab) -> None:
    fake_gitlab.configure(merge_method="ff")
    first = fake_gitlab.open_mr("a", {"a.txt": "a"}, "A")
    head = fake_gitlab.head_of("a")
    fast = merge(fake_gitlab, first).json()
    assert fake_gitlab.default_head() == head
    assert fast["merge_commit_sha"] is None  # a fast-forward makes no merge commit
    second = fake_gitlab.open_mr("b", {"b.txt": "b"}, "B")
    fake_gitlab.push("b", {"b2.txt": "b2"}, "more")
    squashed = merge(fake_gitlab, second, squash=True).json()
    squash = fake_gitlab.git.commit_info(squashed["squash_commit_sha"])
    assert squash.parents == (head,)
    assert fake_gitlab.default_head() == squashed["squash_commit_sha"]


# ---------------------------------------------------------------------- statuses and pipelines


def test_commit_statuses_make_an_external_pipeline(fake_gitlab: FakeGitLab) -> None:
    iid = fake_gitlab.open_mr("a", {"a.txt": "a"}, "A")
    head = fake_gitlab.head_of("a")
    assert head is not None
    statuses = project(fake_gitlab).commits.get(head, lazy=True).statuses
    made = statuses.create({"state": "pending", "name": "test", "target_url": "http://ci/1"})
    assert (made.status, made.name, made.ref, made.target_url) == (
        "pending",
        "test",
        "a",
        "http://ci/1",
    )
    statuses.create({"state": "success", "name": "test"})
    statuses.create({"state": "running", "name": "lint"})
    listed = {s.name: s.status for s in statuses.list(get_all=True)}
    assert listed == {"test": "success", "lint": "running"}
    pipelines = project(fake_gitlab).pipelines.list(get_all=True, sha=head)
    assert [(p.status, p.source, p.ref) for p in pipelines] == [("running", "external", "a")]
    one = project(fake_gitlab).pipelines.get(pipelines[0].id)
    assert one.jobs.list(get_all=True) == []  # commit statuses are not CI jobs
    assert project(fake_gitlab).mergerequests.get(iid).head_pipeline["id"] == one.id


def test_commit_statuses_are_refused_as_gitlab_refuses_them(fake_gitlab: FakeGitLab) -> None:
    head = fake_gitlab.default_head()
    with http(fake_gitlab) as client:
        no_state = client.post(f"/statuses/{head}", json={"name": "x"})
        bad_state = client.post(f"/statuses/{head}", json={"state": "done"})
        client.post(f"/statuses/{head}", json={"state": "running", "name": "x"})
        again = client.post(f"/statuses/{head}", json={"state": "running", "name": "x"})
        unknown = client.post(f"/statuses/{'6' * 40}", json={"state": "running"})
    with http(fake_gitlab, "reporter-token") as client:
        reporter = client.post(f"/statuses/{head}", json={"state": "running"})
    assert (no_state.status_code, no_state.json()) == (400, {"error": "state is missing"})
    assert bad_state.json() == {"error": "state does not have a valid value"}
    assert again.status_code == 400
    assert again.json()["message"].startswith("Cannot transition status via :run from :running")
    assert (unknown.status_code, unknown.json()) == (404, {"message": "404 Commit Not Found"})
    assert (reporter.status_code, reporter.json()) == (403, {"message": "403 Forbidden"})


# ---------------------------------------------------------------------- helpers


def test_helpers_refuse_what_gitlab_would(fake_gitlab: FakeGitLab) -> None:
    with pytest.raises(ValueError, match="cannot push a branch"):
        fake_gitlab.open_mr("x", {"x": "x"}, "X", author="passer.by")
    iid = fake_gitlab.open_mr("a", {"README.md": "ours\n"}, "A")
    with pytest.raises(ValueError, match="cannot report commit statuses"):
        fake_gitlab.report_status(fake_gitlab.default_head(), "ci", "success", by="passer.by")
    with pytest.raises(ValueError, match="may not merge"):
        fake_gitlab.merge_by_hand(iid, by="someone")  # a Developer: main is protected
    fake_gitlab.commit_to_default({"README.md": "theirs\n"}, "meanwhile")
    with pytest.raises(ValueError, match="conflict"):
        fake_gitlab.merge_by_hand(iid)
    other = fake_gitlab.open_mr("b", {"b.txt": "b"}, "B")
    merged_head = fake_gitlab.merge_by_hand(other)
    assert fake_gitlab.default_head() == merged_head
    assert fake_gitlab.merge_requests[other].merged_by == "acme"

"""The fake GitLab's merge requests against python-gitlab (and httpx for GitLab's refusals):
create, list, update, the asynchronous mergeability check, diffs, notes and diff discussions,
rebases."""

from __future__ import annotations

from typing import Any

from gitlab.v4.objects import Project, ProjectMergeRequest

from tests.fakes.gitlab import FakeGitLab
from tests.support.gitlab import gitlab_project as project
from tests.support.gitlab import project_api as http


def settled(proj: Project, iid: int) -> ProjectMergeRequest:
    """The merge request once GitLab's background mergeability check has run (a read starts
    it; the next one shows what it found)."""
    proj.mergerequests.get(iid)
    return proj.mergerequests.get(iid)


# ---------------------------------------------------------------------- create, list, update


def test_a_merge_request_is_opened_from_a_pushed_branch(fake_gitlab: FakeGitLab) -> None:
    start = fake_gitlab.default_head()
    proj = project(fake_gitlab)
    proj.branches.create({"branch": "cpe/1-x", "ref": "main"})
    head = fake_gitlab.push("cpe/1-x", {"x.txt": "x\n"}, "Add x")
    made = proj.mergerequests.create(
        {
            "source_branch": "cpe/1-x",
            "target_branch": "main",
            "title": "Add x",
            "description": "Closes #1",
            "labels": "cpe",
        }
    )
    assert (made.iid, made.state, made.sha, made.labels) == (1, "opened", head, ["cpe"])
    assert made.diff_refs == {"base_sha": start, "head_sha": head, "start_sha": start}
    assert made.author["username"] == "cpe-bot"
    assert made.detailed_merge_status == "checking"  # GitLab checks in the background
    assert proj.mergerequests.get(1).detailed_merge_status == "checking"  # this read starts it
    again = proj.mergerequests.get(1)
    assert (again.detailed_merge_status, again.merge_status) == ("mergeable", "can_be_merged")
    assert again.has_conflicts is False
    assert again.web_url.endswith("/acme/widgets/-/merge_requests/1")


def test_a_second_open_merge_request_for_the_branch_is_a_409(fake_gitlab: FakeGitLab) -> None:
    fake_gitlab.open_mr("cpe/1-x", {"x.txt": "x\n"}, "first")
    with http(fake_gitlab) as client:
        again = client.post(
            "/merge_requests",
            json={"source_branch": "cpe/1-x", "target_branch": "main", "title": "t"},
        )
        nowhere = client.post(
            "/merge_requests", json={"source_branch": "nope", "target_branch": "main", "title": "t"}
        )
        untitled = client.post(
            "/merge_requests", json={"source_branch": "cpe/1-x", "target_branch": "main"}
        )
    assert again.status_code == 409
    assert again.json() == {
        "message": ["Another open merge request already exists for this source branch: !1"]
    }
    assert (nowhere.status_code, nowhere.json()) == (
        422,
        {"message": ['Source branch "nope" does not exist']},
    )
    assert (untitled.status_code, untitled.json()) == (400, {"error": "title is missing"})
    with http(fake_gitlab, "reporter-token") as client:
        reporter = client.post(
            "/merge_requests",
            json={"source_branch": "cpe/1-x", "target_branch": "main", "title": "t"},
        )
    assert (reporter.status_code, reporter.json()) == (403, {"message": "403 Forbidden"})


def test_merge_requests_are_listed_by_state_branch_and_time(fake_gitlab: FakeGitLab) -> None:
    first = fake_gitlab.open_mr("a", {"a.txt": "a"}, "A")
    second = fake_gitlab.open_mr("b", {"b.txt": "b"}, "B")
    fake_gitlab.close_mr(first)
    proj = project(fake_gitlab)

    def iids(**query: Any) -> list[int]:
        return [m.iid for m in proj.mergerequests.list(get_all=True, **query)]

    assert iids() == [second, first]
    assert iids(state="opened") == [second]
    assert iids(state="closed") == [first]
    assert iids(source_branch="b") == [second]
    since = proj.mergerequests.get(first).updated_at
    assert iids(updated_after=since, order_by="updated_at") == [first]


def test_an_update_edits_relabels_and_closes_and_an_empty_one_is_refused(
    fake_gitlab: FakeGitLab,
) -> None:
    iid = fake_gitlab.open_mr("a", {"a.txt": "a"}, "A")
    proj = project(fake_gitlab)
    mr = proj.mergerequests.get(iid)
    mr.title, mr.add_labels, mr.description = "A, retitled", "review", "Body"
    mr.save()
    changed = proj.mergerequests.get(iid)
    assert (changed.title, changed.labels, changed.description) == (
        "A, retitled",
        ["review"],
        "Body",
    )
    changed.state_event = "close"
    changed.save()
    assert proj.mergerequests.get(iid).state == "closed"
    with http(fake_gitlab) as client:
        empty = client.put(f"/merge_requests/{iid}", json={})
    assert empty.status_code == 400
    assert empty.json()["error"].endswith("at least one parameter must be provided")


# ---------------------------------------------------------------------- pushes and mergeability


def test_a_push_makes_a_new_diff_version_and_says_so(fake_gitlab: FakeGitLab) -> None:
    iid = fake_gitlab.open_mr("a", {"a.txt": "a"}, "A")
    first = project(fake_gitlab).mergerequests.get(iid).diff_refs
    head = fake_gitlab.push("a", {"a.txt": "a2"}, "more")
    mr = project(fake_gitlab).mergerequests.get(iid)
    assert mr.sha == head
    assert mr.diff_refs["head_sha"] == head != first["head_sha"]
    notes = [(n.body, n.system) for n in mr.notes.list(get_all=True)]
    assert notes == [("added 1 commit", True)]


def test_a_conflict_a_draft_and_a_missing_rebase_are_read_from_the_repository(
    fake_gitlab: FakeGitLab,
) -> None:
    conflicting = fake_gitlab.open_mr("c", {"README.md": "ours\n"}, "C")
    draft = fake_gitlab.open_mr("d", {"d.txt": "d"}, "Draft: D")
    behind = fake_gitlab.open_mr("e", {"e.txt": "e"}, "E")
    fake_gitlab.commit_to_default({"README.md": "theirs\n"}, "meanwhile")
    proj = project(fake_gitlab)
    found = settled(proj, conflicting)
    assert (found.detailed_merge_status, found.merge_status, found.has_conflicts) == (
        "conflict",
        "cannot_be_merged",
        True,
    )
    assert settled(proj, draft).detailed_merge_status == "draft_status"
    assert settled(proj, behind).detailed_merge_status == "mergeable"  # a merge commit will do
    fake_gitlab.configure(merge_method="ff")
    assert settled(proj, behind).detailed_merge_status == "need_rebase"


# ---------------------------------------------------------------------- diffs and discussions


def test_diffs_and_changes_show_the_latest_version(fake_gitlab: FakeGitLab) -> None:
    iid = fake_gitlab.open_mr("a", {"a.txt": "one\ntwo\n", "docs/obsolete.txt": None}, "A")
    with http(fake_gitlab) as client:
        diffs = client.get(f"/merge_requests/{iid}/diffs").json()
        changes = client.get(f"/merge_requests/{iid}/changes").json()
    by_path = {d["new_path"]: d for d in diffs}
    assert by_path["a.txt"]["new_file"] is True
    assert by_path["a.txt"]["diff"] == "@@ -0,0 +1,2 @@\n+one\n+two\n"
    assert by_path["docs/obsolete.txt"]["deleted_file"] is True
    assert {c["new_path"] for c in changes["changes"]} == set(by_path)
    assert changes["changes_count"] == "2"


def test_a_diff_note_must_sit_on_a_line_of_the_diff(fake_gitlab: FakeGitLab) -> None:
    iid = fake_gitlab.open_mr("a", {"src/app.py": "def answer():\n    return 42\n"}, "A")
    proj = project(fake_gitlab)
    mr = proj.mergerequests.get(iid)
    at: dict[str, Any] = {
        "position_type": "text",
        **mr.diff_refs,
        "old_path": "src/app.py",
        "new_path": "src/app.py",
    }
    added = mr.discussions.create({"body": "why 42?", "position": {**at, "new_line": 2}})
    note = added.attributes["notes"][0]
    assert (note["type"], note["position"]["new_line"], note["resolvable"]) == ("DiffNote", 2, True)
    assert added.attributes["individual_note"] is False
    with http(fake_gitlab) as client:
        for wrong in ({**at, "new_line": 40}, {**at, "head_sha": "3" * 40, "new_line": 2}):
            refused = client.post(
                f"/merge_requests/{iid}/discussions", json={"body": "x", "position": wrong}
            )
            assert refused.status_code == 400
            assert refused.json()["message"].startswith("400 Bad request - Note {:line_code=>")
    threads = proj.mergerequests.get(iid, lazy=True).discussions.list(get_all=True)
    assert [len(t.attributes["notes"]) for t in threads] == [1]


def test_threads_are_replied_to_and_resolved_and_can_hold_up_a_merge(
    fake_gitlab: FakeGitLab,
) -> None:
    fake_gitlab.configure(only_allow_merge_if_all_discussions_are_resolved=True)
    iid = fake_gitlab.open_mr("a", {"a.txt": "a"}, "A")
    proj = project(fake_gitlab)
    mr = proj.mergerequests.get(iid)
    thread = mr.discussions.create({"body": "please look"})
    thread.notes.create({"body": "looking"})
    assert settled(proj, iid).detailed_merge_status == "discussions_not_resolved"
    thread.resolved = True
    thread.save()
    assert settled(proj, iid).detailed_merge_status == "mergeable"
    bodies = [n["body"] for n in mr.discussions.get(thread.id).attributes["notes"]]
    assert bodies == ["please look", "looking"]


# ---------------------------------------------------------------------- rebase


def test_a_rebase_runs_in_the_background_and_moves_the_branch(fake_gitlab: FakeGitLab) -> None:
    fake_gitlab.configure(merge_method="ff")
    iid = fake_gitlab.open_mr("a", {"a.txt": "a"}, "A")
    target = fake_gitlab.commit_to_default({"b.txt": "b"}, "meanwhile")
    proj = project(fake_gitlab)
    mr = proj.mergerequests.get(iid)
    assert mr.rebase() == {"rebase_in_progress": True}
    during = proj.mergerequests.get(iid, include_rebase_in_progress=True)
    assert during.rebase_in_progress is True
    after = proj.mergerequests.get(iid, include_rebase_in_progress=True)
    assert (after.rebase_in_progress, after.merge_error) == (False, None)
    assert fake_gitlab.git.is_ancestor(target, after.sha)
    assert settled(proj, iid).detailed_merge_status == "mergeable"


def test_a_rebase_that_conflicts_leaves_a_merge_error(fake_gitlab: FakeGitLab) -> None:
    iid = fake_gitlab.open_mr("a", {"README.md": "ours\n"}, "A")
    head = fake_gitlab.head_of("a")
    fake_gitlab.commit_to_default({"README.md": "theirs\n"}, "meanwhile")
    proj = project(fake_gitlab)
    proj.mergerequests.get(iid).rebase()
    fake_gitlab.finish_rebases()
    after = proj.mergerequests.get(iid, include_rebase_in_progress=True)
    assert after.rebase_in_progress is False
    assert (
        after.merge_error == "Rebase failed: Rebase locally, resolve all conflicts, then push "
        "the branch."
    )
    assert fake_gitlab.head_of("a") == head

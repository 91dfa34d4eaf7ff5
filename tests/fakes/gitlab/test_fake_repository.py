"""The fake GitLab's repository endpoints against python-gitlab (and httpx for the refusals):
branches, commits, compare, merge base, tree, files, blobs, and the Commits API's actions and
GitLab's 400s for them."""

from __future__ import annotations

import base64
from typing import Any

import httpx
import pytest

from tests.adapters.providers.edits import BASE_FILES
from tests.fakes.gitlab import FakeGitLab
from tests.support.gitlab import gitlab_project as project
from tests.support.gitlab import project_api as http


def commit(gl: FakeGitLab, token: str = "test-token", **body: Any) -> httpx.Response:
    with http(gl, token) as client:
        return client.post("/repository/commits", json=body)


def files_at(gl: FakeGitLab, ref: str) -> dict[str, tuple[str, bytes]]:
    found = gl.git.ls_tree(ref, recursive=True)
    return {e.path: (e.mode, gl.git.read_blob(e.sha)) for e in found if e.type == "blob"}


# ---------------------------------------------------------------------- branches and commits


def test_branches_are_read_made_and_deleted(fake_gitlab: FakeGitLab) -> None:
    proj = project(fake_gitlab)
    main = proj.branches.get("main")
    assert (main.default, main.protected, main.commit["id"]) == (
        True,
        True,
        fake_gitlab.default_head(),
    )
    made = proj.branches.create({"branch": "feature/x", "ref": "main"})
    assert made.commit["id"] == fake_gitlab.default_head()
    assert proj.branches.get("feature/x").name == "feature/x"  # encoded as feature%2Fx
    with http(fake_gitlab) as client:
        again = client.post("/repository/branches", json={"branch": "feature/x", "ref": "main"})
        bad_ref = client.post("/repository/branches", json={"branch": "y", "ref": "nowhere"})
        assert client.delete("/repository/branches/feature%2Fx").status_code == 204
        gone = client.get("/repository/branches/feature%2Fx")
    assert (again.status_code, again.json()) == (400, {"message": "Branch already exists"})
    assert bad_ref.json() == {"message": "Invalid reference name: nowhere"}
    assert (gone.status_code, gone.json()) == (404, {"message": "404 Branch Not Found"})


def test_a_commit_is_read_by_sha_or_branch_and_a_missing_one_is_404(
    fake_gitlab: FakeGitLab,
) -> None:
    head = fake_gitlab.default_head()
    proj = project(fake_gitlab)
    assert proj.commits.get(head).id == head
    assert proj.commits.get("main").title == "initial"
    with http(fake_gitlab) as client:
        missing = client.get(f"/repository/commits/{'0' * 40}")
    assert (missing.status_code, missing.json()) == (404, {"message": "404 Commit Not Found"})


def test_compare_merge_base_tree_files_and_blobs(fake_gitlab: FakeGitLab) -> None:
    base = fake_gitlab.default_head()
    tip = fake_gitlab.commit_to_default({"src/app.py": "changed\n", "new.txt": "n\n"}, "change")
    proj = project(fake_gitlab)
    compared = proj.repository_compare(base, tip)
    assert [c["id"] for c in compared["commits"]] == [tip]
    changed = {d["new_path"]: d for d in compared["diffs"]}
    assert changed["new.txt"]["new_file"] is True
    assert changed["src/app.py"]["diff"].startswith("@@")
    assert proj.repository_merge_base([base, tip])["id"] == base
    names = {e["path"] for e in proj.repository_tree(path="src", ref=tip, get_all=True)}
    assert "src/app.py" in names
    assert proj.files.raw("src/app.py", ref=tip) == b"changed\n"
    blob = next(
        e["id"] for e in proj.repository_tree(ref=tip, get_all=True) if e["path"] == "new.txt"
    )
    assert proj.repository_raw_blob(blob) == b"n\n"
    with http(fake_gitlab) as client:
        no_tree = client.get("/repository/tree", params={"path": "nope", "ref": tip})
        no_file = client.get("/repository/files/nope.txt/raw", params={"ref": tip})
    assert (no_tree.status_code, no_tree.json()) == (404, {"message": "404 Tree Not Found"})
    assert (no_file.status_code, no_file.json()) == (404, {"message": "404 File Not Found"})


# ---------------------------------------------------------------------- the Commits API


def test_commit_actions_are_applied_to_the_repository(fake_gitlab: FakeGitLab) -> None:
    made = project(fake_gitlab).commits.create(
        {
            "branch": "cpe/1-work",
            "start_branch": "main",
            "commit_message": "Work",
            "actions": [
                {"action": "create", "file_path": "bin/run", "content": "#!/bin/sh\n"},
                {"action": "chmod", "file_path": "bin/run", "execute_filemode": True},
                {
                    "action": "update",
                    "file_path": "README.md",
                    "content": base64.b64encode(b"\x00binary\xff").decode(),
                    "encoding": "base64",
                },
                {"action": "delete", "file_path": "docs/obsolete.txt"},
                {
                    "action": "move",
                    "file_path": "src/new_name.py",
                    "previous_path": "src/old_name.py",
                },
            ],
        }
    )
    assert made.parent_ids == [fake_gitlab.default_head()]
    assert fake_gitlab.head_of("cpe/1-work") == made.id
    after = files_at(fake_gitlab, made.id)
    assert after["bin/run"] == ("100755", b"#!/bin/sh\n")
    assert after["README.md"][1] == b"\x00binary\xff"
    assert "docs/obsolete.txt" not in after
    assert after["src/new_name.py"][1] == BASE_FILES["src/old_name.py"].encode()
    assert "src/old_name.py" not in after


@pytest.mark.parametrize(
    ("action", "message"),
    [
        (
            {"action": "create", "file_path": "README.md", "content": "x"},
            "A file with this name already exists",
        ),
        (
            {"action": "update", "file_path": "nope.txt", "content": "x"},
            "A file with this name doesn't exist",
        ),
        ({"action": "delete", "file_path": "nope.txt"}, "A file with this name doesn't exist"),
        (
            {"action": "move", "file_path": "README.md", "previous_path": "src/app.py"},
            "A file with this name already exists",
        ),
        (
            {
                "action": "update",
                "file_path": "README.md",
                "content": "x",
                "last_commit_id": "1" * 40,
            },
            "The file has changed since you started editing it: README.md",
        ),
    ],
)
def test_a_file_action_gitlab_cannot_apply_is_a_400(
    fake_gitlab: FakeGitLab, action: dict[str, Any], message: str
) -> None:
    head = fake_gitlab.default_head()
    refused = commit(fake_gitlab, branch="main", commit_message="m", actions=[action])
    assert (refused.status_code, refused.json()) == (400, {"message": message})
    assert fake_gitlab.default_head() == head


def test_where_a_commit_starts_is_checked_as_gitlab_checks_it(fake_gitlab: FakeGitLab) -> None:
    head = fake_gitlab.default_head()
    act = [{"action": "create", "file_path": "n.txt", "content": "n"}]
    first = commit(fake_gitlab, branch="b", start_branch="main", commit_message="1", actions=act)
    assert first.status_code == 201
    stale = commit(fake_gitlab, branch="b", start_sha=head, commit_message="2", actions=act)
    assert stale.json() == {
        "message": "A branch called 'b' already exists. Switch to that "
        "branch in order to make changes"
    }
    forced = commit(
        fake_gitlab, branch="b", start_sha=head, force=True, commit_message="3", actions=act
    )
    assert forced.json()["parent_ids"] == [head]  # the branch was overwritten from start_sha
    nowhere = commit(fake_gitlab, branch="c", commit_message="4", actions=act)
    assert nowhere.json() == {
        "message": "You can only create or edit files when you are on a branch"
    }
    unknown = commit(fake_gitlab, branch="d", start_sha="2" * 40, commit_message="5", actions=act)
    assert unknown.json() == {"message": f"Cannot find start_sha '{'2' * 40}'"}
    both = commit(
        fake_gitlab,
        branch="e",
        start_sha=head,
        start_branch="main",
        commit_message="6",
        actions=act,
    )
    assert both.json() == {"message": "You can't pass both start_branch and start_sha"}


def test_pushing_takes_a_developer_and_the_default_branch_a_maintainer(
    fake_gitlab: FakeGitLab,
) -> None:
    act = [{"action": "create", "file_path": "n.txt", "content": "n"}]
    reporter = commit(
        fake_gitlab,
        "reporter-token",
        branch="r",
        start_branch="main",
        commit_message="m",
        actions=act,
    )
    to_main = commit(fake_gitlab, "developer-token", branch="main", commit_message="m", actions=act)
    own_branch = commit(
        fake_gitlab,
        "developer-token",
        branch="dev/x",
        start_branch="main",
        commit_message="m",
        actions=act,
    )
    refusal = {"message": "You are not allowed to push into this branch"}
    assert (reporter.status_code, reporter.json()) == (400, refusal)
    assert (to_main.status_code, to_main.json()) == (400, refusal)
    assert own_branch.status_code == 201

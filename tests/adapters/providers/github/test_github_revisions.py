"""What only the GitHub provider promises about revisions: nothing is pushed (every object is
made through the Git Data API), an existing pull request for the work item is updated instead of
duplicated, and another item's branch is refused."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from adapters.providers.github import GitHubProvider
from domain.errors import ConflictError, NotFoundError, PatchError
from domain.models import WorkItemId
from tests.adapters.providers.edits import EDITS, every_edit
from tests.fakes.github import FakeGitHub
from tests.support.git import Repo, make_patch, tree_from_git_apply
from tests.support.github import github_provider


@pytest.fixture
def provider(fake_github: FakeGitHub) -> Iterator[GitHubProvider]:
    with github_provider(fake_github) as made:
        yield made


def test_a_patch_with_every_kind_of_change_is_built_through_the_git_data_api(
    fake_github: FakeGitHub, provider: GitHubProvider, tmp_path: Path
) -> None:
    patch = make_patch(fake_github.git.path, tmp_path / "patch", every_edit)
    expected = tree_from_git_apply(
        fake_github.git.path, tmp_path / "ref", patch, fake_github.default_head()
    )
    fake_github.clear_requests()  # the start's (the status labels)
    item = provider.work_item_writer.create_work_item("All", "b")
    revision = provider.revision_writer.create_from_patch(item, "cpe/1-all", "All", "", patch)
    assert fake_github.git.line("rev-parse", f"{revision.head_sha}^{{tree}}") == expected
    writes = {
        (r.method, r.path.split("/widgets/", 1)[1])
        for r in fake_github.requests
        if r.method != "GET"
    }
    assert writes == {
        ("POST", "issues"),
        ("POST", "git/blobs"),
        ("POST", "git/trees"),
        ("POST", "git/commits"),
        ("POST", "git/refs"),
        ("POST", "pulls"),
    }


def test_an_open_pull_request_for_the_work_item_is_updated_whatever_the_branch(
    fake_github: FakeGitHub, provider: GitHubProvider, tmp_path: Path
) -> None:
    item = provider.work_item_writer.create_work_item("T", "b")
    writer = provider.revision_writer
    added = make_patch(fake_github.git.path, tmp_path / "p1", EDITS["added"])
    first = writer.create_from_patch(item, "cpe/1-old-title", "T", "", added)
    modified = make_patch(fake_github.git.path, tmp_path / "p2", EDITS["modified"])
    second = writer.create_from_patch(item, "cpe/1-new-title", "T", "", modified)
    assert (second.id, second.branch) == (first.id, "cpe/1-old-title")
    assert len(fake_github.pulls) == 1


def test_a_branch_holding_another_items_pull_request_is_refused(
    fake_github: FakeGitHub, provider: GitHubProvider, tmp_path: Path
) -> None:
    writer = provider.revision_writer
    one = provider.work_item_writer.create_work_item("One", "b")
    two = provider.work_item_writer.create_work_item("Two", "b")
    writer.create_from_patch(
        one,
        "cpe/shared",
        "One",
        "",
        make_patch(fake_github.git.path, tmp_path / "p1", EDITS["added"]),
    )
    with pytest.raises(ConflictError, match="cpe/shared"):
        writer.create_from_patch(
            two,
            "cpe/shared",
            "Two",
            "",
            make_patch(fake_github.git.path, tmp_path / "p2", EDITS["modified"]),
        )


def test_an_unknown_work_item_gets_no_revision(
    fake_github: FakeGitHub, provider: GitHubProvider, tmp_path: Path
) -> None:
    patch = make_patch(fake_github.git.path, tmp_path / "p", EDITS["added"])
    with pytest.raises(NotFoundError):
        provider.revision_writer.create_from_patch(WorkItemId("404"), "cpe/x", "T", "", patch)
    assert fake_github.pulls == {}


def test_an_update_after_the_default_branch_moved_shows_only_the_patch(
    fake_github: FakeGitHub, provider: GitHubProvider, tmp_path: Path
) -> None:
    item = provider.work_item_writer.create_work_item("T", "b")
    writer = provider.revision_writer
    first = writer.create_from_patch(
        item, "cpe/1-t", "T", "", make_patch(fake_github.git.path, tmp_path / "p1", EDITS["added"])
    )
    moved = fake_github.commit_to_default({"README.md": "# moved on\n"}, "readme")
    updated = writer.update_from_patch(
        first.id, make_patch(fake_github.git.path, tmp_path / "p2", EDITS["modified"])
    )
    parents = fake_github.git.line("rev-list", "--parents", "-n", "1", updated.head_sha).split()[1:]
    assert parents == [first.head_sha, moved]
    files = provider.revision_reader.get_revision_files(updated.id)
    assert [f.path for f in files] == ["src/app.py"]


def test_the_same_patch_again_makes_no_commit(
    fake_github: FakeGitHub, provider: GitHubProvider, tmp_path: Path
) -> None:
    item = provider.work_item_writer.create_work_item("T", "b")
    writer = provider.revision_writer
    patch = make_patch(fake_github.git.path, tmp_path / "p", EDITS["added"])
    first = writer.create_from_patch(item, "cpe/1-t", "T", "", patch)
    assert writer.update_from_patch(first.id, patch).head_sha == first.head_sha


def test_a_patch_from_before_the_default_branch_moved_applies_three_way(
    fake_github: FakeGitHub, provider: GitHubProvider, tmp_path: Path
) -> None:
    """As the local provider does: the blobs the patch was made against are fetched through
    the API, and ``git apply --3way`` merges a change made to the same file meanwhile."""
    lines = [f"line {i}\n" for i in range(12)]
    fake_github.commit_to_default({"numbers.txt": "".join(lines)}, "numbers")

    def change_line_6(work: Repo) -> None:
        work.write("numbers.txt", "".join([*lines[:6], "line six\n", *lines[7:]]))

    patch = make_patch(fake_github.git.path, tmp_path / "p", change_line_6)
    # Line 4 is context of the patch's hunk: a plain apply now fails, a three-way one merges.
    fake_github.commit_to_default(
        {"numbers.txt": "".join([*lines[:4], "line four\n", *lines[5:]])}, "line 4"
    )
    item = provider.work_item_writer.create_work_item("T", "b")
    revision = provider.revision_writer.create_from_patch(item, "cpe/3way", "T", "", patch)
    merged = fake_github.git.line("show", f"{revision.head_sha}:numbers.txt")
    assert "line four" in merged
    assert "line six" in merged


def test_a_patch_that_conflicts_with_the_moved_default_branch_is_refused(
    fake_github: FakeGitHub, provider: GitHubProvider, tmp_path: Path
) -> None:
    lines = [f"line {i}\n" for i in range(12)]
    fake_github.commit_to_default({"numbers.txt": "".join(lines)}, "numbers")

    def change_line_6(work: Repo) -> None:
        work.write("numbers.txt", "".join([*lines[:6], "line six\n", *lines[7:]]))

    patch = make_patch(fake_github.git.path, tmp_path / "p", change_line_6)
    fake_github.commit_to_default(
        {"numbers.txt": "".join([*lines[:6], "SIX\n", *lines[7:]])}, "six"
    )
    item = provider.work_item_writer.create_work_item("T", "b")
    with pytest.raises(PatchError, match="does not apply"):
        provider.revision_writer.create_from_patch(item, "cpe/conflict", "T", "", patch)

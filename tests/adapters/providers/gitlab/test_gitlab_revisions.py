"""What only the GitLab provider promises about revisions: a patch becomes ONE commit made
through the Commits API (nothing pushed), on the run's fork point or the default branch's head;
an existing merge request is updated instead of duplicated; a write whose answer was lost is
found, not made twice; with a tracker elsewhere, a merge request names its item by the neutral
marker, never "Closes #N"."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from adapters.providers import ProviderRoles
from adapters.providers.gitlab import GitLabProvider
from domain.errors import ConflictError, NotFoundError, PatchError, ProviderError
from domain.models import RevisionId, WorkItemId
from tests.adapters.providers.edits import EDITS, Edit, every_edit
from tests.fakes.gitlab import FakeGitLab
from tests.fakes.http import Fault
from tests.support.git import Repo, make_patch, tree_from_git_apply
from tests.support.gitlab_provider import gitlab_provider


@pytest.fixture
def provider(fake_gitlab: FakeGitLab) -> Iterator[GitLabProvider]:
    with gitlab_provider(fake_gitlab) as made:
        yield made


def patch_of(fake: FakeGitLab, tmp_path: Path, edit: Edit, name: str = "p") -> str:
    return make_patch(fake.git.path, tmp_path / name, edit)


def writes(fake: FakeGitLab) -> list[tuple[str, str]]:
    return [
        (r.method, r.path.split("/projects/", 1)[1].split("/", 1)[1])
        for r in fake.requests
        if r.write
    ]


def parents(fake: FakeGitLab, sha: str) -> list[str]:
    return fake.git.line("rev-list", "--parents", "-n", "1", sha).split()[1:]


def test_a_patch_with_every_kind_of_change_is_one_commit_made_through_the_commits_api(
    fake_gitlab: FakeGitLab, provider: GitLabProvider, tmp_path: Path
) -> None:
    patch = patch_of(fake_gitlab, tmp_path, every_edit)
    base = fake_gitlab.default_head()
    expected = tree_from_git_apply(fake_gitlab.git.path, tmp_path / "ref", patch, base)
    item = provider.work_item_writer.create_work_item("All", "b")
    fake_gitlab.clear_requests()
    revision = provider.revision_writer.create_from_patch(item, "cpe/1-all", "All", "", patch)
    assert fake_gitlab.git.line("rev-parse", f"{revision.head_sha}^{{tree}}") == expected
    assert parents(fake_gitlab, revision.head_sha) == [base]
    assert writes(fake_gitlab) == [("POST", "repository/commits"), ("POST", "merge_requests")]
    mr = fake_gitlab.merge_requests[int(revision.id)]
    assert (mr.source_branch, mr.target_branch, mr.author) == ("cpe/1-all", "main", "cpe-bot")
    assert mr.description == f"Closes #{item}\n"


def test_an_open_merge_request_for_the_work_item_is_updated_whatever_the_branch(
    fake_gitlab: FakeGitLab, provider: GitLabProvider, tmp_path: Path
) -> None:
    item = provider.work_item_writer.create_work_item("T", "b")
    writer = provider.revision_writer
    first = writer.create_from_patch(
        item, "cpe/1-old-title", "T", "", patch_of(fake_gitlab, tmp_path, EDITS["added"], "p1")
    )
    second = writer.create_from_patch(
        item, "cpe/1-new-title", "T", "", patch_of(fake_gitlab, tmp_path, EDITS["modified"], "p2")
    )
    assert (second.id, second.branch) == (first.id, "cpe/1-old-title")
    assert parents(fake_gitlab, second.head_sha) == [first.head_sha]
    assert len(fake_gitlab.merge_requests) == 1


def test_a_branch_holding_another_items_merge_request_is_refused(
    fake_gitlab: FakeGitLab, provider: GitLabProvider, tmp_path: Path
) -> None:
    writer = provider.revision_writer
    one = provider.work_item_writer.create_work_item("One", "b")
    two = provider.work_item_writer.create_work_item("Two", "b")
    writer.create_from_patch(
        one, "cpe/shared", "One", "", patch_of(fake_gitlab, tmp_path, EDITS["added"], "p1")
    )
    with pytest.raises(ConflictError, match="cpe/shared"):
        writer.create_from_patch(
            two, "cpe/shared", "Two", "", patch_of(fake_gitlab, tmp_path, EDITS["modified"], "p2")
        )


def test_an_unknown_work_item_gets_no_revision(
    fake_gitlab: FakeGitLab, provider: GitLabProvider, tmp_path: Path
) -> None:
    patch = patch_of(fake_gitlab, tmp_path, EDITS["added"])
    with pytest.raises(NotFoundError):
        provider.revision_writer.create_from_patch(WorkItemId("404"), "cpe/x", "T", "", patch)
    assert fake_gitlab.merge_requests == {}
    assert fake_gitlab.git.line("branch", "--list", "cpe/x") == ""


def test_an_update_after_the_default_branch_moved_rewrites_the_branch_as_the_patch_on_it(
    fake_gitlab: FakeGitLab, provider: GitLabProvider, tmp_path: Path
) -> None:
    """GitLab's Commits API cannot record the new base as a second parent: the branch becomes
    one commit of the patch on the moved default branch, and shows exactly the patch."""
    item = provider.work_item_writer.create_work_item("T", "b")
    writer = provider.revision_writer
    first = writer.create_from_patch(
        item, "cpe/1-t", "T", "", patch_of(fake_gitlab, tmp_path, EDITS["added"], "p1")
    )
    moved = fake_gitlab.commit_to_default({"README.md": "# moved on\n"}, "readme")
    updated = writer.update_from_patch(
        first.id, patch_of(fake_gitlab, tmp_path, EDITS["modified"], "p2")
    )
    assert parents(fake_gitlab, updated.head_sha) == [moved]
    files = provider.revision_reader.get_revision_files(updated.id)
    assert [f.path for f in files] == ["src/app.py"]
    [listed] = provider.revision_reader.list_revisions()
    assert listed.head_sha == updated.head_sha


def test_an_update_on_an_unmoved_base_is_a_commit_on_top_of_the_head(
    fake_gitlab: FakeGitLab, provider: GitLabProvider, tmp_path: Path
) -> None:
    item = provider.work_item_writer.create_work_item("T", "b")
    writer = provider.revision_writer
    first = writer.create_from_patch(
        item, "cpe/1-t", "T", "", patch_of(fake_gitlab, tmp_path, EDITS["added"], "p1")
    )
    fake_gitlab.clear_requests()
    updated = writer.update_from_patch(
        first.id, patch_of(fake_gitlab, tmp_path, EDITS["modified"], "p2")
    )
    assert parents(fake_gitlab, updated.head_sha) == [first.head_sha]
    assert writes(fake_gitlab) == [("POST", "repository/commits")]
    assert {f.path for f in provider.revision_reader.get_revision_files(first.id)} == {"src/app.py"}


def test_the_same_patch_again_makes_no_commit(
    fake_gitlab: FakeGitLab, provider: GitLabProvider, tmp_path: Path
) -> None:
    item = provider.work_item_writer.create_work_item("T", "b")
    writer = provider.revision_writer
    patch = patch_of(fake_gitlab, tmp_path, EDITS["added"])
    first = writer.create_from_patch(item, "cpe/1-t", "T", "", patch)
    fake_gitlab.clear_requests()
    again = writer.update_from_patch(first.id, patch)
    assert again.head_sha == first.head_sha
    assert writes(fake_gitlab) == []


def test_a_patch_from_before_the_default_branch_moved_applies_three_way(
    fake_gitlab: FakeGitLab, provider: GitLabProvider, tmp_path: Path
) -> None:
    long_text = "".join(f"line {i}\n" for i in range(40))
    fake_gitlab.commit_to_default({"notes.txt": long_text}, "notes")
    patch = make_patch(
        fake_gitlab.git.path,
        tmp_path / "p",
        lambda r: r.write("notes.txt", long_text.replace("line 3\n", "line three\n")),
    )
    fake_gitlab.commit_to_default({"notes.txt": long_text.replace("line 30\n", "LINE 30\n")}, "x")
    item = provider.work_item_writer.create_work_item("T", "b")
    revision = provider.revision_writer.create_from_patch(item, "cpe/1-t", "T", "", patch)
    text = fake_gitlab.git.line("show", f"{revision.head_sha}:notes.txt")
    assert "line three" in text
    assert "LINE 30" in text


def test_a_patch_that_conflicts_with_the_moved_default_branch_is_refused(
    fake_gitlab: FakeGitLab, provider: GitLabProvider, tmp_path: Path
) -> None:
    patch = patch_of(fake_gitlab, tmp_path, EDITS["modified"])
    fake_gitlab.commit_to_default({"src/app.py": "def answer():\n    return 40\n"}, "theirs")
    item = provider.work_item_writer.create_work_item("T", "b")
    with pytest.raises(PatchError, match=r"src/app\.py"):
        provider.revision_writer.create_from_patch(item, "cpe/1-t", "T", "", patch)
    assert fake_gitlab.merge_requests == {}


def test_a_symbolic_link_is_refused_before_anything_is_written(
    fake_gitlab: FakeGitLab, provider: GitLabProvider, tmp_path: Path
) -> None:
    def link(repo: Repo) -> None:
        (repo.root / "latest").symlink_to("README.md")

    item = provider.work_item_writer.create_work_item("T", "b")
    fake_gitlab.clear_requests()
    with pytest.raises(PatchError, match="latest a symbolic link"):
        provider.revision_writer.create_from_patch(
            item, "cpe/1-t", "T", "", patch_of(fake_gitlab, tmp_path, link)
        )
    assert writes(fake_gitlab) == []


def test_a_commit_whose_answer_was_lost_is_found_on_the_branch_not_made_again(
    fake_gitlab: FakeGitLab, provider: GitLabProvider, tmp_path: Path
) -> None:
    fault = fake_gitlab.fail(Fault("POST", r"/repository/commits$", 502, apply_first=True))
    item = provider.work_item_writer.create_work_item("T", "b")
    revision = provider.revision_writer.create_from_patch(
        item,
        "cpe/1-t",
        "T",
        "",
        patch_of(fake_gitlab, tmp_path, EDITS["added"]),
        idempotency_key="create-revision:s1",
    )
    assert fault.hits == 1
    assert parents(fake_gitlab, revision.head_sha) == [fake_gitlab.default_head()]
    assert len(fake_gitlab.merge_requests) == 1


def test_a_merge_request_whose_answer_was_lost_is_found_by_its_key(
    fake_gitlab: FakeGitLab, provider: GitLabProvider, tmp_path: Path
) -> None:
    fault = fake_gitlab.fail(Fault("POST", r"/merge_requests$", 502, apply_first=True))
    item = provider.work_item_writer.create_work_item("T", "b")
    patch = patch_of(fake_gitlab, tmp_path, EDITS["added"])
    revision = provider.revision_writer.create_from_patch(
        item, "cpe/1-t", "T", "", patch, idempotency_key="create-revision:s1"
    )
    assert fault.hits == 1
    [mr] = fake_gitlab.merge_requests.values()
    assert str(mr.iid) == revision.id
    assert "<!-- cpe:key=create-revision:s1 -->" in (mr.description or "")


def test_a_retry_after_a_failure_between_the_commit_and_the_merge_request_reuses_the_commit(
    fake_gitlab: FakeGitLab, provider: GitLabProvider, tmp_path: Path
) -> None:
    """What a kill at ``gitlab.revision.after_commit`` leaves: the branch with its commit and
    no merge request. The retry opens the merge request on that commit, commits nothing."""
    fake_gitlab.fail(Fault("POST", r"/merge_requests$", 500))
    item = provider.work_item_writer.create_work_item("T", "b")
    patch = patch_of(fake_gitlab, tmp_path, EDITS["added"])
    writer = provider.revision_writer
    with pytest.raises(ProviderError):
        writer.create_from_patch(item, "cpe/1-t", "T", "", patch, idempotency_key="k1")
    made = fake_gitlab.git.line("rev-parse", "refs/heads/cpe/1-t")
    fake_gitlab.clear_requests()
    revision = writer.create_from_patch(item, "cpe/1-t", "T", "", patch, idempotency_key="k1")
    assert revision.head_sha == made
    assert writes(fake_gitlab) == [("POST", "merge_requests")]


def test_a_revision_is_built_on_the_runs_fork_point_where_gitlab_has_it(
    fake_gitlab: FakeGitLab, provider: GitLabProvider, tmp_path: Path
) -> None:
    fork = fake_gitlab.default_head()
    patch = patch_of(fake_gitlab, tmp_path, EDITS["added"])
    fake_gitlab.commit_to_default({"README.md": "# later\n"}, "later")
    item = provider.work_item_writer.create_work_item("T", "b")
    revision = provider.revision_writer.create_from_patch(
        item, "cpe/1-t", "T", "", patch, base_sha=fork
    )
    assert parents(fake_gitlab, revision.head_sha) == [fork]


def test_a_fork_point_gitlab_does_not_have_builds_on_the_default_head(
    fake_gitlab: FakeGitLab, provider: GitLabProvider, tmp_path: Path
) -> None:
    patch = patch_of(fake_gitlab, tmp_path, EDITS["added"])
    item = provider.work_item_writer.create_work_item("T", "b")
    revision = provider.revision_writer.create_from_patch(
        item, "cpe/1-t", "T", "", patch, base_sha="f" * 40
    )
    assert parents(fake_gitlab, revision.head_sha) == [fake_gitlab.default_head()]


def test_with_a_tracker_elsewhere_the_merge_request_names_its_item_by_the_marker(
    fake_gitlab: FakeGitLab, tmp_path: Path
) -> None:
    """The item is another system's ("ENG-12"): not looked up here, never "Closes #N" (that
    would close an unrelated issue of this project), and read back from the marker."""
    with gitlab_provider(fake_gitlab, roles=ProviderRoles(work_items=False)) as provider:
        assert provider.work_item_reader is None
        assert provider.revision_writer is not None
        assert provider.revision_reader is not None
        fake_gitlab.clear_requests()
        revision = provider.revision_writer.create_from_patch(
            WorkItemId("ENG-12"),
            "cpe/ENG-12-thing",
            "Thing",
            "Summary",
            patch_of(fake_gitlab, tmp_path, EDITS["added"]),
        )
        assert not any("/issues" in r.path for r in fake_gitlab.requests)
        description = fake_gitlab.merge_requests[int(revision.id)].description or ""
        assert "Closes" not in description
        assert "Work item: ENG-12" in description
        [listed] = provider.revision_reader.list_revisions()
        assert listed.work_item_id == "ENG-12"


def test_an_untrusted_authors_merge_request_naming_an_item_is_linked_to_none(
    fake_gitlab: FakeGitLab, provider: GitLabProvider
) -> None:
    """Anyone who can open a merge request could say "Closes #N" from a branch named like
    cpe's; only a trusted author's links an item (a linked one is reviewed and merged)."""
    one = provider.work_item_writer.create_work_item("One", "b")
    two = provider.work_item_writer.create_work_item("Two", "b")
    fake_gitlab.add_member("outsider", "developer")
    theirs = fake_gitlab.open_mr(
        f"cpe/{one}-x", {"x.txt": "x\n"}, "X", f"Closes #{one}", author="outsider"
    )
    fake_gitlab.add_member("outsider", "reporter")  # below Developer: not trusted
    teammates = fake_gitlab.open_mr(f"cpe/{two}-y", {"y.txt": "y\n"}, "Y", f"Closes #{two}")
    listed = {r.id: r for r in provider.revision_reader.list_revisions()}
    assert listed[str(theirs)].work_item_id is None
    assert listed[str(teammates)].work_item_id == two


def test_a_merge_request_into_another_branch_is_no_revision(
    fake_gitlab: FakeGitLab, provider: GitLabProvider
) -> None:
    fake_gitlab.git.set_ref("refs/heads/release", fake_gitlab.default_head())
    iid = fake_gitlab.open_mr("feature", {"f.txt": "f\n"}, "F", target="release")
    assert list(provider.revision_reader.list_revisions()) == []
    with pytest.raises(NotFoundError, match="release"):
        provider.revision_reader.get_revision_files(RevisionId(str(iid)))

"""The provider contract: one suite every work/revision provider passes (local and GitHub).

A provider's test module subclasses ``ProviderContract`` and supplies a ``harness`` fixture: the
provider's four port objects plus a git repository holding its commits (the user's repository
for the local provider; the fake server's bare repository for GitHub), whose default branch
starts with ``edits.BASE_FILES``. Patches and expected trees are made with plain git from that
repository, so the same assertions hold whatever builds the revisions. ``WorkItemContract`` is
the part that needs no git at all, for an in-memory fake.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Protocol

import pytest

from domain.errors import ConflictError, NotFoundError, PatchError
from domain.models import RevisionFile, RevisionId, WorkItemId
from domain.ports import (
    RevisionProviderReader,
    RevisionProviderWriter,
    WorkProviderReader,
    WorkProviderWriter,
)
from domain.results import AgentReview, AgentReviewComment
from tests.adapters.providers.edits import EDITS, Edit, every_edit
from tests.support.git import Content, Repo, git, make_patch, tree_from_git_apply


class WorkItemHarness(Protocol):
    work_item_reader: WorkProviderReader
    work_item_writer: WorkProviderWriter


class ProviderHarness(WorkItemHarness, Protocol):
    revision_reader: RevisionProviderReader
    revision_writer: RevisionProviderWriter
    default_branch: str
    git_dir: Path
    """A repository (checkout or bare) holding the provider's commits and default branch."""

    def commit_to_default(self, files: Mapping[str, Content | None], message: str) -> str:
        """Land a commit on the default branch as someone else would; its sha."""
        ...


_scratch_names = itertools.count()


class WorkItemContract:
    """Work items: needs only the two work item ports, so an in-memory fake can run it too."""

    def item(self, harness: WorkItemHarness, title: str = "Do the thing") -> WorkItemId:
        return harness.work_item_writer.create_work_item(title, "The body.", ("feature",))

    # ------------------------------------------------------------------ work items

    def test_created_work_item_is_listed_pending_with_its_fields(
        self, harness: WorkItemHarness
    ) -> None:
        blocker = self.item(harness, "First")
        item_id = harness.work_item_writer.create_work_item(
            "Second", "Body two", ("a", "b"), (blocker,)
        )
        items = {i.id: i for i in harness.work_item_reader.list_work_items()}
        item = items[item_id]
        assert (item.title, item.status, item.labels) == ("Second", "pending", ("a", "b"))
        assert item.blocked_by == (blocker,)
        assert item.linked_revision is None
        assert harness.work_item_reader.get_work_item_body(item_id) == "Body two"

    def test_same_idempotency_key_creates_one_work_item(self, harness: WorkItemHarness) -> None:
        writer = harness.work_item_writer
        first = writer.create_work_item("Once", "b", idempotency_key="plan:1:a")
        second = writer.create_work_item("Once", "b", idempotency_key="plan:1:a")
        other = writer.create_work_item("Once", "b", idempotency_key="plan:1:b")
        assert first == second != other
        titles = [i.title for i in harness.work_item_reader.list_work_items()]
        assert titles.count("Once") == 2

    def test_transition_status_changes_the_listed_status(self, harness: WorkItemHarness) -> None:
        item_id = self.item(harness)
        harness.work_item_writer.transition_status(item_id, "in-progress")
        harness.work_item_writer.transition_status(item_id, "needs-refinement")
        [item] = [i for i in harness.work_item_reader.list_work_items() if i.id == item_id]
        assert item.status == "needs-refinement"

    def test_update_work_item_replaces_only_what_is_given(self, harness: WorkItemHarness) -> None:
        item_id = self.item(harness)
        harness.work_item_writer.update_work_item(item_id, body="New body")
        harness.work_item_writer.update_work_item(item_id, labels=["x"])
        [item] = [i for i in harness.work_item_reader.list_work_items() if i.id == item_id]
        assert item.labels == ("x",)
        assert harness.work_item_reader.get_work_item_body(item_id) == "New body"

    def test_closed_work_item_is_done(self, harness: WorkItemHarness) -> None:
        item_id = self.item(harness)
        harness.work_item_writer.close_work_item(item_id)
        [item] = [i for i in harness.work_item_reader.list_work_items() if i.id == item_id]
        assert item.status == "done"

    @pytest.mark.parametrize("operation", ["body", "update", "close", "transition"])
    def test_unknown_work_item_raises_not_found(
        self, harness: WorkItemHarness, operation: str
    ) -> None:
        missing = WorkItemId("987654")
        calls: dict[str, Callable[[], object]] = {
            "body": lambda: harness.work_item_reader.get_work_item_body(missing),
            "update": lambda: harness.work_item_writer.update_work_item(missing, body="x"),
            "close": lambda: harness.work_item_writer.close_work_item(missing),
            "transition": lambda: harness.work_item_writer.transition_status(missing, "done"),
        }
        with pytest.raises(NotFoundError):
            calls[operation]()


class RevisionContract(WorkItemContract):
    """Revisions from patches, reviews and merges, checked with git against ``git_dir``."""

    def patch(self, harness: ProviderHarness, tmp_path: Path, edit: Edit) -> str:
        scratch = tmp_path / f"patch-{next(_scratch_names)}"
        return make_patch(harness.git_dir, scratch, edit, harness.default_branch)

    def default_head(self, harness: ProviderHarness) -> str:
        return git(harness.git_dir, "rev-parse", f"refs/heads/{harness.default_branch}")

    def tree(self, harness: ProviderHarness, rev: str) -> str:
        return git(harness.git_dir, "rev-parse", f"{rev}^{{tree}}")

    def files(self, harness: ProviderHarness, revision_id: RevisionId) -> dict[str, RevisionFile]:
        return {f.path: f for f in harness.revision_reader.get_revision_files(revision_id)}

    # ------------------------------------------------------------------ revisions from patches

    def test_create_from_patch_opens_a_revision_on_the_default_head(
        self, harness: ProviderHarness, tmp_path: Path
    ) -> None:
        item_id = self.item(harness)
        base = self.default_head(harness)
        patch = self.patch(harness, tmp_path, EDITS["modified"])
        revision = harness.revision_writer.create_from_patch(
            item_id, "cpe/1-do-the-thing", "Do the thing", "Summary", patch
        )
        assert (revision.state, revision.branch, revision.work_item_id) == (
            "open",
            "cpe/1-do-the-thing",
            item_id,
        )
        assert git(harness.git_dir, "rev-parse", f"{revision.head_sha}^") == base
        assert git(harness.git_dir, "rev-parse", "refs/heads/cpe/1-do-the-thing") == (
            revision.head_sha
        )
        assert revision.reviewed_sha is None
        assert [r.id for r in harness.revision_reader.list_revisions()] == [revision.id]
        [item] = harness.work_item_reader.list_work_items()
        assert item.linked_revision == revision.id
        assert self.default_head(harness) == base  # nothing lands before a merge

    @pytest.mark.parametrize("kind", list(EDITS))
    def test_revision_tree_equals_what_git_apply_makes(
        self, harness: ProviderHarness, tmp_path: Path, kind: str
    ) -> None:
        patch = self.patch(harness, tmp_path, EDITS[kind])
        expected = tree_from_git_apply(
            harness.git_dir, tmp_path / "reference", patch, self.default_head(harness)
        )
        revision = harness.revision_writer.create_from_patch(
            self.item(harness), f"cpe/{kind}", kind, "", patch
        )
        assert self.tree(harness, revision.head_sha) == expected

    def test_revision_files_report_status_and_hunks(
        self, harness: ProviderHarness, tmp_path: Path
    ) -> None:
        patch = self.patch(harness, tmp_path, every_edit)
        revision = harness.revision_writer.create_from_patch(
            self.item(harness), "cpe/all", "All", "", patch
        )
        files = self.files(harness, revision.id)
        statuses = {path: f.status for path, f in files.items()}
        assert statuses == {
            "src/added.py": "added",
            "src/app.py": "modified",
            "docs/obsolete.txt": "removed",
            "src/new_name.py": "renamed",
            "src/modern.py": "renamed",
            "assets/logo.bin": "modified",
            "assets/new.bin": "added",
            "scripts/run.sh": "modified",
            "data/windows.txt": "modified",
        }
        app = files["src/app.py"].patch
        assert app is not None
        assert app.startswith("@@")
        assert "-    return 41" in app
        assert "+    return 42" in app
        assert files["assets/logo.bin"].patch is None
        assert files["assets/new.bin"].patch is None
        crlf = files["data/windows.txt"].patch
        assert crlf is not None
        assert "+TWO\r" in crlf

    def test_patch_that_does_not_apply_raises_patch_error(
        self, harness: ProviderHarness, tmp_path: Path
    ) -> None:
        patch = self.patch(harness, tmp_path, EDITS["modified"])
        harness.commit_to_default({"src/app.py": "something else entirely\n"}, "rewrite app")
        with pytest.raises(PatchError):
            harness.revision_writer.create_from_patch(
                self.item(harness), "cpe/stale", "Stale", "", patch
            )
        assert list(harness.revision_reader.list_revisions()) == []

    def test_same_idempotency_key_creates_one_revision(
        self, harness: ProviderHarness, tmp_path: Path
    ) -> None:
        item_id = self.item(harness)
        patch = self.patch(harness, tmp_path, EDITS["added"])
        writer = harness.revision_writer
        first = writer.create_from_patch(
            item_id, "cpe/once", "Once", "", patch, idempotency_key="create-revision:s1"
        )
        second = writer.create_from_patch(
            item_id, "cpe/once", "Once", "", patch, idempotency_key="create-revision:s1"
        )
        assert second == first
        assert len(harness.revision_reader.list_revisions()) == 1

    def test_create_for_a_branch_with_an_open_revision_updates_it(
        self, harness: ProviderHarness, tmp_path: Path
    ) -> None:
        item_id = self.item(harness)
        writer = harness.revision_writer
        first = writer.create_from_patch(
            item_id, "cpe/again", "T", "", self.patch(harness, tmp_path, EDITS["added"])
        )
        second = writer.create_from_patch(
            item_id, "cpe/again", "T", "", self.patch(harness, tmp_path, EDITS["modified"])
        )
        assert second.id == first.id
        assert second.head_sha != first.head_sha
        assert len(harness.revision_reader.list_revisions()) == 1
        assert set(self.files(harness, second.id)) == {"src/app.py"}

    def test_update_from_patch_commits_the_full_patch_on_top_of_the_head(
        self, harness: ProviderHarness, tmp_path: Path
    ) -> None:
        writer = harness.revision_writer
        first = writer.create_from_patch(
            self.item(harness), "cpe/up", "T", "", self.patch(harness, tmp_path, EDITS["added"])
        )

        def added_and_modified(repo: Repo) -> None:
            EDITS["added"](repo)
            EDITS["modified"](repo)

        patch = self.patch(harness, tmp_path, added_and_modified)
        updated = writer.update_from_patch(first.id, patch)
        assert updated.id == first.id
        assert git(harness.git_dir, "rev-parse", f"{updated.head_sha}^1") == first.head_sha
        expected = tree_from_git_apply(
            harness.git_dir, tmp_path / "reference", patch, self.default_head(harness)
        )
        assert self.tree(harness, updated.head_sha) == expected
        assert set(self.files(harness, first.id)) == {"src/added.py", "src/app.py"}
        [listed] = harness.revision_reader.list_revisions()
        assert listed.head_sha == updated.head_sha

    def test_update_with_a_seen_key_is_applied_once(
        self, harness: ProviderHarness, tmp_path: Path
    ) -> None:
        writer = harness.revision_writer
        first = writer.create_from_patch(
            self.item(harness), "cpe/k", "T", "", self.patch(harness, tmp_path, EDITS["added"])
        )
        patch = self.patch(harness, tmp_path, EDITS["modified"])
        once = writer.update_from_patch(first.id, patch, idempotency_key="update-revision:s2")
        twice = writer.update_from_patch(first.id, patch, idempotency_key="update-revision:s2")
        assert twice.head_sha == once.head_sha

    # ------------------------------------------------------------------ reviews

    def test_posted_review_sets_reviewed_sha_and_joins_the_history(
        self, harness: ProviderHarness, tmp_path: Path
    ) -> None:
        revision = harness.revision_writer.create_from_patch(
            self.item(harness), "cpe/rv", "T", "", self.patch(harness, tmp_path, EDITS["modified"])
        )
        review = AgentReview(
            verdict="needs-changes",
            summary="Return the right answer.",
            comments=(AgentReviewComment(path="src/app.py", line=2, body="Off by one."),),
        )
        harness.revision_writer.post_review(revision.id, revision.head_sha, review)
        [listed] = harness.revision_reader.list_revisions()
        assert listed.reviewed_sha == revision.head_sha
        history = harness.revision_reader.get_review_history(revision.id)
        [submitted] = history.reviews
        assert "Return the right answer." in submitted.body
        [comment] = history.inline_comments
        assert (comment.path, comment.line, comment.body) == ("src/app.py", 2, "Off by one.")

    def test_posting_a_review_again_with_its_key_adds_nothing(
        self, harness: ProviderHarness, tmp_path: Path
    ) -> None:
        """A retry of a review whose answer was lost (or made before a crash) with its key."""
        revision = harness.revision_writer.create_from_patch(
            self.item(harness), "cpe/rk", "T", "", self.patch(harness, tmp_path, EDITS["modified"])
        )
        review = AgentReview(
            verdict="approve",
            summary="Fine.",
            comments=(AgentReviewComment(path="src/app.py", line=2, body="Nice."),),
        )
        for _ in range(2):
            harness.revision_writer.post_review(
                revision.id, revision.head_sha, review, idempotency_key="post-review:s9"
            )
        history = harness.revision_reader.get_review_history(revision.id)
        assert len(history.reviews) == 1
        assert len(history.inline_comments) == 1

    # ------------------------------------------------------------------ merge

    def test_merge_lands_the_revision_on_the_default_branch(
        self, harness: ProviderHarness, tmp_path: Path
    ) -> None:
        base = self.default_head(harness)
        revision = harness.revision_writer.create_from_patch(
            self.item(harness), "cpe/m", "T", "", self.patch(harness, tmp_path, every_edit)
        )
        merge_sha = harness.revision_writer.merge(revision.id)
        assert self.default_head(harness) == merge_sha
        assert (
            git(harness.git_dir, "merge-base", "--is-ancestor", revision.head_sha, merge_sha) == ""
        )
        assert git(harness.git_dir, "merge-base", "--is-ancestor", base, merge_sha) == ""
        assert self.tree(harness, merge_sha) == self.tree(harness, revision.head_sha)
        [listed] = harness.revision_reader.list_revisions()
        assert listed.state == "merged"
        assert {f.path for f in harness.revision_reader.get_revision_files(revision.id)} >= {
            "src/added.py",
            "src/app.py",
        }

    def test_merging_a_merged_revision_returns_the_same_commit(
        self, harness: ProviderHarness, tmp_path: Path
    ) -> None:
        revision = harness.revision_writer.create_from_patch(
            self.item(harness), "cpe/m2", "T", "", self.patch(harness, tmp_path, EDITS["added"])
        )
        first = harness.revision_writer.merge(revision.id)
        assert harness.revision_writer.merge(revision.id) == first
        assert self.default_head(harness) == first

    def test_merge_after_the_default_branch_moved_keeps_both_changes(
        self, harness: ProviderHarness, tmp_path: Path
    ) -> None:
        revision = harness.revision_writer.create_from_patch(
            self.item(harness), "cpe/m3", "T", "", self.patch(harness, tmp_path, EDITS["added"])
        )
        moved = harness.commit_to_default({"README.md": "# Renamed project\n"}, "readme")
        merge_sha = harness.revision_writer.merge(revision.id)
        assert git(harness.git_dir, "rev-parse", f"{merge_sha}^1") == moved
        assert git(harness.git_dir, "show", f"{merge_sha}:README.md") == "# Renamed project"
        assert git(harness.git_dir, "show", f"{merge_sha}:src/added.py") == "print('new')"

    def test_merge_conflict_raises_and_changes_nothing(
        self, harness: ProviderHarness, tmp_path: Path
    ) -> None:
        revision = harness.revision_writer.create_from_patch(
            self.item(harness), "cpe/c", "T", "", self.patch(harness, tmp_path, EDITS["modified"])
        )
        moved = harness.commit_to_default(
            {"src/app.py": "def answer():\n    return 40\n"}, "someone else's answer"
        )
        with pytest.raises(ConflictError, match=r"src/app\.py"):
            harness.revision_writer.merge(revision.id)
        assert self.default_head(harness) == moved
        [listed] = harness.revision_reader.list_revisions()
        assert (listed.state, listed.head_sha) == ("open", revision.head_sha)

    @pytest.mark.parametrize("operation", ["files", "history", "update", "review", "merge"])
    def test_unknown_revision_raises_not_found(
        self, harness: ProviderHarness, operation: str
    ) -> None:
        missing = RevisionId("987654")
        review = AgentReview(verdict="approve", summary="ok")
        calls: dict[str, Callable[[], object]] = {
            "files": lambda: harness.revision_reader.get_revision_files(missing),
            "history": lambda: harness.revision_reader.get_review_history(missing),
            "update": lambda: harness.revision_writer.update_from_patch(missing, "diff"),
            "review": lambda: harness.revision_writer.post_review(missing, "0" * 40, review),
            "merge": lambda: harness.revision_writer.merge(missing),
        }
        with pytest.raises(NotFoundError):
            calls[operation]()


class ProviderContract(RevisionContract):
    """Everything a provider owes the engine. Subclasses provide the ``harness`` fixture."""

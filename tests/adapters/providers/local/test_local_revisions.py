"""What only the local provider promises: the user's checkout is never disturbed by a revision,
merges treat a checked-out default branch the way ``git pull`` would, revision heads survive
their branch being deleted, and state survives a restart."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from adapters.providers.local import LocalProvider, create_local_provider
from adapters.providers.local.db import SCHEMA_VERSION
from adapters.providers.local.provider import DATABASE_NAME
from adapters.providers.specs import GitSpecReader
from domain.errors import (
    ConflictError,
    MergeWaitError,
    NotFoundError,
    PatchError,
    ProviderError,
)
from domain.models import Revision, WorkItemId
from domain.ports import (
    RevisionProviderReader,
    RevisionProviderWriter,
    SpecProviderReader,
    WorkProviderReader,
    WorkProviderWriter,
)
from domain.results import AgentReview
from tests.adapters.providers.edits import BASE_FILES, EDITS, Edit
from tests.support.git import Repo, isolate_git, make_patch


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Repo:
    isolate_git(monkeypatch)
    return Repo.create(tmp_path / "repo", BASE_FILES)


@pytest.fixture
def provider(repo: Repo, tmp_path: Path) -> Iterator[LocalProvider]:
    with LocalProvider(repo.root, tmp_path / "state") as local:
        yield local


class Helper:
    def __init__(self, repo: Repo, provider: LocalProvider, tmp_path: Path) -> None:
        self.repo, self.provider, self.tmp_path = repo, provider, tmp_path
        self._count = 0

    def patch(self, edit: Edit, branch: str = "main") -> str:
        self._count += 1
        return make_patch(self.repo.root, self.tmp_path / f"p{self._count}", edit, branch)

    def revision(self, edit: Edit, branch: str = "cpe/1-thing") -> Revision:
        item = self.provider.work_item_writer.create_work_item("Thing", "Body")
        return self.provider.revision_writer.create_from_patch(
            item, branch, "Thing", "Body", self.patch(edit)
        )


@pytest.fixture
def helper(repo: Repo, provider: LocalProvider, tmp_path: Path) -> Helper:
    return Helper(repo, provider, tmp_path)


def make_dirty(repo: Repo) -> None:
    repo.write("README.md", "# staged edit\n")
    repo.git("add", "README.md")
    repo.write("src/app.py", "def answer():\n    return 0  # unstaged edit\n")
    repo.write("scratch.txt", "untracked\n")


# ------------------------------------------------------------------ the user's checkout


def test_revision_writes_leave_a_dirty_checkout_untouched(repo: Repo, helper: Helper) -> None:
    make_dirty(repo)
    before = (repo.head(), repo.status(), (repo.root / "src/app.py").read_bytes())
    revision = helper.revision(EDITS["modified"])
    writer = helper.provider.revision_writer
    updated = writer.update_from_patch(revision.id, helper.patch(EDITS["added"]))
    writer.post_review(updated.id, updated.head_sha, AgentReview(verdict="approve", summary="ok"))
    helper.provider.revision_reader.get_revision_files(revision.id)
    assert (repo.head(), repo.status(), (repo.root / "src/app.py").read_bytes()) == before


def test_merge_fast_forwards_a_clean_checked_out_default_branch(repo: Repo, helper: Helper) -> None:
    revision = helper.revision(EDITS["modified"])
    merge_sha = helper.provider.revision_writer.merge(revision.id)
    assert repo.git("symbolic-ref", "--short", "HEAD") == "main"
    assert repo.head() == merge_sha
    assert repo.git("status", "--porcelain", "--untracked-files=all") == ""
    assert (repo.root / "src/app.py").read_text() == "def answer():\n    return 42\n"


def test_merge_keeps_local_edits_the_merge_does_not_touch(repo: Repo, helper: Helper) -> None:
    revision = helper.revision(EDITS["added"])
    repo.write("README.md", "# my local edit\n")
    merge_sha = helper.provider.revision_writer.merge(revision.id)
    assert repo.head() == merge_sha
    assert (repo.root / "README.md").read_text() == "# my local edit\n"
    assert (repo.root / "src/added.py").is_file()


def test_merge_waits_while_local_edits_are_in_its_way_changing_nothing_then_goes_through(
    repo: Repo, helper: Helper
) -> None:
    """Not the revision's fault: the merge waits (tried again on every poll) with git's reason,
    and goes through once the person's edit is out of the way."""
    revision = helper.revision(EDITS["modified"])
    mine = "def answer():\n    return 0  # mine\n"
    repo.write("src/app.py", mine)
    before = (repo.head(), repo.status())
    with pytest.raises(MergeWaitError, match=r"src/app\.py") as waiting:
        helper.provider.revision_writer.merge(revision.id)
    assert "in the way" in waiting.value.reason
    assert "src/app.py" in waiting.value.reason
    assert (repo.head(), repo.status()) == before
    [listed] = helper.provider.revision_reader.list_revisions()
    assert listed.state == "open"
    repo.git("checkout", "--", "src/app.py")
    merge_sha = helper.provider.revision_writer.merge(revision.id)
    assert repo.head("main") == merge_sha


def test_merge_moves_a_default_branch_that_is_not_checked_out_by_ref_only(
    repo: Repo, helper: Helper
) -> None:
    revision = helper.revision(EDITS["modified"])
    repo.git("checkout", "--quiet", "-b", "feature")
    make_dirty(repo)
    before = (repo.head(), repo.status())
    merge_sha = helper.provider.revision_writer.merge(revision.id)
    assert repo.head("main") == merge_sha
    assert (repo.head(), repo.status()) == before


def test_merge_of_a_revision_merged_by_hand_finds_that_merge(repo: Repo, helper: Helper) -> None:
    revision = helper.revision(EDITS["added"])
    repo.git("merge", "--quiet", "--no-ff", "-m", "by hand", revision.branch)
    by_hand = repo.head()
    assert helper.provider.revision_writer.merge(revision.id) == by_hand
    [listed] = helper.provider.revision_reader.list_revisions()
    assert listed.state == "merged"
    files = helper.provider.revision_reader.get_revision_files(revision.id)
    assert [f.path for f in files] == ["src/added.py"]


# ------------------------------------------------------------------ branches and heads


def test_update_after_the_default_branch_moved_shows_only_the_patch(
    repo: Repo, helper: Helper
) -> None:
    revision = helper.revision(EDITS["added"])
    moved = repo.commit("readme", {"README.md": "# moved on\n"})
    updated = helper.provider.revision_writer.update_from_patch(
        revision.id, helper.patch(EDITS["modified"])
    )
    assert repo.parents(updated.head_sha) == [revision.head_sha, moved]
    files = helper.provider.revision_reader.get_revision_files(revision.id)
    assert [f.path for f in files] == ["src/app.py"]


def test_a_patch_from_before_the_default_branch_moved_applies_three_way(
    repo: Repo, helper: Helper
) -> None:
    lines = [f"line {i}\n" for i in range(12)]
    repo.commit("numbers", {"numbers.txt": "".join(lines)})

    def change_line_6(work: Repo) -> None:
        work.write("numbers.txt", "".join([*lines[:6], "line six\n", *lines[7:]]))

    patch = helper.patch(change_line_6)
    # Line 4 is context of the patch's hunk: a plain apply now fails, a three-way one merges.
    repo.commit("line 4", {"numbers.txt": "".join([*lines[:4], "line four\n", *lines[5:]])})
    item = helper.provider.work_item_writer.create_work_item("T", "B")
    revision = helper.provider.revision_writer.create_from_patch(item, "cpe/3way", "T", "", patch)
    merged = repo.show(revision.head_sha, "numbers.txt").decode()
    assert "line four\n" in merged
    assert "line six\n" in merged


def test_update_with_an_unchanged_patch_makes_no_commit(helper: Helper) -> None:
    revision = helper.revision(EDITS["added"])
    again = helper.provider.revision_writer.update_from_patch(
        revision.id, helper.patch(EDITS["added"])
    )
    assert again.head_sha == revision.head_sha


def test_a_revision_survives_its_branch_being_deleted(repo: Repo, helper: Helper) -> None:
    revision = helper.revision(EDITS["modified"])
    repo.git("branch", "-D", revision.branch)  # what the runtime's worktree cleanup does
    files = helper.provider.revision_reader.get_revision_files(revision.id)
    assert [f.path for f in files] == ["src/app.py"]
    updated = helper.provider.revision_writer.update_from_patch(
        revision.id, helper.patch(EDITS["added"])
    )
    assert repo.head(revision.branch) == updated.head_sha  # published again
    assert repo.head(f"refs/cpe/revisions/{revision.id}") == updated.head_sha


def test_a_checked_out_revision_branch_is_not_moved(
    repo: Repo, helper: Helper, tmp_path: Path
) -> None:
    revision = helper.revision(EDITS["modified"])
    other = tmp_path / "other-checkout"
    repo.git("worktree", "add", "--quiet", str(other), revision.branch)
    updated = helper.provider.revision_writer.update_from_patch(
        revision.id, helper.patch(EDITS["added"])
    )
    assert updated.head_sha != revision.head_sha
    assert repo.head(revision.branch) == revision.head_sha
    assert Repo(other).git("status", "--porcelain") == ""


# ------------------------------------------------------------------ refused writes


def test_create_for_an_unknown_work_item_raises_not_found(helper: Helper) -> None:
    with pytest.raises(NotFoundError):
        helper.provider.revision_writer.create_from_patch(
            WorkItemId("404"), "cpe/x", "T", "", helper.patch(EDITS["added"])
        )


def test_create_on_a_branch_holding_another_items_revision_conflicts(helper: Helper) -> None:
    helper.revision(EDITS["added"], branch="cpe/shared")
    with pytest.raises(ConflictError, match="cpe/shared"):
        helper.revision(EDITS["modified"], branch="cpe/shared")


def test_invalid_branch_name_is_refused(helper: Helper) -> None:
    with pytest.raises(ProviderError, match="branch name"):
        helper.revision(EDITS["added"], branch="cpe/bad..name")


def test_empty_patch_raises_patch_error(helper: Helper) -> None:
    item = helper.provider.work_item_writer.create_work_item("T", "B")
    with pytest.raises(PatchError, match="empty"):
        helper.provider.revision_writer.create_from_patch(item, "cpe/e", "T", "", "")


def test_a_merged_revision_cannot_be_updated(helper: Helper) -> None:
    revision = helper.revision(EDITS["added"])
    helper.provider.revision_writer.merge(revision.id)
    with pytest.raises(ConflictError, match="merged"):
        helper.provider.revision_writer.update_from_patch(
            revision.id, helper.patch(EDITS["modified"])
        )


def test_racing_creates_with_one_key_make_one_revision(helper: Helper) -> None:
    item = helper.provider.work_item_writer.create_work_item("T", "B")
    patch = helper.patch(EDITS["added"])
    start = threading.Barrier(2, timeout=30)

    def create() -> Revision:
        start.wait()
        return helper.provider.revision_writer.create_from_patch(
            item, "cpe/race", "T", "", patch, idempotency_key="create-revision:race"
        )

    with ThreadPoolExecutor(2) as pool:
        first, second = [f.result(timeout=60) for f in [pool.submit(create) for _ in range(2)]]
    assert first.id == second.id
    assert len(helper.provider.revision_reader.list_revisions()) == 1


# ------------------------------------------------------------------ construction and persistence


def test_create_local_provider_gives_one_object_per_port(repo: Repo, tmp_path: Path) -> None:
    repo.commit("a spec", {"specs/feature.md": "# Feature\n"})
    specs = GitSpecReader(repo.root)
    provider, interfaces = create_local_provider(repo.root, tmp_path / "state", specs)
    with provider:
        assert isinstance(interfaces.work_item_reader, WorkProviderReader)
        assert isinstance(interfaces.work_item_writer, WorkProviderWriter)
        assert isinstance(interfaces.revision_reader, RevisionProviderReader)
        assert isinstance(interfaces.revision_writer, RevisionProviderWriter)
        assert isinstance(interfaces.spec_reader, SpecProviderReader)
        # A reader can only read and a writer only write (S002-15).
        assert not hasattr(interfaces.work_item_reader, "create_work_item")
        assert not hasattr(interfaces.work_item_writer, "list_work_items")
        assert not hasattr(interfaces.revision_reader, "merge")
        assert not hasattr(interfaces.revision_writer, "list_revisions")
        assert [s.path for s in interfaces.spec_reader.list_specs()] == ["specs/feature.md"]


def test_state_survives_a_restart(repo: Repo, tmp_path: Path) -> None:
    state = tmp_path / "state"
    with LocalProvider(repo.root, state) as first:
        item = first.work_item_writer.create_work_item("Kept", "B", idempotency_key="k")
        make = Helper(repo, first, tmp_path)
        revision = first.revision_writer.create_from_patch(
            item, "cpe/kept", "Kept", "", make.patch(EDITS["added"])
        )
    with LocalProvider(repo.root, state) as second:
        assert second.work_item_writer.create_work_item("Kept", "B", idempotency_key="k") == item
        assert [r.id for r in second.revision_reader.list_revisions()] == [revision.id]
    with sqlite3.connect(state / DATABASE_NAME) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_a_database_from_a_newer_cpe_is_refused(repo: Repo, tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir()
    with sqlite3.connect(state / DATABASE_NAME) as conn:
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    with pytest.raises(ProviderError, match="newer cpe"):
        LocalProvider(repo.root, state)


def test_default_branch_is_detected(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    isolate_git(monkeypatch)
    trunk = Repo.create(tmp_path / "trunk", {"a.txt": "a\n"}, branch="trunk")
    trunk.git("checkout", "--quiet", "-b", "feature")
    monkeypatch.setenv("GIT_CONFIG_COUNT", "1")
    monkeypatch.setenv("GIT_CONFIG_KEY_0", "init.defaultBranch")
    monkeypatch.setenv("GIT_CONFIG_VALUE_0", "trunk")
    with LocalProvider(trunk.root, tmp_path / "state") as provider:
        assert provider.default_branch == "trunk"


def test_missing_default_branch_fails_at_start(repo: Repo, tmp_path: Path) -> None:
    with pytest.raises(NotFoundError, match="nope"):
        LocalProvider(repo.root, tmp_path / "state", default_branch="nope")


def test_a_directory_that_is_not_a_repository_is_refused(tmp_path: Path) -> None:
    with pytest.raises(NotFoundError, match="not inside a git working tree"):
        LocalProvider(tmp_path, tmp_path / "state")

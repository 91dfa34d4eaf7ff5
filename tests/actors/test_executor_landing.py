"""The executor's merge queue writes against the real local provider (a git repository in
tmp_path): bringing a revision up to date, landing it only on the base it was tested on, and
the refusals the queue acts on (a conflict, a moved default branch, a patch that no longer
applies)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from actors.executor import CommandExecutor
from actors.journal import Journal
from actors.queue import Inbox
from actors.session_registry import SessionManager
from actors.settings import RetrySettings
from adapters.providers.local.provider import LocalProvider
from domain.commands import (
    CreateRevision,
    EngineCommand,
    MergeRevision,
    TransitionStatus,
    UpdateBranch,
)
from domain.events import (
    BranchUpdated,
    EngineEvent,
    LandingRefused,
    RevisionMerged,
    StatusTransitioned,
)
from domain.models import EngineState, Revision, SentBack
from domain.policy import AllowAll
from tests.support.git import git_raw, make_repo


class Rig:
    def __init__(self, tmp_path: Path) -> None:
        self.repo = make_repo(tmp_path / "repo", {"app.py": "GREETING = 'hello'\n"})
        self.provider = LocalProvider(self.repo, tmp_path / "state", "main")
        self.journal = Journal(tmp_path / "journal.sqlite3")
        self.item = self.provider.work_item_writer.create_work_item("Greet", "Greet.")
        self.executor = CommandExecutor(
            work_item_writer=self.provider.work_item_writer,
            revision_writer=self.provider.revision_writer,
            policy=AllowAll(),
            journal=self.journal,
            inbox=Inbox(self.journal),
            sessions=SessionManager(),
            spawn_session=lambda sid, params: None,
            max_concurrent={"implementor": 1},
            retry=RetrySettings(attempts=1),
        )

    def patch(self, files: dict[str, str]) -> str:
        """The diff of ``files`` written on main's head (the working tree is put back)."""
        for name, text in files.items():
            (self.repo / name).write_text(text)
        git_raw(self.repo, "add", "-N", ".")
        diff = git_raw(self.repo, "diff", "--full-index", "--binary", "HEAD")
        git_raw(self.repo, "reset", "-q")
        git_raw(self.repo, "checkout", "-q", "--", ".")
        git_raw(self.repo, "clean", "-qfd")
        return diff

    def commit_to_main(self, files: dict[str, str], message: str) -> str:
        for name, text in files.items():
            (self.repo / name).write_text(text)
        git_raw(self.repo, "add", "-A")
        git_raw(self.repo, "commit", "-qm", message)
        return self.head()

    def head(self, ref: str = "main") -> str:
        return git_raw(self.repo, "rev-parse", ref).strip()

    def revision(self, files: dict[str, str]) -> Revision:
        return self.provider.revision_writer.create_from_patch(
            self.item, f"cpe/{self.item}-x", "Greet", "", self.patch(files)
        )

    def run(self, command: EngineCommand) -> list[EngineEvent]:
        return self.executor.execute(command, EngineState())


@pytest.fixture
def rig(tmp_path: Path) -> Iterator[Rig]:
    made = Rig(tmp_path)
    yield made
    made.provider.close()
    made.journal.close()


def test_update_branch_merges_the_default_head_into_a_revision_behind_it(rig: Rig) -> None:
    revision = rig.revision({"app.py": "GREETING = 'hello'\nNAME = 'x'\n"})
    base = rig.commit_to_main({"other.py": "X = 1\n"}, "someone else's change")
    [updated] = rig.run(UpdateBranch(work_item_id=rig.item, revision_id=revision.id,
                                     head_sha=revision.head_sha))  # fmt: skip
    assert isinstance(updated, BranchUpdated)
    assert updated.base_sha == base
    head = updated.revision.head_sha
    assert head != revision.head_sha
    assert git_raw(rig.repo, "merge-base", "--is-ancestor", base, head) == ""
    assert git_raw(rig.repo, "show", f"{head}:other.py") == "X = 1\n"


def test_update_branch_of_an_up_to_date_revision_changes_nothing(rig: Rig) -> None:
    revision = rig.revision({"app.py": "GREETING = 'hi'\n"})
    [updated] = rig.run(UpdateBranch(work_item_id=rig.item, revision_id=revision.id,
                                     head_sha=revision.head_sha))  # fmt: skip
    assert isinstance(updated, BranchUpdated)
    assert updated.revision.head_sha == revision.head_sha
    assert updated.base_sha == rig.head()


def test_a_conflicting_update_is_refused_with_the_files_and_hunks_and_changes_nothing(
    rig: Rig,
) -> None:
    revision = rig.revision({"app.py": "GREETING = 'hi'\n"})
    main = rig.commit_to_main({"app.py": "GREETING = 'bonjour'\n"}, "the other landing")
    command = UpdateBranch(
        work_item_id=rig.item, revision_id=revision.id, head_sha=revision.head_sha
    )
    [refused] = rig.run(command)
    assert isinstance(refused, LandingRefused)
    assert (refused.kind, refused.files) == ("conflict", ("app.py",))
    assert "<<<<<<<" in refused.detail
    assert "bonjour" in refused.detail
    assert "hi" in refused.detail
    assert rig.head(f"cpe/{rig.item}-x") == revision.head_sha
    assert rig.head() == main
    # Asked again before that answer is processed: the same answer, from the journal.
    assert rig.run(command) == [refused]


def test_a_merge_lands_the_tested_tree_on_the_base_it_was_tested_on(rig: Rig) -> None:
    revision = rig.revision({"app.py": "GREETING = 'hi'\n"})
    base = rig.commit_to_main({"other.py": "X = 1\n"}, "moved")
    [updated] = rig.run(UpdateBranch(work_item_id=rig.item, revision_id=revision.id,
                                     head_sha=revision.head_sha))  # fmt: skip
    assert isinstance(updated, BranchUpdated)
    tested = updated.revision.head_sha
    [merged] = rig.run(MergeRevision(work_item_id=rig.item, revision_id=revision.id,
                                     expected_base=base, head_sha=tested))  # fmt: skip
    assert isinstance(merged, RevisionMerged)
    assert rig.head() == merged.merge_sha
    assert rig.head("main^1") == base
    assert rig.head("main^{tree}") == rig.head(f"{tested}^{{tree}}")


def test_a_merge_whose_base_moved_is_refused_as_moved_and_changes_nothing(rig: Rig) -> None:
    revision = rig.revision({"app.py": "GREETING = 'hi'\n"})
    tested_on = rig.head()
    moved = rig.commit_to_main({"other.py": "X = 1\n"}, "a person's push")
    merge = MergeRevision(
        work_item_id=rig.item,
        revision_id=revision.id,
        expected_base=tested_on,
        head_sha=revision.head_sha,
    )
    [refused] = rig.run(merge)
    assert isinstance(refused, LandingRefused)
    assert refused.kind == "moved"
    assert rig.head() == moved
    [listed] = rig.provider.revision_reader.list_revisions()
    assert listed.state == "open"


def test_a_run_patch_that_conflicts_with_the_default_branch_is_a_refusal_of_its_run(
    rig: Rig,
) -> None:
    patch = rig.patch({"app.py": "GREETING = 'hi'\n"})
    rig.commit_to_main({"app.py": "GREETING = 'bonjour'\n"}, "landed meanwhile")
    create = CreateRevision(
        session_id="implementor-1", work_item_id=rig.item, branch_name="cpe/x", title="T",
        body="", patch=patch,
    )  # fmt: skip
    [refused] = rig.run(create)
    assert isinstance(refused, LandingRefused)
    assert (refused.session_id, refused.revision_id, refused.files) == (
        "implementor-1",
        None,
        ("app.py",),
    )
    assert "<<<<<<<" in refused.detail
    assert list(rig.provider.revision_reader.list_revisions()) == []


def test_a_revision_is_built_on_the_run_fork_point_it_is_given(rig: Rig) -> None:
    fork = rig.head()
    patch = rig.patch({"app.py": "GREETING = 'hi'\n"})
    rig.commit_to_main({"app.py": "GREETING = 'bonjour'\n"}, "landed meanwhile")
    create = CreateRevision(
        session_id="implementor-1", work_item_id=rig.item, branch_name="cpe/x", title="T",
        body="", patch=patch, base_sha=fork,
    )  # fmt: skip
    [created] = rig.run(create)
    head = created.revision.head_sha  # type: ignore[attr-defined]
    assert rig.head(f"{head}^1") == fork


def test_a_send_back_report_rides_on_the_status_transition(rig: Rig) -> None:
    report = SentBack(problem="conflict", reason="conflicts in app.py", files=("app.py",))
    [done] = rig.run(TransitionStatus(work_item_id=rig.item, to="needs-refinement",
                                      reason="conflicts", landing=report))  # fmt: skip
    assert isinstance(done, StatusTransitioned)
    assert done.landing == report


def test_a_tested_head_already_on_the_default_branch_is_recorded_not_refused(rig: Rig) -> None:
    """The merge was made before a crash stopped its database write (local.merge.after_ref):
    the default branch holds it, so the restart finds that merge instead of calling it moved."""
    revision = rig.revision({"app.py": "GREETING = 'hi'\n"})
    tested_on = rig.head()
    git_raw(rig.repo, "merge", "--no-ff", "-q", "-m", "merged before the crash", revision.head_sha)
    by_hand = rig.head()
    merge = MergeRevision(
        work_item_id=rig.item,
        revision_id=revision.id,
        expected_base=tested_on,
        head_sha=revision.head_sha,
    )
    [merged] = rig.run(merge)
    assert isinstance(merged, RevisionMerged)
    assert merged.merge_sha == by_hand
    assert rig.head() == by_hand
    [listed] = rig.provider.revision_reader.list_revisions()
    assert listed.state == "merged"


def test_an_update_from_an_older_fork_point_keeps_what_the_queue_merged_in(rig: Rig) -> None:
    fork = rig.head()
    revision = rig.revision({"app.py": "GREETING = 'hi'\n"})
    rig.commit_to_main({"other.py": "X = 1\n"}, "landed meanwhile")
    [updated] = rig.run(UpdateBranch(work_item_id=rig.item, revision_id=revision.id,
                                     head_sha=revision.head_sha))  # fmt: skip
    assert isinstance(updated, BranchUpdated)
    patch = rig.patch({"app.py": "GREETING = 'hey'\n"})  # made on the older fork point
    git_raw(rig.repo, "reset", "-q", "--hard", "main")
    renewed = rig.provider.revision_writer.update_from_patch(revision.id, patch, base_sha=fork)
    head = renewed.head_sha
    assert git_raw(rig.repo, "show", f"{head}:other.py") == "X = 1\n"  # not reverted
    assert git_raw(rig.repo, "show", f"{head}:app.py") == "GREETING = 'hey'\n"

"""The merge queue on GitLab (``RevisionLander``): ``update_branch`` rebases the merge request
with GitLab's own (asynchronous) rebase, polled until done (nothing when it already contains
the default branch's head; a conflict leaves the branch alone and names the files, with the
hunks); ``land`` merges the tested head only while the default branch is where the test had it,
which GitLab itself enforces on fast-forward and semi-linear projects."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from adapters.providers.gitlab import GitLabProvider
from domain.errors import BaseMovedError, ConflictError
from domain.models import Revision, RevisionId
from domain.ports import RevisionLander
from tests.adapters.providers.edits import EDITS
from tests.e2e.running import wait_for
from tests.fakes.gitlab import FakeGitLab
from tests.fakes.http import Fault, Stall
from tests.support.git import make_patch
from tests.support.gitlab_provider import Sleeps, gitlab_provider

THEIRS = {"src/app.py": "def answer():\n    return 40\n"}  # the line EDITS["modified"] changes
ELSEWHERE = {"docs/elsewhere.md": "elsewhere\n"}


@pytest.fixture
def sleeps() -> Sleeps:
    return Sleeps()


@pytest.fixture
def provider(fake_gitlab: FakeGitLab, sleeps: Sleeps) -> Iterator[GitLabProvider]:
    with gitlab_provider(fake_gitlab, sleeps) as made:
        yield made


@pytest.fixture
def lander(provider: GitLabProvider) -> RevisionLander:
    writer = provider.revision_writer
    assert isinstance(writer, RevisionLander)
    return writer


def open_revision(provider: GitLabProvider, fake: FakeGitLab, tmp_path: Path) -> Revision:
    assert provider.work_item_writer is not None
    assert provider.revision_writer is not None
    item = provider.work_item_writer.create_work_item("Answer", "Make it 42.")
    patch = make_patch(fake.git.path, tmp_path / "patch", EDITS["modified"])
    return provider.revision_writer.create_from_patch(item, f"cpe/{item}-answer", "A", "", patch)


def rebases(fake: FakeGitLab) -> int:
    return sum(1 for r in fake.requests if r.route == "merge-requests/rebase")


def merges(fake: FakeGitLab) -> int:
    return sum(1 for r in fake.requests if r.route == "merge-requests/merge")


def contains(fake: FakeGitLab, head: str, base: str) -> bool:
    return fake.git.is_ancestor(base, head)


# ------------------------------------------------------------------ update_branch


def test_update_branch_rebases_the_branch_on_the_default_head(
    fake_gitlab: FakeGitLab,
    provider: GitLabProvider,
    lander: RevisionLander,
    sleeps: Sleeps,
    tmp_path: Path,
) -> None:
    revision = open_revision(provider, fake_gitlab, tmp_path)
    moved = fake_gitlab.commit_to_default(ELSEWHERE, "elsewhere")
    update = lander.update_branch(revision.id)
    head = update.revision.head_sha
    assert update.base_sha == moved
    assert fake_gitlab.git.line("rev-list", "--parents", "-n", "1", head).split()[1:] == [moved]
    assert "Cpe-Made-By: control-plane-engine" in fake_gitlab.git.line("log", "-1", head)
    assert update.revision.id == revision.id
    assert fake_gitlab.merge_requests[int(revision.id)].head_sha == head
    assert rebases(fake_gitlab) == 1
    assert 0.2 in sleeps.waits  # GitLab said "in progress" once: polled again


def test_update_branch_gives_the_new_head_to_ci_as_a_push_does(
    fake_gitlab: FakeGitLab, provider: GitLabProvider, lander: RevisionLander, tmp_path: Path
) -> None:
    revision = open_revision(provider, fake_gitlab, tmp_path)
    fake_gitlab.report_status(revision.head_sha, "test", "success")
    fake_gitlab.commit_to_default(ELSEWHERE, "elsewhere")
    update = lander.update_branch(revision.id)
    assert update.revision.pipeline.status == "none"  # nothing reported on the new head yet
    fake_gitlab.report_status(update.revision.head_sha, "test", "running")
    assert provider.revision_reader is not None
    [listed] = provider.revision_reader.list_revisions()
    assert (listed.head_sha, listed.pipeline.status) == (update.revision.head_sha, "pending")


def test_update_branch_of_an_up_to_date_branch_writes_nothing(
    fake_gitlab: FakeGitLab, provider: GitLabProvider, lander: RevisionLander, tmp_path: Path
) -> None:
    revision = open_revision(provider, fake_gitlab, tmp_path)
    fake_gitlab.clear_requests()
    update = lander.update_branch(revision.id)
    assert (update.revision.head_sha, update.base_sha) == (
        revision.head_sha,
        fake_gitlab.default_head(),
    )
    assert not any(r.write for r in fake_gitlab.requests)


def test_update_branch_again_after_a_lost_answer_does_not_rebase_twice(
    fake_gitlab: FakeGitLab, provider: GitLabProvider, lander: RevisionLander, tmp_path: Path
) -> None:
    revision = open_revision(provider, fake_gitlab, tmp_path)
    fake_gitlab.commit_to_default(ELSEWHERE, "elsewhere")
    fake_gitlab.fail(Fault("PUT", r"/rebase$", 502, apply_first=True))
    first = lander.update_branch(revision.id)  # the 502 is read as "under way": polled
    again = lander.update_branch(revision.id)
    assert again.revision.head_sha == first.revision.head_sha
    assert again.base_sha == first.base_sha
    assert rebases(fake_gitlab) == 1


def test_update_branch_on_a_conflict_names_the_file_with_its_hunk_and_leaves_the_branch(
    fake_gitlab: FakeGitLab, provider: GitLabProvider, lander: RevisionLander, tmp_path: Path
) -> None:
    revision = open_revision(provider, fake_gitlab, tmp_path)
    fake_gitlab.commit_to_default({**THEIRS, **ELSEWHERE}, "theirs")
    with pytest.raises(ConflictError) as caught:
        lander.update_branch(revision.id)
    assert caught.value.files == ("src/app.py",)
    assert "<<<<<<< cpe/1-answer" in caught.value.detail
    assert ">>>>>>> main" in caught.value.detail
    assert fake_gitlab.git.resolve("refs/heads/cpe/1-answer") == revision.head_sha


def test_update_branch_of_a_merged_revision_is_refused(
    fake_gitlab: FakeGitLab, provider: GitLabProvider, lander: RevisionLander, tmp_path: Path
) -> None:
    revision = open_revision(provider, fake_gitlab, tmp_path)
    fake_gitlab.merge_by_hand(int(revision.id))
    with pytest.raises(ConflictError, match="merged"):
        lander.update_branch(revision.id)


# ------------------------------------------------------------------ land


def test_land_merges_the_tested_head_into_the_unmoved_default_branch(
    fake_gitlab: FakeGitLab, provider: GitLabProvider, lander: RevisionLander, tmp_path: Path
) -> None:
    revision = open_revision(provider, fake_gitlab, tmp_path)
    fake_gitlab.commit_to_default(ELSEWHERE, "elsewhere")
    update = lander.update_branch(revision.id)
    sha = lander.land(revision.id, expected_base=update.base_sha, head_sha=update.revision.head_sha)
    assert sha == fake_gitlab.default_head()
    assert contains(fake_gitlab, sha, update.revision.head_sha)
    assert fake_gitlab.git.line("rev-parse", f"{sha}^{{tree}}") == fake_gitlab.git.line(
        "rev-parse", f"{update.revision.head_sha}^{{tree}}"
    )


def test_land_refuses_a_moved_default_branch_and_merges_nothing(
    fake_gitlab: FakeGitLab, provider: GitLabProvider, lander: RevisionLander, tmp_path: Path
) -> None:
    revision = open_revision(provider, fake_gitlab, tmp_path)
    update = lander.update_branch(revision.id)
    pushed = fake_gitlab.commit_to_default(ELSEWHERE, "pushed since")
    with pytest.raises(BaseMovedError) as moved:
        lander.land(revision.id, expected_base=update.base_sha, head_sha=revision.head_sha)
    assert (moved.value.expected, moved.value.actual) == (update.base_sha, pushed)
    assert merges(fake_gitlab) == 0


def test_land_refuses_a_head_pushed_since_it_was_tested(
    fake_gitlab: FakeGitLab, provider: GitLabProvider, lander: RevisionLander, tmp_path: Path
) -> None:
    revision = open_revision(provider, fake_gitlab, tmp_path)
    update = lander.update_branch(revision.id)
    fake_gitlab.push("cpe/1-answer", {"more.txt": "more\n"}, "a person's push")
    with pytest.raises(BaseMovedError, match="since it was tested"):
        lander.land(revision.id, expected_base=update.base_sha, head_sha=revision.head_sha)
    assert merges(fake_gitlab) == 0


def test_land_again_returns_the_merge_commit_without_merging_twice(
    fake_gitlab: FakeGitLab, provider: GitLabProvider, lander: RevisionLander, tmp_path: Path
) -> None:
    revision = open_revision(provider, fake_gitlab, tmp_path)
    update = lander.update_branch(revision.id)
    fake_gitlab.fail(Fault("PUT", r"/merge$", 502, apply_first=True))
    tested = {"expected_base": update.base_sha, "head_sha": update.revision.head_sha}
    first = lander.land(revision.id, **tested)
    assert lander.land(revision.id, **tested) == first == fake_gitlab.default_head()
    assert merges(fake_gitlab) == 1


def land_while_the_base_moves(
    fake: FakeGitLab, lander: RevisionLander, revision: Revision
) -> tuple[str, str, list[BaseException | str]]:
    """``land`` with a push to the default branch after cpe read it and before GitLab merges:
    the merge request is held until the push is made. The base it was tested on, the pushed
    head, and what ``land`` gave (its merge commit or its error)."""
    update = lander.update_branch(revision.id)
    held = fake.stall(Stall("PUT", r"/merge$"))
    outcome: list[BaseException | str] = []

    def landing() -> None:
        try:
            outcome.append(
                lander.land(
                    RevisionId(revision.id),
                    expected_base=update.base_sha,
                    head_sha=update.revision.head_sha,
                )
            )
        except Exception as exc:
            outcome.append(exc)

    thread = threading.Thread(target=landing)
    thread.start()
    assert wait_for(lambda: held.hits == 1, timeout=30)
    pushed = fake.commit_to_default(ELSEWHERE, "pushed meanwhile")
    fake.http.released.set()  # the held merge goes on
    thread.join(30)
    return update.base_sha, pushed, outcome


@pytest.mark.parametrize("method", ["ff", "rebase_merge"])
def test_land_on_a_linear_project_refuses_a_base_moved_meanwhile(
    fake_gitlab: FakeGitLab,
    provider: GitLabProvider,
    lander: RevisionLander,
    tmp_path: Path,
    method: str,
) -> None:
    """Fast-forward and semi-linear projects merge only a branch that contains the default
    branch's head: GitLab refuses the merge of a tested head once the base moved."""
    fake_gitlab.configure(merge_method=method)
    revision = open_revision(provider, fake_gitlab, tmp_path)
    tested_on, pushed, [outcome] = land_while_the_base_moves(fake_gitlab, lander, revision)
    assert isinstance(outcome, BaseMovedError)
    assert (outcome.expected, outcome.actual) == (tested_on, pushed)
    assert fake_gitlab.default_head() == pushed
    assert fake_gitlab.merge_requests[int(revision.id)].state == "opened"


def test_land_on_a_merge_commit_project_merges_as_gitlab_does_though_the_base_moved(
    fake_gitlab: FakeGitLab, provider: GitLabProvider, lander: RevisionLander, tmp_path: Path
) -> None:
    # GitLab's merge endpoint has no base guard: what a push in the instant between cpe's read
    # of the default branch and the merge does where the merge method does not refuse it.
    revision = open_revision(provider, fake_gitlab, tmp_path)
    _tested_on, pushed, [outcome] = land_while_the_base_moves(fake_gitlab, lander, revision)
    assert isinstance(outcome, str)
    assert fake_gitlab.git.line("rev-parse", f"{outcome}^1") == pushed
    assert fake_gitlab.merge_requests[int(revision.id)].state == "merged"

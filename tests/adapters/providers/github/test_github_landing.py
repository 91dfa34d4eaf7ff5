"""The merge queue on GitHub (``RevisionLander``): ``update_branch`` merges the default branch's
head into the pull request's branch with "Merge a branch" (nothing when it already has it; a
conflict leaves the branch alone and names the files, with the hunks), and ``land`` merges the
tested head only while the default branch is where the test had it. Also what GitHub says of a
conflicting pull request: ``mergeable`` null at first, then false and ``dirty``, and a merge
refused with 405."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from adapters.providers.github import GitHubProvider
from domain.errors import BaseMovedError, ConflictError, ProviderError
from domain.models import Revision, RevisionId
from domain.ports import RevisionLander
from tests.adapters.providers.edits import EDITS, OLD_MODULE
from tests.e2e.github_loop import FakeCI
from tests.e2e.running import wait_for
from tests.fakes.github import FakeGitHub, Fault, Stall
from tests.fakes.github.routes_merge import NOT_MERGEABLE
from tests.support.git import Repo, make_patch
from tests.support.github import github_provider

THEIRS = {"src/app.py": "def answer():\n    return 40\n"}  # the line EDITS["modified"] changes
ELSEWHERE = {"docs/elsewhere.md": "elsewhere\n"}


@pytest.fixture
def provider(fake_github: FakeGitHub) -> Iterator[GitHubProvider]:
    with github_provider(fake_github) as made:
        yield made


@pytest.fixture
def lander(provider: GitHubProvider) -> RevisionLander:
    writer = provider.revision_writer
    assert isinstance(writer, RevisionLander)
    return writer


def open_revision(
    provider: GitHubProvider, fake_github: FakeGitHub, tmp_path: Path, edit: str = "modified"
) -> Revision:
    item = provider.work_item_writer.create_work_item("Answer", "Make it 42.")
    patch = make_patch(fake_github.git.path, tmp_path / "patch", EDITS[edit])
    writer = provider.revision_writer
    return writer.create_from_patch(item, f"cpe/{item}-answer", "Answer", "", patch)


def parents(fake_github: FakeGitHub, sha: str) -> list[str]:
    return fake_github.git.line("rev-list", "--parents", "-n", "1", sha).split()[1:]


def tree(fake_github: FakeGitHub, sha: str) -> str:
    return fake_github.git.line("rev-parse", f"{sha}^{{tree}}")


def posts_to_merges(fake_github: FakeGitHub) -> int:
    return sum(1 for r in fake_github.requests if r.route == "repos/merge")


def merge_puts(fake_github: FakeGitHub) -> int:
    return sum(1 for r in fake_github.requests if r.route == "pulls/merge")


# ------------------------------------------------------------------ update_branch


def test_update_branch_merges_the_default_head_into_the_branch(
    fake_github: FakeGitHub, provider: GitHubProvider, lander: RevisionLander, tmp_path: Path
) -> None:
    revision = open_revision(provider, fake_github, tmp_path)
    base = fake_github.commit_to_default(ELSEWHERE, "elsewhere")
    update = lander.update_branch(revision.id, idempotency_key="land:1")
    new_head = update.revision.head_sha
    assert update.base_sha == base
    assert parents(fake_github, new_head) == [revision.head_sha, base]
    assert fake_github.pulls[int(revision.id)].head_sha == new_head
    assert fake_github.git.resolve(f"refs/heads/{revision.branch}") == new_head
    message = fake_github.git.commit_info(new_head).message
    assert message.startswith(f"Merge main into {revision.branch} (cpe merge queue)")
    assert "Cpe-Key: land:1" in message.splitlines()
    merged = fake_github.git.line("show", f"{new_head}:src/app.py")
    assert "return 42" in merged  # the revision's change
    assert fake_github.git.line("show", f"{new_head}:docs/elsewhere.md") == "elsewhere"
    assert update.revision.pipeline.status == "none"  # the new head: no CI has reported yet


def test_update_branch_gives_the_new_head_to_ci_as_a_push_does(
    fake_github: FakeGitHub, provider: GitHubProvider, lander: RevisionLander, tmp_path: Path
) -> None:
    revision = open_revision(provider, fake_github, tmp_path)
    fake_github.commit_to_default(ELSEWHERE, "elsewhere")
    with FakeCI(fake_github) as ci:
        new_head = lander.update_branch(revision.id).revision.head_sha
        assert wait_for(lambda: new_head in ci.checked, timeout=60)
    [run] = [r for r in fake_github.check_runs if r.head_sha == new_head]
    again = lander.update_branch(revision.id).revision  # up to date: the pipeline is read
    assert again.head_sha == new_head
    assert again.pipeline.status == ("success" if run.conclusion == "success" else "failure")


def test_update_branch_of_an_up_to_date_branch_writes_nothing(
    fake_github: FakeGitHub, provider: GitHubProvider, lander: RevisionLander, tmp_path: Path
) -> None:
    revision = open_revision(provider, fake_github, tmp_path)
    fake_github.clear_requests()
    first = lander.update_branch(revision.id)
    second = lander.update_branch(revision.id)
    assert first == second
    assert (first.revision.head_sha, first.base_sha) == (
        revision.head_sha,
        fake_github.default_head(),
    )
    assert [r for r in fake_github.requests if r.method != "GET"] == []


def test_update_branch_again_after_a_lost_answer_does_not_merge_twice(
    fake_github: FakeGitHub, provider: GitHubProvider, lander: RevisionLander, tmp_path: Path
) -> None:
    revision = open_revision(provider, fake_github, tmp_path)
    base = fake_github.commit_to_default(ELSEWHERE, "elsewhere")
    fake_github.fail(Fault("POST", r"/merges$", 502, apply_first=True))
    with pytest.raises(ProviderError) as lost:
        lander.update_branch(revision.id)
    assert lost.value.transient
    merged = fake_github.git.resolve(f"refs/heads/{revision.branch}")
    assert merged is not None
    assert parents(fake_github, merged) == [revision.head_sha, base]  # it went through
    update = lander.update_branch(revision.id)
    assert (update.revision.head_sha, update.base_sha) == (merged, base)
    assert posts_to_merges(fake_github) == 1


def test_update_branch_on_a_conflict_names_the_file_with_its_hunk_and_leaves_the_branch(
    fake_github: FakeGitHub, provider: GitHubProvider, lander: RevisionLander, tmp_path: Path
) -> None:
    revision = open_revision(provider, fake_github, tmp_path)
    base = fake_github.commit_to_default(THEIRS, "theirs")
    with pytest.raises(ConflictError) as conflict:
        lander.update_branch(revision.id)
    refused = conflict.value
    assert not isinstance(refused, BaseMovedError)
    assert refused.files == ("src/app.py",)
    assert f"revision #{revision.id} conflicts with main (at {base[:12]}) in: src/app.py" in str(
        refused
    )
    hunk = refused.detail
    assert hunk.startswith("src/app.py:")
    assert f"<<<<<<< {revision.branch}" in hunk
    assert ">>>>>>> main" in hunk
    assert "    return 42" in hunk
    assert "    return 40" in hunk
    assert fake_github.git.resolve(f"refs/heads/{revision.branch}") == revision.head_sha
    assert fake_github.pulls[int(revision.id)].head_sha == revision.head_sha


def test_update_branch_names_only_the_conflicting_file_among_those_both_sides_changed(
    fake_github: FakeGitHub, provider: GitHubProvider, lander: RevisionLander, tmp_path: Path
) -> None:
    item = provider.work_item_writer.create_work_item("Two files", "b")

    def edit(repo: Repo) -> None:
        EDITS["modified"](repo)
        repo.write("src/old_name.py", OLD_MODULE.replace("CONSTANT_0 = 0", "CONSTANT_0 = 'zero'"))

    patch = make_patch(fake_github.git.path, tmp_path / "patch", edit)
    revision = provider.revision_writer.create_from_patch(item, "cpe/two", "Two", "", patch)
    last_line = OLD_MODULE.replace("CONSTANT_19 = 19", "CONSTANT_19 = 'nineteen'")
    fake_github.commit_to_default({**THEIRS, "src/old_name.py": last_line}, "theirs")
    with pytest.raises(ConflictError) as conflict:
        lander.update_branch(revision.id)
    # Both sides changed src/old_name.py, far apart: git merges it, so it is not named.
    assert conflict.value.files == ("src/app.py",)
    assert "old_name" not in conflict.value.detail


def test_update_branch_of_a_merged_revision_is_refused(
    fake_github: FakeGitHub, provider: GitHubProvider, lander: RevisionLander, tmp_path: Path
) -> None:
    revision = open_revision(provider, fake_github, tmp_path)
    provider.revision_writer.merge(revision.id)
    with pytest.raises(ConflictError, match="merged; it cannot be updated"):
        lander.update_branch(revision.id)


# ------------------------------------------------------------------ land


def test_land_merges_the_tested_head_into_the_unmoved_default_branch(
    fake_github: FakeGitHub, provider: GitHubProvider, lander: RevisionLander, tmp_path: Path
) -> None:
    revision = open_revision(provider, fake_github, tmp_path)
    fake_github.commit_to_default(ELSEWHERE, "elsewhere")
    update = lander.update_branch(revision.id)
    tested = update.revision.head_sha
    sha = lander.land(revision.id, expected_base=update.base_sha, head_sha=tested)
    assert sha == fake_github.default_head()
    assert parents(fake_github, sha) == [update.base_sha, tested]
    assert tree(fake_github, sha) == tree(fake_github, tested)  # exactly the tree CI ran on
    assert fake_github.pulls[int(revision.id)].merged


def test_land_refuses_a_moved_default_branch_and_merges_nothing(
    fake_github: FakeGitHub, provider: GitHubProvider, lander: RevisionLander, tmp_path: Path
) -> None:
    revision = open_revision(provider, fake_github, tmp_path)
    update = lander.update_branch(revision.id)
    moved = fake_github.commit_to_default(ELSEWHERE, "elsewhere")
    with pytest.raises(BaseMovedError) as refused:
        lander.land(revision.id, expected_base=update.base_sha, head_sha=update.revision.head_sha)
    assert (refused.value.expected, refused.value.actual) == (update.base_sha, moved)
    assert fake_github.default_head() == moved
    assert not fake_github.pulls[int(revision.id)].merged
    assert merge_puts(fake_github) == 0


def test_land_refuses_a_head_pushed_since_it_was_tested(
    fake_github: FakeGitHub, provider: GitHubProvider, lander: RevisionLander, tmp_path: Path
) -> None:
    revision = open_revision(provider, fake_github, tmp_path)
    update = lander.update_branch(revision.id)
    fake_github.push(revision.branch, {"src/more.py": "x = 1\n"}, "someone's push")
    with pytest.raises(BaseMovedError, match="since it was tested"):
        lander.land(revision.id, expected_base=update.base_sha, head_sha=update.revision.head_sha)
    assert not fake_github.pulls[int(revision.id)].merged
    assert merge_puts(fake_github) == 0


def test_land_again_returns_the_merge_commit_without_merging_twice(
    fake_github: FakeGitHub, provider: GitHubProvider, lander: RevisionLander, tmp_path: Path
) -> None:
    revision = open_revision(provider, fake_github, tmp_path)
    update = lander.update_branch(revision.id)
    tested = update.revision.head_sha
    first = lander.land(revision.id, expected_base=update.base_sha, head_sha=tested)
    fake_github.commit_to_default(ELSEWHERE, "later")  # a moved base no longer matters
    again = lander.land(revision.id, expected_base=update.base_sha, head_sha=tested)
    assert again == first
    assert merge_puts(fake_github) == 1


def test_land_refused_as_not_mergeable_is_a_conflict(
    fake_github: FakeGitHub, provider: GitHubProvider, lander: RevisionLander, tmp_path: Path
) -> None:
    revision = open_revision(provider, fake_github, tmp_path)
    update = lander.update_branch(revision.id)
    fake_github.fail(Fault("PUT", r"/merge$", 405, message=NOT_MERGEABLE))
    with pytest.raises(ConflictError) as refused:
        lander.land(revision.id, expected_base=update.base_sha, head_sha=update.revision.head_sha)
    assert not isinstance(refused.value, BaseMovedError)
    assert refused.value.status == 405
    assert "src/app.py" in str(refused.value)
    assert not fake_github.pulls[int(revision.id)].merged


def land_while_the_base_moves(
    fake_github: FakeGitHub, lander: RevisionLander, revision: Revision
) -> tuple[str, str, list[BaseException | str]]:
    """``land`` with a push to the default branch after cpe read it and before GitHub merges:
    the merge request is held until the push is made. The base it was tested on, the pushed
    head, and what ``land`` gave (its merge commit or its error)."""
    update = lander.update_branch(revision.id)
    held = fake_github.stall(Stall("PUT", r"/merge$"))
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
    pushed = fake_github.commit_to_default(ELSEWHERE, "pushed meanwhile")
    fake_github.http.released.set()  # the held merge request goes on
    thread.join(30)
    return update.base_sha, pushed, outcome


def test_land_with_protection_requiring_up_to_date_refuses_a_base_moved_meanwhile(
    fake_github: FakeGitHub, provider: GitHubProvider, lander: RevisionLander, tmp_path: Path
) -> None:
    fake_github.protect(up_to_date=True)
    revision = open_revision(provider, fake_github, tmp_path)
    tested_on, pushed, [outcome] = land_while_the_base_moves(fake_github, lander, revision)
    assert isinstance(outcome, BaseMovedError)
    assert (outcome.expected, outcome.actual) == (tested_on, pushed)
    assert fake_github.default_head() == pushed
    assert not fake_github.pulls[int(revision.id)].merged


def test_land_without_that_protection_merges_as_github_does_though_the_base_moved(
    fake_github: FakeGitHub, provider: GitHubProvider, lander: RevisionLander, tmp_path: Path
) -> None:
    # GitHub's merge endpoint has no base guard: what a push in the instant between cpe's read
    # of the default branch and the merge does where nothing else refuses it.
    revision = open_revision(provider, fake_github, tmp_path)
    _tested_on, pushed, [outcome] = land_while_the_base_moves(fake_github, lander, revision)
    assert isinstance(outcome, str)
    assert parents(fake_github, outcome)[0] == pushed
    assert fake_github.pulls[int(revision.id)].merged


# ------------------------------------------------------------------ what GitHub says


def test_a_conflicting_pull_request_reads_mergeable_null_then_false_dirty_and_is_refused_405(
    fake_github: FakeGitHub, provider: GitHubProvider, tmp_path: Path
) -> None:
    revision = open_revision(provider, fake_github, tmp_path)
    fake_github.commit_to_default(THEIRS, "theirs")
    first = provider.api.get_pull(int(revision.id))
    assert (first.mergeable, first.mergeable_state) == (None, "unknown")
    second = provider.api.get_pull(int(revision.id))
    assert (second.mergeable, second.mergeable_state) == (False, "dirty")
    with pytest.raises(ConflictError) as refused:
        provider.revision_writer.merge(revision.id)
    assert refused.value.status == 405
    assert NOT_MERGEABLE in str(refused.value)
    assert not fake_github.pulls[int(revision.id)].merged


# ------------------------------------------------------------------ built on the run's fork point


def test_a_revision_is_built_on_the_runs_fork_point_where_github_has_it(
    fake_github: FakeGitHub, provider: GitHubProvider, lander: RevisionLander, tmp_path: Path
) -> None:
    fork = fake_github.default_head()
    patch = make_patch(fake_github.git.path, tmp_path / "patch", EDITS["modified"])
    fake_github.commit_to_default(ELSEWHERE, "landed meanwhile")
    item = provider.work_item_writer.create_work_item("Answer", "b")
    revision = lander.create_from_patch(item, "cpe/1-answer", "Answer", "", patch, base_sha=fork)
    assert parents(fake_github, revision.head_sha) == [fork]
    # What landed meanwhile is the merge queue's to bring in, not the revision's to show.
    assert [f.path for f in provider.revision_reader.get_revision_files(revision.id)] == [
        "src/app.py"
    ]


def test_a_fork_point_github_does_not_have_builds_on_the_default_head(
    fake_github: FakeGitHub, provider: GitHubProvider, lander: RevisionLander, tmp_path: Path
) -> None:
    patch = make_patch(fake_github.git.path, tmp_path / "patch", EDITS["modified"])
    item = provider.work_item_writer.create_work_item("Answer", "b")
    unknown = "0123456789abcdef" * 2 + "01234567"
    revision = lander.create_from_patch(item, "cpe/1-answer", "A", "", patch, base_sha=unknown)
    assert parents(fake_github, revision.head_sha) == [fake_github.default_head()]


def test_an_update_is_built_on_its_runs_fork_point(
    fake_github: FakeGitHub, provider: GitHubProvider, lander: RevisionLander, tmp_path: Path
) -> None:
    revision = open_revision(provider, fake_github, tmp_path)
    fork = fake_github.commit_to_default(ELSEWHERE, "landed before the second run")
    patch = make_patch(fake_github.git.path, tmp_path / "again", EDITS["added"])
    fake_github.commit_to_default({"docs/later.md": "later\n"}, "landed during the second run")
    updated = lander.update_from_patch(revision.id, patch, base_sha=fork)
    assert parents(fake_github, updated.head_sha) == [revision.head_sha, fork]
    assert fake_github.git.line("ls-tree", "--name-only", updated.head_sha, "docs/") == (
        "docs/elsewhere.md\ndocs/obsolete.txt"
    )

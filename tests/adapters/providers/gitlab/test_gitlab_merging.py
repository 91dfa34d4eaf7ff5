"""Merging on the fake GitLab: what lands for each merge method, GitLab's refusals sorted into
waiting, conflicts and no permission, and a merge whose answer was lost found merged."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from adapters.providers.gitlab import GitLabProvider
from domain.errors import ConflictError, MergeWaitError, ProviderError
from domain.models import Revision
from tests.adapters.providers.edits import EDITS
from tests.e2e.running import wait_for
from tests.fakes.gitlab import FakeGitLab
from tests.fakes.gitlab.records import DEVELOPER, Token
from tests.fakes.http import Fault, Stall
from tests.support.git import make_patch
from tests.support.gitlab import running_gitlab
from tests.support.gitlab_provider import gitlab_provider


@pytest.fixture
def provider(fake_gitlab: FakeGitLab) -> Iterator[GitLabProvider]:
    with gitlab_provider(fake_gitlab) as made:
        yield made


def open_revision(
    fake: FakeGitLab, provider: GitLabProvider, tmp_path: Path, kind: str = "added"
) -> Revision:
    assert provider.work_item_writer is not None
    assert provider.revision_writer is not None
    item = provider.work_item_writer.create_work_item("T", "b")
    patch = make_patch(fake.git.path, tmp_path / "p", EDITS[kind])
    return provider.revision_writer.create_from_patch(item, f"cpe/{item}-t", "T", "", patch)


def merge(provider: GitLabProvider, revision: Revision) -> str:
    assert provider.revision_writer is not None
    return provider.revision_writer.merge(revision.id)


def parents(fake: FakeGitLab, sha: str) -> list[str]:
    return fake.git.line("rev-list", "--parents", "-n", "1", sha).split()[1:]


def test_a_merge_request_merged_by_hand_gives_its_merge_commit(
    fake_gitlab: FakeGitLab, provider: GitLabProvider, tmp_path: Path
) -> None:
    revision = open_revision(fake_gitlab, provider, tmp_path)
    landed = fake_gitlab.merge_by_hand(int(revision.id))
    fake_gitlab.clear_requests()
    assert merge(provider, revision) == landed
    assert not any(r.write for r in fake_gitlab.requests)


def test_a_merge_whose_answer_was_lost_is_found_merged(
    fake_gitlab: FakeGitLab, provider: GitLabProvider, tmp_path: Path
) -> None:
    revision = open_revision(fake_gitlab, provider, tmp_path)
    fault = fake_gitlab.fail(Fault("PUT", r"/merge$", 502, apply_first=True))
    sha = merge(provider, revision)
    assert fault.hits == 1
    assert sha == fake_gitlab.default_head()
    assert parents(fake_gitlab, sha)[1] == revision.head_sha


def test_a_merge_before_the_pipeline_succeeded_waits_and_then_goes_through(
    fake_gitlab: FakeGitLab, provider: GitLabProvider, tmp_path: Path
) -> None:
    fake_gitlab.configure(only_allow_merge_if_pipeline_succeeds=True)
    revision = open_revision(fake_gitlab, provider, tmp_path)
    fake_gitlab.report_status(revision.head_sha, "test", "running")
    with pytest.raises(MergeWaitError, match="pipeline") as waiting:
        merge(provider, revision)
    assert "ci_" in waiting.value.reason
    assert fake_gitlab.merge_requests[int(revision.id)].state == "opened"
    fake_gitlab.report_status(revision.head_sha, "test", "success")
    assert merge(provider, revision) == fake_gitlab.default_head()


def test_a_draft_waits_for_a_person(
    fake_gitlab: FakeGitLab, provider: GitLabProvider, tmp_path: Path
) -> None:
    revision = open_revision(fake_gitlab, provider, tmp_path)
    fake_gitlab.merge_requests[int(revision.id)].title = "Draft: T"
    with pytest.raises(MergeWaitError, match="draft"):
        merge(provider, revision)


def test_a_conflict_names_the_file_with_its_hunk(
    fake_gitlab: FakeGitLab, provider: GitLabProvider, tmp_path: Path
) -> None:
    revision = open_revision(fake_gitlab, provider, tmp_path, "modified")
    moved = fake_gitlab.commit_to_default({"src/app.py": "def answer():\n    return 40\n"}, "x")
    with pytest.raises(ConflictError) as caught:
        merge(provider, revision)
    assert caught.value.files == ("src/app.py",)
    assert "return 40" in caught.value.detail
    assert "return 42" in caught.value.detail
    assert fake_gitlab.default_head() == moved


def test_a_fast_forward_project_lands_the_head_itself(
    fake_gitlab: FakeGitLab, provider: GitLabProvider, tmp_path: Path
) -> None:
    fake_gitlab.configure(merge_method="ff")
    revision = open_revision(fake_gitlab, provider, tmp_path)
    assert merge(provider, revision) == revision.head_sha == fake_gitlab.default_head()
    assert merge(provider, revision) == revision.head_sha  # merged already: the same


def test_a_fast_forward_project_refuses_a_branch_behind_the_default(
    fake_gitlab: FakeGitLab, provider: GitLabProvider, tmp_path: Path
) -> None:
    fake_gitlab.configure(merge_method="ff")
    revision = open_revision(fake_gitlab, provider, tmp_path)
    moved = fake_gitlab.commit_to_default({"README.md": "# moved\n"}, "readme")
    with pytest.raises(ConflictError, match="fast-forward"):
        merge(provider, revision)
    assert fake_gitlab.default_head() == moved


def test_a_semi_linear_project_lands_a_merge_commit(
    fake_gitlab: FakeGitLab, provider: GitLabProvider, tmp_path: Path
) -> None:
    fake_gitlab.configure(merge_method="rebase_merge")
    revision = open_revision(fake_gitlab, provider, tmp_path)
    base = fake_gitlab.default_head()
    sha = merge(provider, revision)
    assert parents(fake_gitlab, sha) == [base, revision.head_sha]


def test_a_squashed_merge_request_lands_the_merge_commit_of_the_squash(
    fake_gitlab: FakeGitLab, provider: GitLabProvider, tmp_path: Path
) -> None:
    revision = open_revision(fake_gitlab, provider, tmp_path)
    fake_gitlab.merge_requests[int(revision.id)].squash = True  # a person ticked "Squash"
    sha = merge(provider, revision)
    mr = fake_gitlab.merge_requests[int(revision.id)]
    assert sha == mr.merge_commit_sha == fake_gitlab.default_head()
    assert mr.squash_commit_sha is not None


def test_a_token_that_may_not_merge_into_the_default_branch_is_told_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A Developer may not merge into a protected default branch: no wait would help."""
    with (
        running_gitlab(tmp_path, monkeypatch, tokens={"dev": Token("cpe-bot", DEVELOPER)}) as fake,
        gitlab_provider(fake, token="dev") as provider,
    ):
        revision = open_revision(fake, provider, tmp_path)
        with pytest.raises(ProviderError, match="does not let cpe merge") as caught:
            merge(provider, revision)
        assert not caught.value.transient
        assert not isinstance(caught.value, (MergeWaitError, ConflictError))


def test_a_push_between_reading_and_merging_is_gitlabs_409_read_again(
    fake_gitlab: FakeGitLab, provider: GitLabProvider, tmp_path: Path
) -> None:
    """The merge's ``sha`` guards the head: a push to the branch after cpe read it makes GitLab
    answer 409 ("SHA does not match HEAD of source branch"). Nothing merges; the error is
    transient (the next attempt reads the new head)."""
    revision = open_revision(fake_gitlab, provider, tmp_path)
    held = fake_gitlab.stall(Stall("PUT", r"/merge$"))
    outcome: list[BaseException | str] = []

    def merging() -> None:
        try:
            outcome.append(merge(provider, revision))
        except Exception as exc:
            outcome.append(exc)

    thread = threading.Thread(target=merging)
    thread.start()
    assert wait_for(lambda: held.hits == 1, timeout=30)
    fake_gitlab.push(revision.branch, {"more.txt": "more\n"}, "a person's push")
    fake_gitlab.http.released.set()
    thread.join(30)
    [refused] = outcome
    assert isinstance(refused, ProviderError)
    assert (refused.status, refused.transient) == (409, True)
    assert "moved since it was read" in str(refused)
    assert fake_gitlab.merge_requests[int(revision.id)].state == "opened"

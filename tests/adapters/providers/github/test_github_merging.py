"""Merging on GitHub as GitHub behaves (API 2026-03-10, branch protection, repository settings).

A pull request merged earlier (its answer lost, or merged by a person) gives its merge commit
from its timeline: the API version cpe speaks has no ``merge_commit_sha``. A 405 is sorted by
GitHub's message: branch protection not yet satisfied is a wait (the item waits and the merge
is tried again on the next poll), "Base branch was modified" is transient, a merge method the
repository does not allow is replaced by one it does, and only a conflict is a conflict.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from actors.executor import CommandExecutor
from actors.journal import Journal
from actors.queue import Inbox
from actors.session_registry import SessionManager
from actors.settings import RetrySettings
from adapters.providers.github import GitHubProvider
from domain.errors import ConflictError, MergeWaitError, ProviderError
from domain.events import EngineEvent, MergeWaiting, RevisionMerged, WorkItemChanged
from domain.handlers import create_handlers, run_handlers
from domain.handlers.options import HandlerOptions
from domain.models import EngineState, Revision
from domain.policy import AllowAll
from domain.results import AgentReview
from domain.state import apply_event
from tests.adapters.providers.edits import EDITS
from tests.fakes.github import FakeGitHub, Fault
from tests.fakes.github.routes_merge import BASE_MODIFIED
from tests.support.git import make_patch
from tests.support.github import github_provider, running_github
from tests.support.pollers import revision_poller

REVIEWER_TOKEN = "reviewer-token"


@pytest.fixture
def fake_github(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeGitHub]:
    tokens = {"test-token": "cpe-bot", REVIEWER_TOKEN: "alice"}
    with running_github(tmp_path, monkeypatch, tokens=tokens) as gh:
        yield gh


@pytest.fixture
def provider(fake_github: FakeGitHub) -> Iterator[GitHubProvider]:
    with github_provider(fake_github) as made:
        yield made


def open_revision(
    provider: GitHubProvider, fake_github: FakeGitHub, tmp_path: Path, edit: str = "modified"
) -> Revision:
    item = provider.work_item_writer.create_work_item("Answer", "Make it 42.")
    patch = make_patch(fake_github.git.path, tmp_path / "patch", EDITS[edit])
    writer = provider.revision_writer
    return writer.create_from_patch(item, f"cpe/{item}-answer", "Answer", "", patch)


def approve_as_someone_else(fake_github: FakeGitHub, revision: Revision) -> None:
    headers = {"Authorization": f"token {REVIEWER_TOKEN}"}
    with httpx.Client(base_url=fake_github.base_url, headers=headers, timeout=30) as client:
        answer = client.post(
            f"/repos/{fake_github.owner}/{fake_github.repo}/pulls/{revision.id}/reviews",
            json={"commit_id": revision.head_sha, "event": "APPROVE"},
        )
    assert answer.status_code == 200, answer.text


# ------------------------------------------------------------------ the merge commit


def test_merging_an_already_merged_pull_request_returns_its_merge_commit(
    fake_github: FakeGitHub, provider: GitHubProvider, tmp_path: Path
) -> None:
    revision = open_revision(provider, fake_github, tmp_path)
    merged = provider.revision_writer.merge(revision.id)
    assert provider.revision_writer.merge(revision.id) == merged == fake_github.default_head()


def test_no_answer_cpe_reads_carries_a_field_its_api_version_removed(
    fake_github: FakeGitHub, provider: GitHubProvider, tmp_path: Path
) -> None:
    revision = open_revision(provider, fake_github, tmp_path)
    provider.revision_writer.merge(revision.id)
    assert {r.api_version for r in fake_github.requests} == {"2026-03-10"}
    with httpx.Client(base_url=fake_github.base_url, timeout=30) as client:
        path = f"/repos/{fake_github.owner}/{fake_github.repo}/pulls/{revision.id}"
        auth = {"Authorization": "token test-token"}
        new = client.get(path, headers={**auth, "X-GitHub-Api-Version": "2026-03-10"}).json()
        old = client.get(path, headers={**auth, "X-GitHub-Api-Version": "2022-11-28"}).json()
    assert "merge_commit_sha" not in new
    assert "assignee" not in new
    assert old["merge_commit_sha"] == fake_github.default_head()


# ------------------------------------------------------------------ 405s, sorted


def test_a_merge_before_a_required_check_reported_waits_and_then_goes_through(
    fake_github: FakeGitHub, provider: GitHubProvider, tmp_path: Path
) -> None:
    fake_github.protect(checks=("deploy",))
    revision = open_revision(provider, fake_github, tmp_path)
    with pytest.raises(MergeWaitError) as waiting:
        provider.revision_writer.merge(revision.id)
    assert waiting.value.reason == 'Required status check "deploy" is expected.'
    assert not isinstance(waiting.value, ConflictError)
    fake_github.add_check_run(revision.head_sha, "deploy")
    assert provider.revision_writer.merge(revision.id) == fake_github.default_head()


def test_a_merge_before_a_required_approval_waits_for_it(
    fake_github: FakeGitHub, provider: GitHubProvider, tmp_path: Path
) -> None:
    fake_github.protect(reviews=1)
    revision = open_revision(provider, fake_github, tmp_path)
    with pytest.raises(MergeWaitError) as waiting:
        provider.revision_writer.merge(revision.id)
    assert "approving review is required" in waiting.value.reason
    approve_as_someone_else(fake_github, revision)
    assert provider.revision_writer.merge(revision.id) == fake_github.default_head()


def test_a_base_branch_modified_during_the_merge_is_a_transient_refusal(
    fake_github: FakeGitHub, provider: GitHubProvider, tmp_path: Path
) -> None:
    revision = open_revision(provider, fake_github, tmp_path)
    fake_github.fail(Fault("PUT", r"/merge$", 405, message=BASE_MODIFIED))
    with pytest.raises(ProviderError) as refused:
        provider.revision_writer.merge(revision.id)
    assert refused.value.transient
    assert not isinstance(refused.value, ConflictError | MergeWaitError)
    assert provider.revision_writer.merge(revision.id) == fake_github.default_head()


def test_a_repository_without_merge_commits_is_merged_by_squash(
    fake_github: FakeGitHub, provider: GitHubProvider, tmp_path: Path
) -> None:
    fake_github.merge_methods["merge"] = False
    revision = open_revision(provider, fake_github, tmp_path)
    base = fake_github.default_head()
    merged = provider.revision_writer.merge(revision.id)
    assert fake_github.git.line("rev-list", "--parents", "-n", "1", merged).split()[1:] == [base]
    assert fake_github.git.line("rev-parse", f"{merged}^{{tree}}") == fake_github.git.line(
        "rev-parse", f"{revision.head_sha}^{{tree}}"
    )
    second = open_revision(provider, fake_github, tmp_path / "second", "added")
    merge_puts = [r for r in fake_github.requests if r.method == "PUT"]
    provider.revision_writer.merge(second.id)
    assert len([r for r in fake_github.requests if r.method == "PUT"]) == len(merge_puts) + 1


def test_a_conflict_is_still_a_conflict(
    fake_github: FakeGitHub, provider: GitHubProvider, tmp_path: Path
) -> None:
    revision = open_revision(provider, fake_github, tmp_path)
    fake_github.commit_to_default({"src/app.py": "def answer():\n    return 40\n"}, "theirs")
    with pytest.raises(ConflictError) as refused:
        provider.revision_writer.merge(revision.id)
    assert "src/app.py" in str(refused.value)


# ------------------------------------------------------------------ the item waits


class Loop:
    """The engine's cycle without its actors: a poll of revisions, then each event applied,
    handled and its commands executed by the real executor (journal on disk), GitHub's
    answers fed back in."""

    def __init__(self, provider: GitHubProvider, tmp_path: Path) -> None:
        self.state = EngineState()
        self.journal = Journal(tmp_path / "journal.sqlite3")
        self.handlers = create_handlers(HandlerOptions(auto_merge=True))
        self.executor = CommandExecutor(
            work_item_writer=provider.work_item_writer,
            revision_writer=provider.revision_writer,
            policy=AllowAll(),
            journal=self.journal,
            inbox=Inbox(self.journal),
            sessions=SessionManager(),
            spawn_session=lambda sid, params: None,
            max_concurrent={"planner": 1, "implementor": 1, "reviewer": 1},
            retry=RetrySettings(attempts=1),
            wait=lambda seconds: False,
        )
        self.seen: list[EngineEvent] = []
        self.poller = revision_poller(
            provider.revision_reader, lambda: self.state, self.process, interval=0
        )

    def process(self, event: EngineEvent) -> None:
        self.seen.append(event)
        self.state = apply_event(self.state, event)
        for command in run_handlers(self.handlers, event, self.state):
            for result in self.executor.execute(command, self.state):
                self.process(result)


def test_an_approved_item_waits_for_branch_protection_and_is_merged_on_a_later_poll(
    fake_github: FakeGitHub, provider: GitHubProvider, tmp_path: Path
) -> None:
    fake_github.protect(checks=("deploy",))
    revision = open_revision(provider, fake_github, tmp_path)
    fake_github.add_check_run(revision.head_sha, "tests")
    provider.revision_writer.post_review(
        revision.id, revision.head_sha, AgentReview(verdict="approve", summary="Good.")
    )
    loop = Loop(provider, tmp_path)
    [item] = [i for i in provider.work_item_reader.list_work_items() if i.id == "1"]
    loop.process(WorkItemChanged(work_item=item.model_copy(update={"status": "approved"})))
    loop.poller.poll()
    [waiting] = [e for e in loop.seen if isinstance(e, MergeWaiting)]
    assert waiting.reason == 'Required status check "deploy" is expected.'
    wait = loop.state.merge_waits[revision.id]
    assert (wait.work_item_id, wait.head_sha, wait.tries) == ("1", revision.head_sha, 1)
    merges = [i for i in loop.journal.intents("failed") if i.key.startswith("merge:")]
    assert [i.command.revision_id for i in merges] == [revision.id]  # made again later

    loop.poller.poll()  # nothing changed on GitHub: the waiting revision is tried again
    assert loop.state.merge_waits[revision.id].tries == 2
    assert fake_github.pulls[int(revision.id)].merged is False

    fake_github.add_check_run(revision.head_sha, "deploy")
    loop.poller.poll()
    assert any(isinstance(e, RevisionMerged) for e in loop.seen)
    assert fake_github.pulls[int(revision.id)].merged
    assert revision.id not in loop.state.merge_waits
    loop.journal.close()


def test_a_merged_pull_request_keeps_the_pipeline_it_merged_on(
    fake_github: FakeGitHub, provider: GitHubProvider, tmp_path: Path
) -> None:
    """`cpe status` and `cpe work list` showed "pipeline none" for every merged pull request:
    cpe's own merge made the index forget the pipeline, and a merged one is not read again."""
    revision = open_revision(provider, fake_github, tmp_path)
    fake_github.add_check_run(revision.head_sha, "tests")
    [listed] = [r for r in provider.revision_reader.list_revisions() if r.id == revision.id]
    assert listed.pipeline.status == "success"
    provider.revision_writer.merge(revision.id)
    [merged] = [r for r in provider.revision_reader.list_revisions() if r.id == revision.id]
    assert (merged.state, merged.pipeline.status) == ("merged", "success")

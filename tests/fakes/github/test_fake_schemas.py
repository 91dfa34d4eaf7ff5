"""Every answer the fake GitHub gives the provider matches githubkit's generated models for the
API version the request named — strictly, so a field that version removed fails the test — and
every operation the provider uses is among them, its errors included.

The provider runs a whole loop against the fake (as a GitHub App and with tokens, including a
fine-grained one that may not read check runs): issues and labels, dependencies, a revision from
a patch with text and binary files, an update, reviews, a merge that waits for branch
protection, a merge, a merged pull request merged again, a revision brought up to date and landed
(the merge queue), a conflict. Each recorded answer is then
replayed to the githubkit call of its operation to learn the model githubkit would parse it
with (``schemas.py``).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from githubkit_schemas.v2026_03_10.models import GitRef, Label

from adapters.providers.github import GitHubProvider, GitHubSettings, markers
from domain.errors import ConflictError, MergeWaitError, NotFoundError, ProviderError
from domain.models import RevisionId, WorkItemId
from domain.results import AgentReview, AgentReviewComment
from tests.fakes.github import FakeApp, FakeGitHub, rsa_key_pair
from tests.fakes.github.records import FINE_GRAINED_PERMISSIONS, Access, RecordedRequest
from tests.fakes.github.schemas import OPERATIONS, check, undeclared
from tests.support.git import Repo, make_patch
from tests.support.github import running_github

KEY_ENV = "CPE_TEST_SCHEMA_APP_KEY"
TOKEN_ENV = "CPE_TEST_SCHEMA_TOKEN"
FINE_GRAINED = "github_pat_schema"


@pytest.fixture(scope="module")
def keys() -> tuple[str, str]:
    return rsa_key_pair()


@pytest.fixture
def fake_github(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, keys: tuple[str, str]
) -> Iterator[FakeGitHub]:
    tokens: dict[str, str | Access] = {
        "test-token": "cpe-bot",
        FINE_GRAINED: Access("cpe-bot", "fine-grained", permissions=FINE_GRAINED_PERMISSIONS),
    }
    app = FakeApp(990_017, 77, keys[1])
    with running_github(tmp_path, monkeypatch, tokens=tokens, app=app) as gh:
        gh.keep_responses = True
        yield gh


def settings(fake_github: FakeGitHub, **more: object) -> GitHubSettings:
    return GitHubSettings.model_validate(
        {
            "repository": f"{fake_github.owner}/{fake_github.repo}",
            "base_url": fake_github.base_url + "/",
            "token_env": TOKEN_ENV,
            **more,
        }
    )


def edit(repo: Repo) -> None:
    repo.write("src/app.py", "def answer():\n    return 42\n")
    repo.write("assets/new.bin", b"\x00\xff" * 64)
    repo.remove("docs/obsolete.txt")


def full_loop(fake_github: FakeGitHub, tmp_path: Path, private_key: str) -> None:
    token = {TOKEN_ENV: "test-token"}
    with GitHubProvider(settings(fake_github), environ=token, sleep=lambda s: None) as provider:
        reader, writer = provider.work_item_reader, provider.work_item_writer
        first = writer.create_work_item("First", "a", labels=["area"])
        second = writer.create_work_item("Second", "b", blocked_by=[first])
        writer.update_work_item(second, body="b2", labels=["area", "later"])
        # an issue a crash left unlabelled: the retried create labels it
        fake_github.add_issue("Resumed", markers.issue_body("r", [], "plan:9:r"), user="cpe-bot")
        writer.create_work_item("Resumed", "r", idempotency_key="plan:9:r")
        writer.transition_status(first, "in-progress")
        reader.list_work_items()
        with pytest.raises(NotFoundError):
            reader.get_work_item_body(WorkItemId("4242"))
        revisions = provider.revision_writer
        patch = make_patch(fake_github.git.path, tmp_path / "patch", edit)
        revision = revisions.create_from_patch(first, "cpe/1-first", "First", "", patch)
        with pytest.raises(ProviderError):  # GitHub's own 422: a pull request exists already
            provider.api.create_pull("Again", "cpe/1-first", fake_github.default_branch, "")
        fake_github.edit_issue(
            int(revision.id), labels=["area"]
        )  # labels embedded in pull requests
        fake_github.add_check_run(revision.head_sha, "tests")
        fake_github.add_status(revision.head_sha, "lint", "success")
        provider.revision_reader.list_revisions()
        provider.revision_reader.baseline()
        provider.revision_reader.get_revision_files(revision.id)
        review = AgentReview(
            verdict="approve",
            summary="Fine.",
            comments=(AgentReviewComment(path="src/app.py", line=2, body="Good."),),
        )
        revisions.post_review(revision.id, revision.head_sha, review)  # 422 first: own PR
        provider.revision_reader.get_review_history(revision.id)
        fake_github.protect(checks=("deploy",))
        with pytest.raises(MergeWaitError):
            revisions.merge(revision.id)
        fake_github.protection.clear()
        revisions.merge(revision.id)
        revisions.merge(revision.id)  # merged already: its merge commit from the timeline
        queued_item = writer.create_work_item("Queued", "q")
        queued_patch = make_patch(
            fake_github.git.path, tmp_path / "queued", lambda r: r.write("docs/q.md", "q\n")
        )
        queued = revisions.create_from_patch(queued_item, "cpe/4-queued", "Q", "", queued_patch)
        fake_github.commit_to_default({"docs/elsewhere.md": "e\n"}, "elsewhere")
        update = revisions.update_branch(queued.id)  # a comparison, then "Merge a branch"
        revisions.land(queued.id, expected_base=update.base_sha, head_sha=update.revision.head_sha)
        conflicting = writer.create_work_item("Third", "c")
        other = make_patch(
            fake_github.git.path, tmp_path / "other", lambda r: r.remove("README.md")
        )
        made = revisions.create_from_patch(conflicting, "cpe/3-third", "Third", "", other)
        again = make_patch(
            fake_github.git.path, tmp_path / "again", lambda r: r.remove("src/app.py")
        )
        revisions.update_from_patch(made.id, again)
        fake_github.commit_to_default({"src/app.py": "def answer():\n    return 0\n"}, "theirs")
        with pytest.raises(ConflictError):
            revisions.update_branch(made.id)  # GitHub's 409
        with pytest.raises(ConflictError):
            revisions.merge(made.id)
        writer.close_work_item(conflicting)
    with GitHubProvider(settings(fake_github), environ={TOKEN_ENV: FINE_GRAINED}) as limited:
        limited.revision_reader.baseline()  # check runs: 403 for this token
    app_settings = settings(
        fake_github, app_id=990_017, app_installation_id=77, app_private_key_env=KEY_ENV
    )
    with GitHubProvider(app_settings, environ={KEY_ENV: private_key}) as app:
        app.work_item_reader.list_work_items()
        app.revision_reader.list_revisions()
        with pytest.raises(ProviderError):
            app.revision_writer.merge(RevisionId(str(made.id)))


def test_every_answer_the_provider_gets_matches_its_api_versions_models(
    fake_github: FakeGitHub, tmp_path: Path, keys: tuple[str, str]
) -> None:
    full_loop(fake_github, tmp_path, keys[0])
    problems = {
        f"{r.method} {r.path} {r.status}": found
        for r in fake_github.requests
        if (found := check(r))
    }
    assert problems == {}
    unversioned = {r.route for r in fake_github.requests if r.api_version != "2026-03-10"}
    assert unversioned == {"apps/create-installation-access-token"}  # githubkit's auth flow
    used = {r.route for r in fake_github.requests}
    assert set(OPERATIONS) - used == set(), "an operation the provider uses went unchecked"
    assert {r.status for r in fake_github.requests} >= {200, 201, 304, 403, 404, 405, 409, 422}


def test_a_field_the_requested_version_removed_is_reported(
    fake_github: FakeGitHub, tmp_path: Path
) -> None:
    with GitHubProvider(settings(fake_github), environ={TOKEN_ENV: "test-token"}) as provider:
        item = provider.work_item_writer.create_work_item("T", "b")
        patch = make_patch(fake_github.git.path, tmp_path / "patch", edit)
        revision = provider.revision_writer.create_from_patch(item, "cpe/1-t", "T", "", patch)
        provider.revision_writer.merge(revision.id)
    [answer] = [r for r in fake_github.requests if r.route == "pulls/get"][-1:]
    legacy = json.loads(answer.response or b"{}")
    legacy.update(merge_commit_sha=fake_github.default_head(), assignee=None)
    stale = RecordedRequest(**{**answer.__dict__, "response": json.dumps(legacy).encode()})
    assert check(answer) == []
    assert sorted(check(stale)) == [
        "$.assignee is not in PullRequest",
        "$.merge_commit_sha is not in PullRequest",
    ]


def test_the_walker_reports_nested_and_listed_fields() -> None:
    assert undeclared(list[Label], [{"name": "x", "extra": 1}], "$") == ["$[0].extra"]
    ref = {"ref": "refs/heads/a", "node_id": "n", "url": "u"}
    target = {"type": "commit", "sha": "0" * 40, "url": "u", "gone": True}
    assert undeclared(GitRef, {**ref, "object": target}, "$") == ["$.object.gone"]

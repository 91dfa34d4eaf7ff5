"""The GitHub provider under failure: reads are retried (5xx, 429, rate-limit 403) honouring
Retry-After and a near rate-limit reset; a GitHub that does not answer fails a call within its
timeout; writes are sent once, and a write GitHub applied before failing with a 502 is found
again instead of being made twice."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from adapters.providers.github import GitHubProvider, markers
from domain.errors import NotFoundError, ProviderError
from domain.models import WorkItemId
from domain.results import AgentReview, AgentReviewComment
from tests.adapters.providers.edits import EDITS
from tests.fakes.github import FakeGitHub, Fault, Stall
from tests.support.git import make_patch
from tests.support.github import (
    TOKEN_ENV,
    Sleeps,
    github_provider,
    settings_for,
)


@pytest.fixture
def sleeps() -> Sleeps:
    return Sleeps()


@pytest.fixture
def provider(fake_github: FakeGitHub, sleeps: Sleeps) -> Iterator[GitHubProvider]:
    with github_provider(fake_github, sleeps) as made:
        yield made


def posts(fake_github: FakeGitHub, path_end: str) -> int:
    return sum(1 for r in fake_github.requests if r.method == "POST" and r.path.endswith(path_end))


def patch_for(fake_github: FakeGitHub, tmp_path: Path, kind: str = "modified") -> str:
    return make_patch(fake_github.git.path, tmp_path / f"patch-{kind}", EDITS[kind])


# ------------------------------------------------------------------ reads are retried


@pytest.mark.parametrize("status", [500, 502, 503])
def test_a_read_that_fails_with_5xx_is_retried(
    fake_github: FakeGitHub, provider: GitHubProvider, sleeps: Sleeps, status: int
) -> None:
    fake_github.add_issue("Survives")
    fake_github.fail(Fault("GET", r"/issues$", status, times=2))
    assert [i.title for i in provider.work_item_reader.list_work_items()] == ["Survives"]
    assert len(sleeps.waits) == 2


@pytest.mark.parametrize(
    ("status", "message"), [(429, "Too Many Requests"), (403, "secondary rate limit")]
)
def test_a_rate_limited_read_waits_as_long_as_retry_after_says(
    fake_github: FakeGitHub, provider: GitHubProvider, sleeps: Sleeps, status: int, message: str
) -> None:
    fake_github.fail(Fault("GET", r"/issues$", status, retry_after=7, message=message))
    assert provider.work_item_reader.list_work_items() == []
    assert sleeps.waits == [7.0]


def test_an_exhausted_primary_rate_limit_is_not_slept_through(
    fake_github: FakeGitHub, provider: GitHubProvider, sleeps: Sleeps
) -> None:
    fake_github.http.rate_limit = (
        fake_github.http.rate_used
    )  # nothing left until the reset, an hour away
    with pytest.raises(ProviderError) as raised:
        provider.work_item_reader.list_work_items()
    assert (raised.value.status, raised.value.transient) == (403, True)
    assert raised.value.retry_after is not None
    assert raised.value.retry_after > 60
    assert sleeps.waits == []


def test_a_read_waits_for_a_near_rate_limit_reset_and_is_then_answered(
    fake_github: FakeGitHub,
) -> None:
    now = 2_000_000_000
    waits: list[float] = []

    def sleep(seconds: float) -> None:  # the reset comes while the provider sleeps
        waits.append(seconds)
        fake_github.restore_rate_limit()

    settings = settings_for(fake_github, default_branch=fake_github.default_branch)
    with GitHubProvider(
        settings, environ={TOKEN_ENV: "test-token"}, sleep=sleep, clock=lambda: float(now)
    ) as provider:
        fake_github.add_issue("After the reset")
        fake_github.clear_requests()  # the start's (the status labels)
        fake_github.exhaust_rate_limit(reset=now + 2)
        titles = [i.title for i in provider.work_item_reader.list_work_items()]
    assert titles == ["After the reset"]
    assert waits == [3.0]  # until the reset, and a second's margin for clock skew
    assert [(r.path.rsplit("/", 1)[-1], r.status) for r in fake_github.requests[:2]] == [
        ("issues", 403),
        ("issues", 200),
    ]


def test_a_read_github_does_not_answer_fails_within_the_timeout_as_transient(
    fake_github: FakeGitHub, sleeps: Sleeps
) -> None:
    with github_provider(
        fake_github,
        sleeps,
        default_branch=fake_github.default_branch,
        request_timeout=0.5,
        read_attempts=2,
    ) as provider:
        fake_github.stall(Stall("GET", r"/issues$", times=2))  # held until the fake closes
        with pytest.raises(ProviderError) as raised:
            provider.work_item_reader.list_work_items()
    assert raised.value.transient
    assert "did not answer in time" in str(raised.value)
    assert len(sleeps.waits) == 1  # two attempts, as for any failed read


def test_a_read_answered_after_one_timeout_succeeds_on_its_retry(
    fake_github: FakeGitHub, sleeps: Sleeps
) -> None:
    with github_provider(fake_github, sleeps, request_timeout=0.5) as provider:
        fake_github.add_issue("Slow, then not")
        fake_github.stall(Stall("GET", r"/issues$"))
        titles = [i.title for i in provider.work_item_reader.list_work_items()]
    assert titles == ["Slow, then not"]
    assert len(sleeps.waits) == 1


def test_a_read_that_keeps_failing_raises_a_transient_provider_error(
    fake_github: FakeGitHub, provider: GitHubProvider, sleeps: Sleeps
) -> None:
    fake_github.fail(Fault("GET", r"/issues$", 503, times=10))
    with pytest.raises(ProviderError) as raised:
        provider.work_item_reader.list_work_items()
    assert (raised.value.status, raised.value.transient) == (503, True)
    assert len(sleeps.waits) == 3  # four attempts


def test_a_missing_entity_is_not_found_and_not_retried(
    fake_github: FakeGitHub, provider: GitHubProvider, sleeps: Sleeps
) -> None:
    with pytest.raises(NotFoundError):
        provider.work_item_reader.get_work_item_body(WorkItemId("4242"))
    assert sleeps.waits == []


def test_a_refused_token_is_a_permanent_error(fake_github: FakeGitHub, sleeps: Sleeps) -> None:
    with (
        github_provider(fake_github, sleeps, token="wrong", default_branch="main") as provider,
        pytest.raises(ProviderError) as raised,
    ):
        provider.work_item_reader.list_work_items()
    assert (raised.value.status, raised.value.transient) == (401, False)
    assert sleeps.waits == []


# ------------------------------------------------------------------ writes are sent once


def test_a_write_that_fails_is_not_retried(
    fake_github: FakeGitHub, provider: GitHubProvider, sleeps: Sleeps
) -> None:
    fake_github.fail(Fault("POST", r"/issues$", 502))
    with pytest.raises(ProviderError) as raised:
        provider.work_item_writer.create_work_item("Once", "b")
    assert raised.value.status == 502
    assert posts(fake_github, "/issues") == 1
    assert sleeps.waits == []
    assert fake_github.issues == {}


def test_an_issue_made_before_a_502_is_found_not_made_again(
    fake_github: FakeGitHub, provider: GitHubProvider
) -> None:
    fake_github.fail(Fault("POST", r"/issues$", 502, apply_first=True))
    made = provider.work_item_writer.create_work_item("Once", "b", idempotency_key="plan:1:a")
    again = provider.work_item_writer.create_work_item("Once", "b", idempotency_key="plan:1:a")
    assert made == again
    assert [i.title for i in fake_github.issues.values()] == ["Once"]
    assert posts(fake_github, "/issues") == 1


def test_an_issue_made_just_before_a_crash_gets_its_labels_and_native_blocker_on_the_retry(
    fake_github: FakeGitHub, provider: GitHubProvider
) -> None:
    """The process died after GitHub made the issue and before cpe labelled it and linked its
    blocker: the retried create finds it by its key and finishes it, making nothing twice."""
    first = provider.work_item_writer.create_work_item("First", "b")
    key = "plan:1:second"
    body = markers.issue_body("b", [first], key)
    number = fake_github.add_issue("Second", body, user="cpe-bot")
    again = provider.work_item_writer.create_work_item(
        "Second", "b", blocked_by=[first], idempotency_key=key
    )
    assert again == str(number)
    assert len(fake_github.issues) == 2
    assert fake_github.issues[number].labels == ["status:pending"]
    assert fake_github.issues[number].blocked_by == [int(first)]
    fake_github.clear_requests()
    provider.work_item_writer.create_work_item(
        "Second", "b", blocked_by=[first], idempotency_key=key
    )
    assert [r.method for r in fake_github.requests if r.method != "GET"] == []


def test_a_key_unseen_after_a_failed_create_raises_the_failure(
    fake_github: FakeGitHub, provider: GitHubProvider
) -> None:
    fake_github.fail(Fault("POST", r"/issues$", 502))
    with pytest.raises(ProviderError):
        provider.work_item_writer.create_work_item("Once", "b", idempotency_key="plan:1:b")
    assert provider.work_item_writer.create_work_item("Once", "b", idempotency_key="plan:1:b")
    assert len(fake_github.issues) == 1


def test_a_pull_request_made_before_a_502_is_found_not_made_again(
    fake_github: FakeGitHub, provider: GitHubProvider, tmp_path: Path
) -> None:
    item = provider.work_item_writer.create_work_item("T", "b")
    patch = patch_for(fake_github, tmp_path)
    fake_github.fail(Fault("POST", r"/pulls$", 502, apply_first=True))
    writer = provider.revision_writer
    made = writer.create_from_patch(item, "cpe/1-t", "T", "", patch, idempotency_key="rev:1")
    again = writer.create_from_patch(item, "cpe/1-t", "T", "", patch, idempotency_key="rev:1")
    assert made == again
    assert len(fake_github.pulls) == 1
    assert posts(fake_github, "/pulls") == 1


def test_a_retried_create_after_a_lost_branch_write_reuses_the_branch(
    fake_github: FakeGitHub, provider: GitHubProvider, tmp_path: Path
) -> None:
    item = provider.work_item_writer.create_work_item("T", "b")
    patch = patch_for(fake_github, tmp_path)
    fake_github.fail(Fault("POST", r"/git/refs$", 502, apply_first=True))
    fake_github.fail(Fault("POST", r"/pulls$", 502))
    writer = provider.revision_writer
    with pytest.raises(ProviderError):
        writer.create_from_patch(item, "cpe/1-t", "T", "", patch, idempotency_key="rev:2")
    branch_head = fake_github.git.resolve("refs/heads/cpe/1-t")
    revision = writer.create_from_patch(item, "cpe/1-t", "T", "", patch, idempotency_key="rev:2")
    assert revision.head_sha == branch_head  # the commit made the first time, not a new one
    assert len(fake_github.pulls) == 1


def test_an_update_applied_before_a_502_is_not_committed_twice(
    fake_github: FakeGitHub, provider: GitHubProvider, tmp_path: Path
) -> None:
    item = provider.work_item_writer.create_work_item("T", "b")
    writer = provider.revision_writer
    first = writer.create_from_patch(
        item, "cpe/1-t", "T", "", patch_for(fake_github, tmp_path, "added")
    )
    patch = patch_for(fake_github, tmp_path, "modified")
    fake_github.fail(Fault("PATCH", r"/git/refs/heads/cpe/1-t$", 502, apply_first=True))
    once = writer.update_from_patch(first.id, patch, idempotency_key="update:1")
    twice = writer.update_from_patch(first.id, patch, idempotency_key="update:1")
    assert once.head_sha == twice.head_sha != first.head_sha
    assert fake_github.git.line("rev-parse", f"{once.head_sha}^") == first.head_sha


def test_a_review_posted_before_a_502_is_not_posted_twice(
    fake_github: FakeGitHub, provider: GitHubProvider, tmp_path: Path
) -> None:
    item = provider.work_item_writer.create_work_item("T", "b")
    revision = provider.revision_writer.create_from_patch(
        item, "cpe/1-t", "T", "", patch_for(fake_github, tmp_path)
    )
    review = AgentReview(
        verdict="needs-changes",
        summary="Again.",
        comments=(AgentReviewComment(path="src/app.py", line=2, body="Here."),),
    )
    fake_github.fail(Fault("POST", r"/reviews$", 502, apply_first=True))
    provider.revision_writer.post_review(revision.id, revision.head_sha, review)
    provider.revision_writer.post_review(revision.id, revision.head_sha, review)
    assert len(fake_github.reviews) == 1
    assert len(fake_github.review_comments) == 1


def test_a_merge_applied_before_a_502_returns_its_commit(
    fake_github: FakeGitHub, provider: GitHubProvider, tmp_path: Path
) -> None:
    item = provider.work_item_writer.create_work_item("T", "b")
    revision = provider.revision_writer.create_from_patch(
        item, "cpe/1-t", "T", "", patch_for(fake_github, tmp_path)
    )
    fake_github.fail(Fault("PUT", r"/merge$", 502, apply_first=True))
    merged = provider.revision_writer.merge(revision.id)
    assert merged == fake_github.default_head()
    assert provider.revision_writer.merge(revision.id) == merged


def test_a_request_the_client_library_refuses_before_sending_is_not_called_githubs_answer() -> None:
    """githubkit validates a request body against GitHub's schema before sending it: such a
    failure is cpe's request, and nothing reached GitHub."""
    from githubkit import GitHub  # noqa: PLC0415

    from adapters.providers.github.errors import translated  # noqa: PLC0415

    client = GitHub("never-sent", base_url="http://127.0.0.1:9/")
    with pytest.raises(ProviderError) as caught, translated("label issue #1"):
        client.rest.issues.set_labels("acme", "widgets", 1, labels=[])
    message = str(caught.value)
    assert message.startswith("label issue #1: the GitHub client refused the request before")
    assert "GitHub's answer" not in message
    assert caught.value.transient is False

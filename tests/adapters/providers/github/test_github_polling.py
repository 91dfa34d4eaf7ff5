"""Polling the GitHub provider: every polling read is conditional, so an idle poll costs no rate
limit, and a poll after one change costs a few counted requests however many items are
unchanged. Also: one connection for everything."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from adapters.providers.github import GitHubProvider
from tests.adapters.providers.edits import EDITS
from tests.fakes.github import FakeGitHub
from tests.support.git import make_patch
from tests.support.github import github_provider


@pytest.fixture
def provider(fake_github: FakeGitHub) -> Iterator[GitHubProvider]:
    with github_provider(fake_github) as made:
        yield made


def poll(provider: GitHubProvider) -> None:
    provider.work_item_reader.list_work_items()
    provider.revision_reader.list_revisions()


def counted(fake_github: FakeGitHub) -> int:
    return sum(1 for r in fake_github.requests if r.counted)


def populate(fake_github: FakeGitHub, provider: GitHubProvider, tmp_path: Path, issues: int) -> str:
    """``issues`` issues, and one open revision with green CI; its head."""
    for i in range(issues):
        fake_github.add_issue(f"Issue {i}", labels=("status:pending",))
    item = provider.work_item_writer.create_work_item("With a revision", "b")
    patch = make_patch(fake_github.git.path, tmp_path / "patch", EDITS["modified"])
    revision = provider.revision_writer.create_from_patch(item, "cpe/x", "X", "", patch)
    fake_github.add_check_run(revision.head_sha, "tests")
    fake_github.add_status(revision.head_sha, "lint", "success")
    return revision.head_sha


def test_an_idle_poll_is_answered_304_and_costs_no_rate_limit(
    fake_github: FakeGitHub, provider: GitHubProvider, tmp_path: Path
) -> None:
    populate(fake_github, provider, tmp_path, issues=250)
    poll(provider)
    poll(provider)
    fake_github.clear_requests()
    poll(provider)
    assert fake_github.requests, "a poll asks GitHub"
    assert all(r.if_none_match and r.status == 304 for r in fake_github.requests)
    assert counted(fake_github) == 0


def test_an_idle_poll_does_not_grow_with_unchanged_issues(
    fake_github: FakeGitHub, provider: GitHubProvider, tmp_path: Path
) -> None:
    populate(fake_github, provider, tmp_path, issues=5)
    poll(provider)
    poll(provider)
    fake_github.clear_requests()
    provider.work_item_reader.list_work_items()
    small = len(fake_github.requests)
    for i in range(300):
        fake_github.add_issue(f"More {i}")
    provider.work_item_reader.list_work_items()  # reads the 300 and moves its window on
    provider.work_item_reader.list_work_items()  # the new window's first answer
    fake_github.clear_requests()
    provider.work_item_reader.list_work_items()
    assert len(fake_github.requests) == small == 1  # the issues since the watermark (pulls: the
    # revision poller lists them; the work items reuse that)
    assert counted(fake_github) == 0


def test_one_changed_issue_costs_one_counted_request(
    fake_github: FakeGitHub, provider: GitHubProvider, tmp_path: Path
) -> None:
    populate(fake_github, provider, tmp_path, issues=250)
    poll(provider)
    poll(provider)
    fake_github.edit_issue(3, title="Renamed")
    fake_github.clear_requests()
    items = {i.id: i for i in provider.work_item_reader.list_work_items()}
    assert items["3"].title == "Renamed"
    assert counted(fake_github) == 1


def test_a_running_pipeline_is_asked_about_every_poll(
    fake_github: FakeGitHub, provider: GitHubProvider, tmp_path: Path
) -> None:
    head = populate(fake_github, provider, tmp_path, issues=0)
    fake_github.add_check_run(head, "tests", "in_progress", None)  # a re-run starts
    provider.revision_reader.list_revisions()
    fake_github.add_check_run(head, "tests", "completed", "failure")
    [revision] = provider.revision_reader.list_revisions()
    assert revision.pipeline.status == "failure"
    assert revision.pipeline.reason == "failed: tests (failure)"


def test_a_finished_pipeline_is_asked_about_again_within_the_recheck_cycles(
    fake_github: FakeGitHub, tmp_path: Path
) -> None:
    with github_provider(fake_github, settled_recheck_cycles=3) as provider:
        head = populate(fake_github, provider, tmp_path, issues=0)
        [revision] = provider.revision_reader.list_revisions()
        assert revision.pipeline.status == "success"
        fake_github.add_check_run(head, "tests", "completed", "failure")  # a re-run failed
        seen = [provider.revision_reader.list_revisions()[0].pipeline.status for _ in range(3)]
    assert "failure" in seen


def test_staggered_pipeline_rechecks_are_conditional_and_cost_no_rate_limit(
    fake_github: FakeGitHub, tmp_path: Path
) -> None:
    with github_provider(fake_github, settled_recheck_cycles=3) as provider:
        populate(fake_github, provider, tmp_path, issues=0)
        [revision] = provider.revision_reader.list_revisions()
        assert revision.pipeline.status == "success"  # settled: re-checked every 3rd cycle
        fake_github.clear_requests()
        for _ in range(3):
            provider.revision_reader.list_revisions()
    rechecks = [r for r in fake_github.requests if r.path.endswith(("/check-runs", "/statuses"))]
    assert sorted(r.path.rsplit("/", 1)[-1] for r in rechecks) == ["check-runs", "statuses"]
    assert all(r.if_none_match and r.status == 304 for r in fake_github.requests)
    assert counted(fake_github) == 0


def test_a_push_anywhere_costs_the_pull_request_list_and_nothing_else(
    fake_github: FakeGitHub, provider: GitHubProvider, tmp_path: Path
) -> None:
    """Every pull request embeds the repository, whose ``pushed_at`` moves with any push: the
    list's ETag changes then. Statuses are read from the list of a commit's statuses, which
    embeds no repository, so a settled recheck after a push is still answered 304."""
    populate(fake_github, provider, tmp_path, issues=3)
    fake_github.git.set_ref("refs/heads/elsewhere", fake_github.default_head())
    for _ in range(12):  # past the grace cycles
        poll(provider)
    for i in range(10):  # every pull request's pipeline is rechecked once in these cycles
        fake_github.push("elsewhere", {f"e{i}.txt": "x"}, "elsewhere")
        fake_github.clear_requests()
        poll(provider)
        assert [r.path.rsplit("/", 1)[-1] for r in fake_github.requests if r.counted] == ["pulls"]


def test_reviews_re_read_for_a_pull_request_that_moved_are_a_conditional_request(
    fake_github: FakeGitHub, provider: GitHubProvider, tmp_path: Path
) -> None:
    populate(fake_github, provider, tmp_path, issues=0)
    [revision] = provider.revision_reader.list_revisions()
    fake_github.edit_issue(
        int(revision.id), title="Renamed"
    )  # the pull request moves, its reviews not
    fake_github.clear_requests()
    [renamed] = provider.revision_reader.list_revisions()
    assert renamed.title == "Renamed"
    [reviews] = [r for r in fake_github.requests if r.path.endswith("/reviews")]
    assert (reviews.if_none_match, reviews.status, reviews.counted) == (True, 304, False)


def test_every_request_goes_over_one_connection(
    fake_github: FakeGitHub, provider: GitHubProvider, tmp_path: Path
) -> None:
    populate(fake_github, provider, tmp_path, issues=3)
    poll(provider)
    assert len({r.connection for r in fake_github.requests}) == 1


def test_every_request_names_the_api_version_including_later_pages(
    fake_github: FakeGitHub, provider: GitHubProvider, tmp_path: Path
) -> None:
    populate(fake_github, provider, tmp_path, issues=250)  # three pages of issues
    poll(provider)
    pages = [r for r in fake_github.requests if r.path.endswith("/issues") and "page=3" in r.query]
    assert pages
    assert {r.api_version for r in fake_github.requests} == {"2026-03-10"}


def test_every_call_has_a_timeout(fake_github: FakeGitHub) -> None:
    with github_provider(fake_github, request_timeout=7.5) as provider:
        timeout = provider.api.gh.config.timeout
    assert (timeout.connect, timeout.read, timeout.write, timeout.pool) == (7.5, 7.5, 7.5, 7.5)


def test_an_issue_closed_just_before_a_full_resync_reads_done_not_gone(
    fake_github: FakeGitHub,
) -> None:
    """A full resync lists the open issues: one closed since the last sync is not among them,
    and is asked for, so it reads done (its dependents unblock) instead of vanishing."""
    number = fake_github.add_issue("Closed meanwhile", labels=("status:pending",))
    with github_provider(fake_github, full_resync_cycles=1) as provider:  # every sync is full
        [before] = provider.work_item_reader.list_work_items()
        assert before.status == "pending"
        fake_github.edit_issue(number, editor="acme", state="closed")
        [after] = provider.work_item_reader.list_work_items()
    assert (after.id, after.status) == (str(number), "done")

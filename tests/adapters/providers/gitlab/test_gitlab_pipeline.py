"""A commit's pipeline from GitLab's pipelines and commit statuses (``gitlab/pipeline.py``): the
combining rules, on answers shaped as GitLab's (doc/api/commits.md "List the statuses of a
commit", doc/api/pipelines.md); then a revision's pipeline and the baseline on the fake GitLab,
with a CI reporting statuses."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from adapters.providers.gitlab import GitLabProvider
from adapters.providers.gitlab.pipeline import combine
from domain.models import Revision
from domain.ports import BaselineReader
from tests.adapters.providers.edits import EDITS
from tests.fakes.gitlab import FakeGitLab
from tests.support.git import make_patch
from tests.support.gitlab_provider import gitlab_provider


def status(name: str, state: str, *, allow_failure: bool = False) -> dict[str, Any]:
    return {
        "id": hash(name) % 1000,
        "name": name,
        "status": state,
        "allow_failure": allow_failure,
        "target_url": f"https://ci.example/{name}",
        "sha": "a" * 40,
        "ref": "cpe/1-x",
    }


def pipeline(state: str, number: int = 7) -> dict[str, Any]:
    return {
        "id": number,
        "status": state,
        "sha": "a" * 40,
        "web_url": f"https://gitlab.example/p/-/pipelines/{number}",
    }


def test_no_pipeline_and_no_status_is_no_ci() -> None:
    assert combine([], []).status == "none"


def test_all_green_is_success() -> None:
    found = combine([pipeline("success")], [status("test", "success"), status("lint", "skipped")])
    assert (found.status, found.failed_checks) == ("success", ())


def test_a_failed_job_fails_the_pipeline_and_is_named() -> None:
    found = combine(
        [pipeline("failed")],
        [status("test", "failed"), status("lint", "success"), status("docs", "canceled")],
    )
    assert found.status == "failure"
    assert found.failed_checks == ("docs", "test")
    assert found.reason == "failed: docs (canceled), test (failed)"


def test_a_failure_wins_over_a_job_still_running() -> None:
    found = combine([pipeline("running")], [status("test", "failed"), status("e2e", "running")])
    assert (found.status, found.failed_checks) == ("failure", ("test",))


@pytest.mark.parametrize("state", ["created", "pending", "running", "waiting_for_resource"])
def test_a_job_not_finished_keeps_the_pipeline_pending(state: str) -> None:
    found = combine([pipeline("running")], [status("test", state), status("lint", "success")])
    assert found.status == "pending"
    assert found.reason == f"running: test ({state})"


def test_a_job_allowed_to_fail_does_not_fail_the_pipeline() -> None:
    found = combine(
        [pipeline("success")],
        [status("flaky", "failed", allow_failure=True), status("test", "success")],
    )
    assert (found.status, found.failed_checks) == ("success", ())


def test_a_manual_job_waits_only_when_it_blocks() -> None:
    optional = combine([pipeline("success")], [status("deploy", "manual", allow_failure=True)])
    blocking = combine([pipeline("manual")], [status("deploy", "manual")])
    assert optional.status == "success"
    assert (blocking.status, blocking.reason) == ("pending", "running: deploy (manual)")


def test_a_pipeline_that_failed_with_no_job_fails_under_its_own_name() -> None:
    """A broken .gitlab-ci.yml: the pipeline fails before any job exists."""
    found = combine([pipeline("failed", 12)], [])
    assert (found.status, found.failed_checks) == ("failure", ("pipeline #12",))
    assert found.url == "https://gitlab.example/p/-/pipelines/12"


def test_a_pipeline_created_before_its_jobs_are_listed_is_pending() -> None:
    assert combine([pipeline("created")], []).status == "pending"


def test_only_the_newest_pipeline_speaks_for_itself() -> None:
    """An older pipeline of the same sha that failed (since re-run) does not fail it."""
    found = combine([pipeline("success", 9), pipeline("failed", 8)], [status("test", "success")])
    assert found.status == "success"


def test_an_outside_ci_status_counts_like_a_job() -> None:
    """``POST /statuses/:sha`` from another CI: listed among the commit's statuses."""
    found = combine([pipeline("failed")], [status("ci/jenkins", "failed")])
    assert (found.status, found.failed_checks) == ("failure", ("ci/jenkins",))
    assert found.url == "https://ci.example/ci/jenkins"


# ---------------------------------------------------------------------------- on the fake GitLab


@pytest.fixture
def provider(fake_gitlab: FakeGitLab) -> Iterator[GitLabProvider]:
    with gitlab_provider(fake_gitlab) as made:
        yield made


def open_revision(fake: FakeGitLab, provider: GitLabProvider, tmp_path: Path) -> Revision:
    assert provider.work_item_writer is not None
    assert provider.revision_writer is not None
    item = provider.work_item_writer.create_work_item("T", "b")
    patch = make_patch(fake.git.path, tmp_path / "p", EDITS["added"])
    return provider.revision_writer.create_from_patch(item, "cpe/1-t", "T", "", patch)


def listed(provider: GitLabProvider) -> Revision:
    assert provider.revision_reader is not None
    [revision] = provider.revision_reader.list_revisions()
    return revision


def test_a_revision_without_ci_has_no_pipeline(
    fake_gitlab: FakeGitLab, provider: GitLabProvider, tmp_path: Path
) -> None:
    revision = open_revision(fake_gitlab, provider, tmp_path)
    assert revision.pipeline.status == "none"
    assert listed(provider).pipeline.status == "none"


def test_a_revisions_pipeline_follows_what_ci_reports_on_its_head(
    fake_gitlab: FakeGitLab, provider: GitLabProvider, tmp_path: Path
) -> None:
    head = open_revision(fake_gitlab, provider, tmp_path).head_sha
    fake_gitlab.report_status(head, "test", "running")
    fake_gitlab.report_status(head, "lint", "success")
    assert (listed(provider).pipeline.status, listed(provider).pipeline.reason) == (
        "pending",
        "running: test (running)",
    )
    fake_gitlab.report_status(head, "test", "failed")
    pipeline = listed(provider).pipeline
    assert (pipeline.status, pipeline.failed_checks) == ("failure", ("test",))
    assert pipeline.url == f"{fake_gitlab.base_url}/ci/test"


def test_a_pending_pipeline_is_read_again_until_it_is_green(
    fake_gitlab: FakeGitLab, provider: GitLabProvider, tmp_path: Path
) -> None:
    head = open_revision(fake_gitlab, provider, tmp_path).head_sha
    fake_gitlab.report_status(head, "test", "pending")
    assert listed(provider).pipeline.status == "pending"
    fake_gitlab.report_status(head, "test", "success")
    assert listed(provider).pipeline.status == "success"


def test_the_baseline_is_the_default_branchs_head_and_its_pipeline(
    fake_gitlab: FakeGitLab, provider: GitLabProvider
) -> None:
    reader = provider.revision_reader
    assert isinstance(reader, BaselineReader)
    head = fake_gitlab.default_head()
    fake_gitlab.report_status(head, "test", "failed", ref="main")
    baseline = reader.baseline()
    assert baseline is not None
    assert baseline.sha == head
    assert (baseline.pipeline.status, baseline.pipeline.failed_checks) == ("failure", ("test",))

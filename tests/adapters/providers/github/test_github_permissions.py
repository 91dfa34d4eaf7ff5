"""The GitHub provider with the tokens people really give it.

A fine-grained personal access token cannot be given the Checks permission: GitHub answers 403
on ``check-runs``, which cpe reads as "no check runs" (statuses still count) with one warning
naming the token's kind, for pull requests and the default branch alike. A token that may not
create labels (a triage user) stops cpe at start, in one line naming the permission, when the
status labels are missing; with the labels there, labels GitHub dropped from a new issue are
applied after it is made.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from adapters.providers.github.labels import STATUS_LABELS
from domain.errors import ConfigError
from tests.adapters.providers.edits import EDITS
from tests.fakes.github import FakeGitHub, Fault
from tests.fakes.github.records import FINE_GRAINED_PERMISSIONS, Access
from tests.support.git import make_patch
from tests.support.github import github_provider, running_github

FINE_GRAINED = "github_pat_11AAAAAAA0fine"
TRIAGE = "ghp_triage0000000000000000000000000000"
STATUS_LABEL_NAMES = [f"status:{s}" for s in STATUS_LABELS]


@pytest.fixture
def fake_github(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeGitHub]:
    tokens: dict[str, str | Access] = {
        "test-token": "cpe-bot",
        FINE_GRAINED: Access("cpe-bot", "fine-grained", permissions=FINE_GRAINED_PERMISSIONS),
        TRIAGE: Access("triager", role="triage"),
    }
    with running_github(tmp_path, monkeypatch, tokens=tokens) as gh:
        yield gh


def refusals(fake_github: FakeGitHub, path_end: str) -> int:
    return sum(1 for r in fake_github.requests if r.path.endswith(path_end) and r.status == 403)


# ------------------------------------------------------------------ check runs


def test_a_fine_grained_token_sees_statuses_and_is_told_once_why_not_check_runs(
    fake_github: FakeGitHub, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with github_provider(fake_github) as writer:  # a classic token opens the revision
        item = writer.work_item_writer.create_work_item("T", "b")
        patch = make_patch(fake_github.git.path, tmp_path / "patch", EDITS["modified"])
        revision = writer.revision_writer.create_from_patch(item, "cpe/1-t", "T", "", patch)
    fake_github.add_check_run(revision.head_sha, "actions", conclusion="failure")
    fake_github.add_status(revision.head_sha, "lint", "success")
    fake_github.add_status(fake_github.default_head(), "lint", "success")
    with (
        caplog.at_level(logging.WARNING),
        github_provider(fake_github, token=FINE_GRAINED) as provider,
    ):
        for _ in range(3):
            [seen] = provider.revision_reader.list_revisions()
            baseline = provider.revision_reader.baseline()
    assert seen.pipeline.status == "success"
    assert seen.pipeline.reason is None
    assert baseline is not None
    assert baseline.pipeline.status == "success"
    [warning] = [r for r in caplog.records if "check runs" in r.getMessage()]
    assert "fine-grained personal access token" in warning.getMessage()
    assert "Checks permission" in warning.getMessage()
    assert refusals(fake_github, "/check-runs") == 1  # not asked again


def test_an_app_without_checks_permission_is_not_a_failed_poll(
    fake_github: FakeGitHub, tmp_path: Path
) -> None:
    fake_github.http.tokens["ghs_app"] = Access(
        "app[bot]", "app", permissions={"statuses": "read", "issues": "write"}
    )
    with github_provider(fake_github, token="ghs_app") as provider:
        assert provider.revision_reader.baseline() is not None


# ------------------------------------------------------------------ labels


def test_the_status_labels_are_created_at_start(fake_github: FakeGitHub) -> None:
    with github_provider(fake_github):
        pass
    assert sorted(n for n in fake_github.labels if n.startswith("status:")) == sorted(
        STATUS_LABEL_NAMES
    )
    with github_provider(fake_github):
        pass
    assert "cpe:admit" in fake_github.labels  # what a trusted person admits an issue with
    assert [r.method for r in fake_github.requests if r.path.endswith("/labels")] == [
        *["GET"] + ["POST"] * (len(STATUS_LABELS) + 1),
        "GET",  # the second start finds them all
    ]


def test_a_token_that_may_not_create_the_status_labels_stops_cpe_at_start(
    fake_github: FakeGitHub,
) -> None:
    with pytest.raises(ConfigError) as refused, github_provider(fake_github, token=TRIAGE):
        pass
    message = str(refused.value)
    assert "\n" not in message
    assert "status:pending" in message
    assert "write access to the repository" in message
    assert "classic personal access token" in message
    assert not any(n.startswith("status:") for n in fake_github.labels)


def test_labels_github_drops_from_a_triage_users_new_issue_are_applied_after(
    fake_github: FakeGitHub,
) -> None:
    for name in [*STATUS_LABEL_NAMES, "bug"]:
        fake_github.label_id(name)
    with github_provider(fake_github, token=TRIAGE) as provider:
        made = provider.work_item_writer.create_work_item("T", "b", labels=["bug", "nope"])
        [item] = provider.work_item_reader.list_work_items()
    assert fake_github.issues[int(made)].labels == ["bug", "status:pending"]
    assert (item.status, item.labels) == ("pending", ("bug",))
    assert "nope" not in fake_github.labels


def test_a_status_change_by_a_triage_user_uses_the_labels_that_exist(
    fake_github: FakeGitHub,
) -> None:
    for name in STATUS_LABEL_NAMES:
        fake_github.label_id(name)
    number = fake_github.add_issue("T", labels=("status:pending",))
    with github_provider(fake_github, token=TRIAGE) as provider:
        provider.work_item_writer.transition_status(str(number), "in-progress")
    assert fake_github.issues[number].labels == ["status:in-progress"]


def test_a_provider_that_cannot_reach_github_at_start_checks_the_labels_on_first_use(
    fake_github: FakeGitHub,
) -> None:
    fake_github.fail(Fault("GET", r"/labels$", 503))
    with github_provider(fake_github, read_attempts=1) as provider:
        assert not fake_github.labels
        provider.work_item_writer.create_work_item("T", "b")
    assert "status:blocked" in fake_github.labels

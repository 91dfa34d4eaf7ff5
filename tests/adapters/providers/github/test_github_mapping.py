"""How the GitHub provider maps GitHub onto the domain: status labels, dependencies, linked
revisions, pipelines from checks and statuses, reviews anchored to the diff, configuration."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from githubkit import AppInstallationAuthStrategy, TokenAuthStrategy

from adapters.providers.github import GitHubProvider, GitHubSettings, markers
from adapters.providers.github.auth import resolve_auth
from adapters.providers.github.reviews import right_side_lines
from domain.errors import ConfigError
from domain.models import Revision, Status, WorkItem, WorkItemId
from domain.results import AgentReview, AgentReviewComment
from tests.adapters.providers.edits import EDITS
from tests.fakes.github import FakeGitHub, Fault, rsa_key_pair
from tests.support.git import make_patch
from tests.support.github import TOKEN_ENV, github_provider, settings_for


@pytest.fixture
def provider(fake_github: FakeGitHub) -> Iterator[GitHubProvider]:
    with github_provider(fake_github) as made:
        yield made


def items(provider: GitHubProvider) -> dict[str, WorkItem]:
    return {i.id: i for i in provider.work_item_reader.list_work_items()}


def revision(fake_github: FakeGitHub, provider: GitHubProvider, tmp_path: Path) -> Revision:
    item = provider.work_item_writer.create_work_item("T", "b")
    patch = make_patch(fake_github.git.path, tmp_path / "patch", EDITS["modified"])
    return provider.revision_writer.create_from_patch(item, "cpe/1-t", "T", "", patch)


# ------------------------------------------------------------------ work items


def test_a_status_change_replaces_the_labels_in_one_request_and_keeps_the_others(
    fake_github: FakeGitHub, provider: GitHubProvider
) -> None:
    number = fake_github.add_issue("Mine", labels=("priority", "status:pending"))
    fake_github.clear_requests()
    provider.work_item_writer.transition_status(WorkItemId(str(number)), "in-progress")
    writes = [
        (r.method, r.path.rsplit("/", 1)[-1]) for r in fake_github.requests if r.method != "GET"
    ]
    assert writes == [("PUT", "labels")]
    assert fake_github.issues[number].labels == ["priority", "status:in-progress"]
    [item] = provider.work_item_reader.list_work_items()
    assert (item.status, item.labels) == ("in-progress", ("priority",))


def test_done_on_an_issue_with_only_its_status_label_closes_it_and_removes_the_label(
    fake_github: FakeGitHub, provider: GitHubProvider
) -> None:
    """Nothing is left to set: the labels are removed (githubkit refuses an empty set-labels
    before sending it, so done failed on every such issue)."""
    number = fake_github.add_issue("Mine", labels=("status:approved",))
    provider.work_item_writer.transition_status(WorkItemId(str(number)), "done")
    issue = fake_github.issues[number]
    assert (issue.state, issue.labels) == ("closed", [])
    assert ("DELETE", "labels") in [
        (r.method, r.path.rsplit("/", 1)[-1]) for r in fake_github.requests
    ]


class StatusAfterEachWrite(httpx.BaseTransport):
    """The provider's wire, noting how the issue reads (its status, as the poller would derive
    it) the moment each write has been applied."""

    def __init__(self, fake_github: FakeGitHub, number: int) -> None:
        self.fake, self.number = fake_github, number
        self.inner = httpx.HTTPTransport()
        self.seen: list[str] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        response = self.inner.handle_request(request)
        if request.method != "GET":
            with self.fake.lock:
                issue = self.fake.issues[self.number]
                self.seen.append(markers.status_of(issue.labels, issue.state == "closed"))
        return response

    def close(self) -> None:
        self.inner.close()


@pytest.mark.parametrize(
    ("start", "to"),
    [
        ("pending", "in-progress"),
        ("in-progress", "in-review"),
        ("in-review", "done"),
        ("done", "blocked"),
        ("done", "done"),
    ],
)
def test_at_no_instant_of_a_status_change_does_the_issue_read_another_status(
    fake_github: FakeGitHub, start: Status, to: Status
) -> None:
    """A poll that lands between two writes of a status change sees the old status or the new
    one: ``pending`` (no status label) in between would read as a person sending it back."""
    # a closed issue may still carry the status label it had (closed by hand)
    label = "status:in-review" if start == "done" else f"status:{start}"
    state = "closed" if start == "done" else "open"
    number = fake_github.add_issue("Mine", labels=("priority", label), state=state)
    wire = StatusAfterEachWrite(fake_github, number)
    with GitHubProvider(
        settings_for(fake_github), environ={TOKEN_ENV: "test-token"}, inner_transport=wire
    ) as provider:
        wire.seen.clear()  # the status labels made at start
        provider.work_item_writer.transition_status(WorkItemId(str(number)), to)
        [item] = provider.work_item_reader.list_work_items()
    assert set(wire.seen) <= {start, to}
    if start != to:
        assert wire.seen[-1] == to
    assert (item.status, item.labels) == (to, ("priority",))


def test_blockers_are_body_lines_and_native_dependencies(
    fake_github: FakeGitHub, provider: GitHubProvider
) -> None:
    first = provider.work_item_writer.create_work_item("First", "b")
    second = provider.work_item_writer.create_work_item("Second", "b", blocked_by=[first])
    body = fake_github.issues[int(second)].body or ""
    assert f"Blocked by #{first}" in body
    assert fake_github.issues[int(second)].blocked_by == [int(first)]  # sent as the database id
    assert provider.work_item_reader.get_work_item_body(second) == "b"


def test_a_dependency_added_on_github_is_a_blocker(
    fake_github: FakeGitHub, provider: GitHubProvider
) -> None:
    blocker = fake_github.add_issue("Blocker")
    blocked = fake_github.add_issue("Blocked")
    fake_github.edit_issue(blocked, blocked_by=[blocker])
    assert items(provider)[str(blocked)].blocked_by == (str(blocker),)


@pytest.mark.parametrize("status", [404, 422, 502])
def test_a_work_item_is_made_with_its_body_line_when_native_dependencies_fail(
    fake_github: FakeGitHub, provider: GitHubProvider, status: int
) -> None:
    first = provider.work_item_writer.create_work_item("First", "b")
    fake_github.fail(Fault("POST", r"/dependencies/blocked_by$", status))
    second = provider.work_item_writer.create_work_item("Second", "b", blocked_by=[first])
    assert fake_github.http.faults[0].hits == 1  # the native dependency was asked for, and refused
    assert fake_github.issues[int(second)].blocked_by == []
    assert f"Blocked by #{first}" in (fake_github.issues[int(second)].body or "")
    assert items(provider)[second].blocked_by == (first,)
    assert provider.work_item_reader.get_work_item_body(second) == "b"


def test_a_native_blocker_beside_a_different_body_line_is_read(
    fake_github: FakeGitHub, provider: GitHubProvider
) -> None:
    named = fake_github.add_issue("Named in the body")
    native = fake_github.add_issue("Native only")
    blocked = fake_github.add_issue("Blocked", body=f"Blocked by #{named}")
    fake_github.edit_issue(blocked, blocked_by=[native])  # one line, one native: the counts agree
    assert items(provider)[str(blocked)].blocked_by == (str(named), str(native))


def test_re_reading_an_issue_with_native_blockers_costs_no_rate_limit(
    fake_github: FakeGitHub, provider: GitHubProvider
) -> None:
    blocker = fake_github.add_issue("Blocker")
    blocked = fake_github.add_issue("Blocked")
    fake_github.edit_issue(blocked, blocked_by=[blocker])
    provider.work_item_reader.get_work_item_body(WorkItemId(str(blocked)))
    fake_github.clear_requests()
    provider.work_item_reader.get_work_item_body(WorkItemId(str(blocked)))
    paths = {r.path.rsplit("/", 2)[-1] for r in fake_github.requests}
    assert paths == {str(blocked), "blocked_by"}  # the issue and its native blockers
    assert all(r.if_none_match and r.status == 304 and not r.counted for r in fake_github.requests)


def test_a_native_blocker_in_another_repository_is_not_the_local_issue_of_its_number(
    fake_github: FakeGitHub, provider: GitHubProvider
) -> None:
    local = fake_github.add_issue("Local twelve", state="closed")
    foreign = fake_github.add_foreign_issue("other/lib", "Their fix")
    assert foreign == local  # the same number, in two repositories
    blocked = fake_github.add_issue("Waits for their fix")
    fake_github.edit_issue(blocked, foreign_blockers=[("other/lib", foreign)])
    assert items(provider)[str(blocked)].blocked_by == (f"other/lib#{foreign}",)
    fake_github.close_foreign_issue("other/lib", foreign)
    assert items(provider)[str(blocked)].blocked_by == ()  # closed there: blocks no more


def test_a_blocked_by_line_naming_another_repository_keeps_its_repository(
    fake_github: FakeGitHub, provider: GitHubProvider
) -> None:
    foreign = fake_github.add_foreign_issue("other/lib", "Their fix")
    here = fake_github.add_issue("Ours")
    body = f"Blocked by other/lib#{foreign}, #{here} and acme/widgets#{here}"
    blocked = fake_github.add_issue("Waits", body=body)
    assert items(provider)[str(blocked)].blocked_by == (f"other/lib#{foreign}", str(here))


def test_an_unreadable_blocker_in_another_repository_keeps_blocking(
    fake_github: FakeGitHub, provider: GitHubProvider
) -> None:
    blocked = fake_github.add_issue("Waits", body="Blocked by secret/repo#3")
    assert items(provider)[str(blocked)].blocked_by == ("secret/repo#3",)


def test_a_work_item_made_with_a_blocker_in_another_repository_names_it(
    fake_github: FakeGitHub, provider: GitHubProvider
) -> None:
    foreign = fake_github.add_foreign_issue("other/lib", "Their fix")
    made = provider.work_item_writer.create_work_item(
        "Waits", "b", blocked_by=[WorkItemId(f"other/lib#{foreign}")]
    )
    assert f"Blocked by other/lib#{foreign}" in (fake_github.issues[int(made)].body or "")
    assert items(provider)[made].blocked_by == (f"other/lib#{foreign}",)


def test_a_closed_blocker_is_listed_as_done(
    fake_github: FakeGitHub, provider: GitHubProvider
) -> None:
    old = fake_github.add_issue("Finished long ago", state="closed")
    waiting = fake_github.add_issue("Waiting", body=f"Needs the old one.\n\nBlocked by #{old}")
    listed = items(provider)
    assert listed[str(waiting)].blocked_by == (str(old),)
    assert listed[str(old)].status == "done"


def test_pull_requests_are_not_work_items(
    fake_github: FakeGitHub, provider: GitHubProvider, tmp_path: Path
) -> None:
    made = revision(fake_github, provider, tmp_path)
    assert made.id not in items(provider)


def test_a_pull_request_is_linked_by_its_branch_name(
    fake_github: FakeGitHub, provider: GitHubProvider, tmp_path: Path
) -> None:
    made = revision(fake_github, provider, tmp_path)
    number = int(made.id)
    fake_github.issues[number].body = "No closing keyword here."
    fake_github.edit_issue(number)
    [listed] = provider.revision_reader.list_revisions()
    assert listed.work_item_id == "1"  # from cpe/1-t


# ------------------------------------------------------------------ pipelines


@pytest.mark.parametrize(
    "case",
    [
        ([], [], "none"),
        ([("tests", "completed", "success")], [("lint", "success")], "success"),
        ([("tests", "completed", "success")], [("lint", "failure")], "failure"),
        ([("tests", "in_progress", None)], [("lint", "success")], "pending"),
        ([("tests", "completed", "cancelled")], [], "failure"),
        ([("tests", "completed", "skipped")], [("deploy", "pending")], "pending"),
    ],
)
def test_pipeline_combines_check_runs_and_statuses(
    fake_github: FakeGitHub,
    provider: GitHubProvider,
    tmp_path: Path,
    case: tuple[list[tuple[str, str, str | None]], list[tuple[str, str]], str],
) -> None:
    checks, statuses, expected = case
    head = revision(fake_github, provider, tmp_path).head_sha
    for name, status, conclusion in checks:
        fake_github.add_check_run(head, name, status, conclusion)
    for context, state in statuses:
        fake_github.add_status(head, context, state)
    [listed] = provider.revision_reader.list_revisions()
    assert listed.pipeline.status == expected


def test_a_failed_pipeline_names_its_failed_checks(
    fake_github: FakeGitHub, provider: GitHubProvider, tmp_path: Path
) -> None:
    head = revision(fake_github, provider, tmp_path).head_sha
    fake_github.add_check_run(head, "tests", "completed", "failure")
    fake_github.add_check_run(head, "build", "completed", "success")
    fake_github.add_check_run(head, "e2e", "completed", "timed_out")
    fake_github.add_status(head, "ci/legacy", "error")
    [listed] = provider.revision_reader.list_revisions()
    assert listed.pipeline.status == "failure"
    assert listed.pipeline.failed_checks == ("ci/legacy", "e2e", "tests")


def test_the_baseline_is_the_default_branchs_head_and_its_checks(
    fake_github: FakeGitHub, provider: GitHubProvider
) -> None:
    head = fake_github.git.resolve(f"refs/heads/{fake_github.default_branch}")
    baseline = provider.revision_reader.baseline()
    assert baseline is not None
    assert (baseline.sha, baseline.pipeline.status) == (head, "none")
    fake_github.add_check_run(head, "tests", "completed", "failure")
    fake_github.add_check_run(head, "lint", "completed", "success")
    baseline = provider.revision_reader.baseline()
    assert baseline is not None
    assert baseline.pipeline.status == "failure"
    assert baseline.pipeline.failed_checks == ("tests",)


# ------------------------------------------------------------------ reviews


def test_right_side_lines_are_context_and_added_lines() -> None:
    patch = "@@ -1,3 +1,3 @@\n one\n-two\n+TWO\n three\n@@ -10,1 +10,2 @@\n ten\n+eleven"
    assert right_side_lines(patch) == {1, 2, 3, 10, 11}


def test_comments_outside_the_diff_go_into_the_review_body(
    fake_github: FakeGitHub, provider: GitHubProvider, tmp_path: Path
) -> None:
    made = revision(fake_github, provider, tmp_path)
    review = AgentReview(
        verdict="approve",
        summary="Fine.",
        comments=(
            AgentReviewComment(path="src/app.py", line=1, body="In the diff."),
            AgentReviewComment(path="README.md", line=1, body="Not in the diff."),
            AgentReviewComment(path="src/app.py", line=None, body="Whole file."),
        ),
    )
    provider.revision_writer.post_review(made.id, made.head_sha, review)
    history = provider.revision_reader.get_review_history(made.id)
    assert [c.body for c in history.inline_comments] == ["In the diff."]
    [posted] = history.reviews
    assert "`README.md:1`: Not in the diff." in posted.body
    assert "`src/app.py`: Whole file." in posted.body


def test_a_verdict_on_ones_own_pull_request_is_posted_as_a_comment(
    fake_github: FakeGitHub, provider: GitHubProvider, tmp_path: Path
) -> None:
    made = revision(fake_github, provider, tmp_path)
    provider.revision_writer.post_review(
        made.id, made.head_sha, AgentReview(verdict="approve", summary="Good.")
    )
    [posted] = provider.revision_reader.get_review_history(made.id).reviews
    assert posted.state == "COMMENTED"
    assert "Verdict: approve" in posted.body


def test_a_verdict_on_someone_elses_pull_request_is_the_review_state(
    fake_github: FakeGitHub, provider: GitHubProvider, tmp_path: Path
) -> None:
    fake_github.allow_self_review = True
    made = revision(fake_github, provider, tmp_path)
    provider.revision_writer.post_review(
        made.id, made.head_sha, AgentReview(verdict="needs-changes", summary="No.")
    )
    [posted] = provider.revision_reader.get_review_history(made.id).reviews
    assert (posted.state, posted.author) == ("CHANGES_REQUESTED", "cpe-bot")


# ------------------------------------------------------------------ configuration


def test_the_default_branch_is_asked_of_github(
    fake_github: FakeGitHub, provider: GitHubProvider
) -> None:
    assert provider.default_branch == "main"


def test_the_token_comes_from_the_named_environment_variable() -> None:
    settings = GitHubSettings(repository="acme/widgets", token_env="MY_TOKEN")
    assert isinstance(resolve_auth(settings, {"MY_TOKEN": "t"}), TokenAuthStrategy)
    with pytest.raises(ConfigError, match="MY_TOKEN"):
        resolve_auth(settings, {})


def test_github_app_auth_is_an_option() -> None:
    settings = GitHubSettings(
        repository="acme/widgets", app_id=1, app_installation_id=2, app_private_key_env="KEY"
    )
    private_key, _ = rsa_key_pair()
    assert isinstance(resolve_auth(settings, {"KEY": private_key}), AppInstallationAuthStrategy)
    with pytest.raises(ConfigError, match="KEY does not hold a PEM private key"):
        resolve_auth(settings, {"KEY": "pem"})
    with pytest.raises(ConfigError, match="app_installation_id"):
        resolve_auth(GitHubSettings(repository="acme/widgets", app_id=1), {})

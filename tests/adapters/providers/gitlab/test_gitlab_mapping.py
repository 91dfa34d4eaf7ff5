"""How the GitLab tracker maps issues to work items: statuses as scoped labels (or a mapping),
done as a closed issue, one request per status change, blockers as description lines and (on
Premium) issue links, other projects' blockers, and the incremental listing."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from adapters.providers import ProviderRoles
from adapters.providers.gitlab import GitLabProvider
from domain.errors import NotFoundError, ProviderError
from domain.models import WorkItem, WorkItemId
from tests.fakes.gitlab import FakeGitLab
from tests.support.gitlab import running_gitlab
from tests.support.gitlab_provider import gitlab_provider

TRACKER = ProviderRoles(revisions=False)
STATUSES = ("pending", "in-progress", "in-review", "needs-refinement", "approved", "blocked")


@pytest.fixture
def provider(fake_gitlab: FakeGitLab) -> Iterator[GitLabProvider]:
    with gitlab_provider(fake_gitlab, roles=TRACKER) as made:
        yield made


@pytest.fixture
def premium(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeGitLab]:
    with running_gitlab(tmp_path, monkeypatch, tier="premium") as fake:
        yield fake


def listed(provider: GitLabProvider) -> dict[str, WorkItem]:
    assert provider.work_item_reader is not None
    return {i.id: i for i in provider.work_item_reader.list_work_items()}


def writer(provider: GitLabProvider):  # type: ignore[no-untyped-def]
    assert provider.work_item_writer is not None
    return provider.work_item_writer


def writes(fake: FakeGitLab) -> list[tuple[str, str]]:
    return [(r.method, r.path) for r in fake.requests if r.method != "GET"]


def test_the_status_labels_are_made_at_start_as_scoped_labels(
    fake_gitlab: FakeGitLab, provider: GitLabProvider
) -> None:
    assert {f"status::{s}" for s in STATUSES} | {"cpe:admit"} <= set(fake_gitlab.labels)


def test_a_status_change_is_one_request_swapping_the_label_and_keeping_the_others(
    fake_gitlab: FakeGitLab, provider: GitLabProvider
) -> None:
    item = writer(provider).create_work_item("T", "b", ("feature",))
    fake_gitlab.label(int(item), "priority::high")
    fake_gitlab.clear_requests()
    writer(provider).transition_status(item, "in-review")
    assert writes(fake_gitlab) == [
        ("PUT", f"/api/v4/projects/{fake_gitlab.project_id}/issues/{item}")
    ]
    assert sorted(fake_gitlab.issues[int(item)].labels) == [
        "feature",
        "priority::high",
        "status::in-review",
    ]
    assert listed(provider)[item].status == "in-review"
    assert listed(provider)[item].labels == ("feature", "priority::high")


def test_done_closes_the_issue_and_drops_its_status_label_in_the_same_request(
    fake_gitlab: FakeGitLab, provider: GitLabProvider
) -> None:
    item = writer(provider).create_work_item("T", "b", ("feature",))
    writer(provider).transition_status(item, "approved")
    fake_gitlab.clear_requests()
    writer(provider).transition_status(item, "done")
    assert len(writes(fake_gitlab)) == 1
    record = fake_gitlab.issues[int(item)]
    assert (record.state, record.labels) == ("closed", ["feature"])
    assert listed(provider)[item].status == "done"


def test_leaving_done_reopens_the_issue_with_the_new_status(
    fake_gitlab: FakeGitLab, provider: GitLabProvider
) -> None:
    item = writer(provider).create_work_item("T", "b")
    writer(provider).transition_status(item, "done")
    writer(provider).transition_status(item, "needs-refinement")
    record = fake_gitlab.issues[int(item)]
    assert (record.state, record.labels) == ("opened", ["status::needs-refinement"])


def test_a_status_set_again_writes_nothing(
    fake_gitlab: FakeGitLab, provider: GitLabProvider
) -> None:
    item = writer(provider).create_work_item("T", "b")
    writer(provider).transition_status(item, "in-progress")
    fake_gitlab.clear_requests()
    writer(provider).transition_status(item, "in-progress")
    assert writes(fake_gitlab) == []


def test_a_person_closing_an_issue_makes_it_done_and_a_label_they_set_is_its_status(
    fake_gitlab: FakeGitLab, provider: GitLabProvider
) -> None:
    first = writer(provider).create_work_item("First", "b")
    second = writer(provider).create_work_item("Second", "b")
    fake_gitlab.close_issue(int(first), by="acme")
    fake_gitlab.edit_issue(int(second), by="acme", labels="status::blocked")
    items = listed(provider)
    assert (items[first].status, items[second].status) == ("done", "blocked")


def test_a_mapping_names_the_status_labels(fake_gitlab: FakeGitLab) -> None:
    mapping = {s: f"workflow::{s.replace('-', ' ')}" for s in STATUSES}
    with gitlab_provider(fake_gitlab, roles=TRACKER, status_labels=mapping) as provider:
        assert set(mapping.values()) <= set(fake_gitlab.labels)
        assert "status::pending" not in fake_gitlab.labels
        item = writer(provider).create_work_item("T", "b")
        writer(provider).transition_status(item, "in-review")
        assert fake_gitlab.issues[int(item)].labels == ["workflow::in review"]
        assert listed(provider)[item].status == "in-review"


def test_a_tracker_that_serves_no_work_items_makes_no_labels(fake_gitlab: FakeGitLab) -> None:
    with gitlab_provider(fake_gitlab, roles=ProviderRoles(work_items=False)) as provider:
        assert provider.work_item_reader is None
        assert provider.work_item_writer is None
    assert not any(name.startswith("status::") for name in fake_gitlab.labels)
    assert [r for r in fake_gitlab.requests if r.method != "GET"] == []


# ---------------------------------------------------------------------- blockers


def test_on_free_blockers_are_description_lines_read_back_as_ids(
    fake_gitlab: FakeGitLab, provider: GitLabProvider
) -> None:
    first = writer(provider).create_work_item("First", "b")
    second = writer(provider).create_work_item("Second", "Body", (), (first,))
    assert f"Blocked by #{first}" in (fake_gitlab.issues[int(second)].description or "")
    assert listed(provider)[second].blocked_by == (first,)
    assert fake_gitlab.links == []  # Free has no blocking links: refused once, then not tried
    third = writer(provider).create_work_item("Third", "b", (), (first,))
    link_posts = [p for m, p in writes(fake_gitlab) if m == "POST" and p.endswith("/links")]
    assert len(link_posts) == 1
    assert listed(provider)[third].blocked_by == (first,)


def test_on_premium_a_blocker_is_an_issue_link_and_a_line(premium: FakeGitLab) -> None:
    with gitlab_provider(premium, roles=TRACKER) as provider:
        first = writer(provider).create_work_item("First", "b")
        second = writer(provider).create_work_item("Second", "b", (), (first,))
        [link] = premium.links
        assert {link.source, link.target} == {int(first), int(second)}
        assert listed(provider)[second].blocked_by == (first,)


def test_a_link_a_person_makes_on_premium_blocks_the_item(premium: FakeGitLab) -> None:
    with gitlab_provider(premium, roles=TRACKER) as provider:
        first = writer(provider).create_work_item("First", "b")
        second = writer(provider).create_work_item("Second", "b")
        assert listed(provider)[second].blocked_by == ()
        premium.link(int(second), int(first), "is_blocked_by", by="acme")
        assert listed(provider)[second].blocked_by == (first,)
        premium.close_issue(int(first), by="acme")
        items = listed(provider)
        assert items[first].status == "done"
        assert items[second].blocked_by == (first,)  # the engine unblocks on done


def test_with_blockers_links_no_lines_are_written(premium: FakeGitLab) -> None:
    with gitlab_provider(premium, roles=TRACKER, blockers="links") as provider:
        first = writer(provider).create_work_item("First", "b")
        second = writer(provider).create_work_item("Second", "Body", (), (first,))
        assert "Blocked by" not in (premium.issues[int(second)].description or "")
        assert listed(provider)[second].blocked_by == (first,)


def test_with_blockers_links_on_free_the_refusal_says_what_to_set(
    fake_gitlab: FakeGitLab,
) -> None:
    with gitlab_provider(fake_gitlab, roles=TRACKER, blockers="links") as provider:
        first = writer(provider).create_work_item("First", "b")
        with pytest.raises(ProviderError, match='blockers = "auto" or "text"'):
            writer(provider).create_work_item("Second", "b", (), (first,))


def test_with_blockers_text_no_link_is_asked_for(premium: FakeGitLab) -> None:
    with gitlab_provider(premium, roles=TRACKER, blockers="text") as provider:
        first = writer(provider).create_work_item("First", "b")
        second = writer(provider).create_work_item("Second", "b", (), (first,))
        assert listed(provider)[second].blocked_by == (first,)
    assert not any("/links" in r.path for r in premium.requests)


def test_a_blocker_of_another_project_blocks_until_it_is_closed_there(
    fake_gitlab: FakeGitLab, provider: GitLabProvider
) -> None:
    # The token cannot see "other/project": its blocker keeps blocking, as one unread would.
    item = writer(provider).create_work_item("T", "b", (), (WorkItemId("other/project#4"),))
    assert "Blocked by other/project#4" in (fake_gitlab.issues[int(item)].description or "")
    assert listed(provider)[item].blocked_by == ("other/project#4",)


def test_a_blocker_that_does_not_exist_is_refused(provider: GitLabProvider) -> None:
    with pytest.raises(NotFoundError):
        writer(provider).create_work_item("T", "b", (), (WorkItemId("4242"),))


# ---------------------------------------------------------------------- listing


def test_after_the_first_listing_only_changed_issues_are_asked_for(
    fake_gitlab: FakeGitLab, provider: GitLabProvider
) -> None:
    item = writer(provider).create_work_item("T", "b")
    listed(provider)
    fake_gitlab.clear_requests()
    fake_gitlab.edit_issue(int(item), by="acme", title="Renamed")
    assert listed(provider)[item].title == "Renamed"
    lists = [r for r in fake_gitlab.requests if r.path.endswith("/issues")]
    assert len(lists) == 1
    assert "updated_after=" in lists[0].query
    assert "state=all" in lists[0].query


def test_an_unchanged_listing_is_answered_not_modified(
    fake_gitlab: FakeGitLab, provider: GitLabProvider
) -> None:
    writer(provider).create_work_item("T", "b")
    listed(provider)
    listed(provider)
    before = provider.stats.not_modified
    listed(provider)
    assert provider.stats.not_modified > before


def test_a_full_resync_forgets_an_issue_that_is_gone(fake_gitlab: FakeGitLab) -> None:
    with gitlab_provider(fake_gitlab, roles=TRACKER, full_resync_cycles=2) as provider:
        item = writer(provider).create_work_item("T", "b")
        assert item in listed(provider)
        with fake_gitlab.lock:
            del fake_gitlab.issues[int(item)]  # deleted by an admin: no listing says so
        listed(provider)
        assert item not in listed(provider)


def test_an_issue_body_reads_back_without_the_generated_section(
    fake_gitlab: FakeGitLab, provider: GitLabProvider
) -> None:
    first = writer(provider).create_work_item("First", "b")
    item = writer(provider).create_work_item(
        "T", "The body.\n", (), (first,), idempotency_key="k:1"
    )
    description = fake_gitlab.issues[int(item)].description or ""
    assert "<!-- cpe:key=k:1 -->" in description
    assert provider.work_item_reader is not None
    assert provider.work_item_reader.get_work_item_body(item) == "The body.\n"

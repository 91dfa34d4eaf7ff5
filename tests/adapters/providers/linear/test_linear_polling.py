"""How the Linear provider keeps its picture of the team's issues: cursor pages at start, then
one request an idle poll (issues updated since the newest seen), a full resync now and then;
statuses read from workflow states and blockers from ``blocks`` relations."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from adapters.providers.linear import LinearProvider
from domain.errors import NotFoundError
from domain.models import WorkItem, WorkItemId
from tests.fakes.linear.fake import FakeLinear
from tests.support.linear_provider import linear_provider, with_cpe_states


@pytest.fixture
def linear(fake_linear: FakeLinear) -> FakeLinear:
    return with_cpe_states(fake_linear)


def listed(provider: LinearProvider) -> dict[str, WorkItem]:
    assert provider.work_item_reader is not None
    return {i.id: i for i in provider.work_item_reader.list_work_items()}


def issue_requests(linear: FakeLinear) -> list[dict[str, object]]:
    return [dict(r.variables) for r in linear.requests if r.operation_name == "CpeIssues"]


@pytest.fixture
def provider(linear: FakeLinear) -> Iterator[LinearProvider]:
    with linear_provider(linear, page_size=2, full_resync_cycles=4) as made:
        yield made


def test_the_first_poll_pages_through_the_open_issues(
    linear: FakeLinear, provider: LinearProvider
) -> None:
    for n in range(5):
        linear.open_issue(f"Issue {n}")
    done = linear.open_issue("Done already", state="Done")
    linear.clear_requests()
    items = listed(provider)
    assert sorted(items) == ["ENG-1", "ENG-2", "ENG-3", "ENG-4", "ENG-5"]
    assert done not in items  # completed before cpe looked: never listed
    pages = issue_requests(linear)
    assert [p["after"] is None for p in pages] == [True, False, False]
    assert all(p["first"] == 2 for p in pages)


def test_an_idle_poll_is_one_request_and_a_change_is_seen_by_the_next(
    linear: FakeLinear, provider: LinearProvider
) -> None:
    for n in range(3):
        linear.open_issue(f"Issue {n}")
    listed(provider)
    linear.clear_requests()
    listed(provider)
    assert linear.operations() == ["CpeChanged"]  # anything updated since? one issue asked
    assert linear.requests[0].complexity is not None
    assert linear.requests[0].complexity < 10
    linear.move_to_state("ENG-2", "In Progress")
    linear.clear_requests()
    items = listed(provider)
    assert linear.operations() == ["CpeChanged", "CpeIssues"]
    assert items["ENG-2"].status == "in-progress"
    [changes] = issue_requests(linear)
    assert "updatedAt" in changes["filter"]  # type: ignore[operator]


def test_a_full_resync_drops_archived_issues_and_keeps_done_ones(
    linear: FakeLinear, provider: LinearProvider
) -> None:
    gone, finished, kept = (linear.open_issue(t) for t in ("Gone", "Finished", "Kept"))
    listed(provider)
    linear.archive(gone)
    linear.move_to_state(finished, "Done")
    items = listed(provider)  # incremental: an archived issue is not listed, so not noticed
    assert gone in items
    assert items[finished].status == "done"
    for _ in range(2):
        items = listed(provider)
    assert linear.operations().count("CpeIssue") == 0
    items = listed(provider)  # the 5th poll: a full resync
    assert gone not in items
    assert items[finished].status == "done"
    assert items[kept].status == "pending"


def test_states_read_back_as_statuses_by_name_or_by_type(
    linear: FakeLinear, provider: LinearProvider
) -> None:
    states = {
        "Triage": "pending",
        "Backlog": "pending",
        "Todo": "pending",
        "In Progress": "in-progress",
        "In Review": "in-review",
        "Approved": "approved",
        "Needs Refinement": "needs-refinement",
        "Blocked": "blocked",
        "Done": "done",
        "Canceled": "done",
    }
    made = {linear.open_issue(name, state=name): status for name, status in states.items()}
    linear.add_state("QA", "started")
    made[linear.open_issue("QA", state="QA")] = "in-progress"
    items = listed(provider)
    open_ones = {i: s for i, s in made.items() if s != "done"}
    assert {i: items[i].status for i in open_ones} == open_ones


def test_a_blocker_blocks_until_it_is_completed_or_canceled(
    linear: FakeLinear, provider: LinearProvider
) -> None:
    blocker, other, blocked = (linear.open_issue(t) for t in ("Blocker", "Other", "Blocked"))
    linear.relate(blocker, blocked)
    linear.relate(other, blocked)
    linear.relate(blocked, other, "related")
    assert listed(provider)[blocked].blocked_by == (blocker, other)
    linear.move_to_state(blocker, "Done")
    linear.move_to_state(other, "Canceled")
    assert listed(provider)[blocked].blocked_by == ()


def test_a_blocker_of_another_team_blocks_by_the_state_its_relation_shows(
    linear: FakeLinear, provider: LinearProvider
) -> None:
    linear.add_team("OPS", "Operations", members=("cpe@example.com", "someone@example.com"))
    theirs = linear.open_issue("Theirs", team="OPS")
    ours = linear.open_issue("Ours")
    linear.relate(theirs, ours)
    items = listed(provider)
    assert theirs not in items
    assert items[ours].blocked_by == (WorkItemId(theirs),)
    linear.move_to_state(theirs, "Done")
    linear.edit(ours, description="touched")  # Linear moves an issue when it changes
    assert listed(provider)[ours].blocked_by == ()


def test_project_and_label_narrow_what_is_work_and_what_cpe_makes(linear: FakeLinear) -> None:
    linear.add_project("Widgets")
    linear.add_project("Gadgets")
    inside = linear.open_issue("Inside", project="Widgets", labels=["cpe"])
    linear.open_issue("No label", project="Widgets")
    linear.open_issue("Elsewhere", project="Gadgets", labels=["cpe"])
    with linear_provider(linear, project="widgets", label="cpe") as provider:
        assert list(listed(provider)) == [inside]
        assert provider.work_item_writer is not None
        made = provider.work_item_writer.create_work_item("Made", "b")
        assert sorted(listed(provider)) == [inside, made]
        assert linear.issue(made)["labels"] == ["cpe"]
        reader = provider.work_item_reader
        assert reader is not None
        with pytest.raises(NotFoundError, match="not an issue of this team"):
            reader.get_work_item_body(WorkItemId("ENG-2"))


def test_a_relation_made_later_is_seen_by_the_next_poll(
    linear: FakeLinear, provider: LinearProvider
) -> None:
    blocker, blocked = linear.open_issue("Blocker"), linear.open_issue("Blocked")
    assert listed(provider)[blocked].blocked_by == ()
    linear.relate(blocker, blocked)  # Linear moves both issues' updatedAt
    assert listed(provider)[blocked].blocked_by == (blocker,)
    linear.unrelate(blocker, blocked)
    assert listed(provider)[blocked].blocked_by == ()


def test_labels_are_named_from_the_team_s_list_and_new_ones_asked_once(
    linear: FakeLinear, provider: LinearProvider
) -> None:
    linear.create_label("workspace-wide", team=None)
    issue = linear.open_issue("Labelled", labels=["workspace-wide", "made-after-start"])
    assert listed(provider)[issue].labels == ("made-after-start", "workspace-wide")
    assert linear.operations().count("CpeLabels") == 1
    linear.clear_requests()
    linear.edit(issue, description="touched")
    assert listed(provider)[issue].labels == ("made-after-start", "workspace-wide")
    assert "CpeLabels" not in linear.operations()

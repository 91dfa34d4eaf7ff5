"""The Linear provider's writes as Linear records them: states, labels (made in the team when
missing), ``blocks`` relations, descriptions as written, comments once per key, and ids that are
no issue of the team refused."""

from __future__ import annotations

import pytest

from adapters.providers.linear import LinearProvider
from adapters.providers.linear.work_items import LinearWorkItemWriter
from domain.errors import NotFoundError
from domain.models import WorkItemId
from tests.fakes.linear.fake import FakeLinear
from tests.support.linear_provider import linear_provider, with_cpe_states


@pytest.fixture
def linear(fake_linear: FakeLinear) -> FakeLinear:
    return with_cpe_states(fake_linear)


def writer_of(provider: LinearProvider) -> LinearWorkItemWriter:
    assert isinstance(provider.work_item_writer, LinearWorkItemWriter)
    return provider.work_item_writer


def test_a_planned_item_is_made_in_todo_with_its_labels_and_relations(linear: FakeLinear) -> None:
    existing = linear.create_label("feature")
    with linear_provider(linear) as provider:
        writer = writer_of(provider)
        first = writer.create_work_item("First", "Body one")
        second = writer.create_work_item("Second", "Body two", ("feature", "new one"), (first,))
    made = linear.issue(second)
    assert made["state"] == "Todo"
    assert made["labels"] == ["feature", "new one"]
    assert made["blocked_by"] == [first]
    assert made["description"] == "Body two"  # nothing of cpe's added
    assert made["creator"] == "cpe@example.com"
    assert linear.issue(first)["blocks"] == [second]
    created = [r for r in linear.requests if r.operation_name == "CpeLabelCreate"]
    assert [r.variables["input"]["name"] for r in created] == ["cpe:admit", "new one"]
    assert existing not in {r.variables["input"].get("id") for r in created}


def test_statuses_update_and_close_write_only_what_changed(linear: FakeLinear) -> None:
    with linear_provider(linear) as provider:
        writer = writer_of(provider)
        item = writer.create_work_item("Item", "b", ("a",))
        for status in ("in-progress", "in-review", "approved", "blocked", "needs-refinement"):
            writer.transition_status(item, status)  # type: ignore[arg-type]
            assert linear.issue(item)["state"] == provider.workflow.state_names[status]  # type: ignore[index]
        linear.clear_requests()
        writer.transition_status(item, "needs-refinement")
        writer.update_work_item(item, body="b", labels=["a"])
        assert "CpeIssueUpdate" not in linear.operations()
        linear.move_to_state(item, "Backlog")  # a person shelves it: still pending
        writer.transition_status(item, "pending")
        assert linear.issue(item)["state"] == "Backlog"
        writer.update_work_item(item, labels=["b", "c"])
        assert linear.issue(item)["labels"] == ["b", "c"]
        writer.close_work_item(item)
        assert linear.issue(item)["state"] == "Done"
        linear.clear_requests()
        writer.close_work_item(item)
        writer.transition_status(item, "done")
        assert "CpeIssueUpdate" not in linear.operations()


def test_a_comment_is_made_once_per_key(linear: FakeLinear) -> None:
    with linear_provider(linear) as provider:
        writer = writer_of(provider)
        item = writer.create_work_item("Item", "b")
        writer.comment(item, "Opened PR #3", idempotency_key="opened:3")
        writer.comment(item, "Opened PR #3", idempotency_key="opened:3")
        linear.fail_operation("CpeCommentCreate", 502, apply_first=True)
        writer.comment(item, "Merged", idempotency_key="merged:3")
        writer.comment(item, "A note")
        writer.comment(item, "A note")
    assert linear.comments(item) == [
        ("cpe@example.com", "Opened PR #3"),
        ("cpe@example.com", "Merged"),
        ("cpe@example.com", "A note"),
        ("cpe@example.com", "A note"),
    ]


@pytest.mark.parametrize("wanted", ["ENG-99", "OPS-1", "12", "eng-1"])
def test_an_id_that_is_no_issue_of_the_team_is_not_found(linear: FakeLinear, wanted: str) -> None:
    linear.add_team("OPS", "Operations")
    linear.open_issue("Theirs", team="OPS", as_user="cpe@example.com")
    with linear_provider(linear) as provider:
        writer = writer_of(provider)
        with pytest.raises(NotFoundError, match=repr(wanted)):
            writer.update_work_item(WorkItemId(wanted), body="x")
        with pytest.raises(NotFoundError, match=repr(wanted)):
            writer.transition_status(WorkItemId(wanted), "in-progress")


@pytest.mark.parametrize("wanted", ["ENG-99", "12"])
def test_a_blocker_linear_does_not_have_is_not_found(linear: FakeLinear, wanted: str) -> None:
    with linear_provider(linear) as provider, pytest.raises(NotFoundError, match=repr(wanted)):
        writer_of(provider).create_work_item("Blocked", "b", (), (WorkItemId(wanted),))
    assert linear.identifiers() == []


def test_another_team_s_issue_may_block_an_item(linear: FakeLinear) -> None:
    linear.add_team("OPS", "Operations")
    theirs = linear.open_issue("Theirs", team="OPS", as_user="cpe@example.com")
    with linear_provider(linear) as provider:
        item = writer_of(provider).create_work_item("Ours", "b", (), (WorkItemId(theirs),))
    assert linear.issue(item)["blocked_by"] == [theirs]


def test_replacing_labels_keeps_those_that_make_the_item_work(linear: FakeLinear) -> None:
    admitted = linear.open_issue("By a guest", as_user="guest@example.com", labels=["cpe"])
    linear.add_label(admitted, "cpe:admit")
    with linear_provider(linear, label="cpe", required_labels=("agents",)) as provider:
        writer = writer_of(provider)
        made = writer.create_work_item("Made", "b", ("x",))
        writer.update_work_item(made, labels=["y"])
        assert linear.issue(made)["labels"] == ["agents", "cpe", "y"]
        linear.add_label(admitted, "agents")
        writer.update_work_item(WorkItemId(admitted), labels=[])
        assert linear.issue(admitted)["labels"] == ["agents", "cpe", "cpe:admit"]


def test_a_pair_related_the_other_way_already_is_no_failure(linear: FakeLinear) -> None:
    blocker = linear.open_issue("Blocker")
    with linear_provider(linear) as provider:
        writer = writer_of(provider)
        item = writer.create_work_item("Item", "b", idempotency_key="plan:1")
        linear.relate(item, blocker)  # someone says it the other way; Linear keeps one a pair
        again = writer.create_work_item("Item", "b", (), (blocker,), idempotency_key="plan:1")
    assert again == item
    assert linear.issue(item)["blocks"] == [blocker]

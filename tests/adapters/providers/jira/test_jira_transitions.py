"""Status changes through the workflow's transitions: the one reaching the chosen status is
taken; none is a clear error listing where the issue's transitions lead; a change to where the
issue is already sends nothing."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from domain.errors import NotFoundError, ProviderError
from domain.models import WorkItemId
from tests.fakes.jira import BOT, FakeJira
from tests.support.jira import running_jira
from tests.support.jira_provider import full_workflow, jira_provider


@pytest.fixture(params=["cloud", "data_center"])
def classic(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[FakeJira]:
    """To Do -> In Progress -> In Review -> Done, and back steps: no global transitions."""
    with running_jira(root=tmp_path, deployment=request.param, workflow="classic") as fake:
        yield full_workflow(fake)


def posted(jira: FakeJira) -> list[object]:
    return [r.body for r in jira.requests if r.write]


def test_each_change_takes_the_transition_reaching_the_mapped_status(jira: FakeJira) -> None:
    key = jira.open_issue("Move me", by=BOT)
    with jira_provider(jira) as provider:
        writer = provider.work_item_writer
        provider.work_item_reader.list_work_items()  # known, as the engine's first poll makes it
        for status, name in [
            ("in-progress", "In Progress"),
            ("in-review", "In Review"),
            ("needs-refinement", "Needs Refinement"),
            ("approved", "Approved"),
            ("blocked", "Blocked"),
            ("done", "Done"),
        ]:
            writer.transition_status(WorkItemId(key), status)  # type: ignore[arg-type]
            assert jira.status_of(key) == name
        [item] = provider.work_item_reader.list_work_items()
        assert item.status == "done"


def test_a_change_to_the_status_it_has_sends_nothing(jira: FakeJira) -> None:
    key = jira.open_issue("Stay", by=BOT)
    with jira_provider(jira) as provider:
        jira.clear_requests()
        provider.work_item_writer.transition_status(WorkItemId(key), "pending")
        provider.work_item_writer.close_work_item(WorkItemId(key))
        provider.work_item_writer.close_work_item(WorkItemId(key))
    assert posted(jira) == [{"transition": {"id": jira.site.transitions[3].id}}]


def test_a_status_the_workflow_cannot_reach_from_here_is_a_clear_error(classic: FakeJira) -> None:
    key = classic.open_issue("Stuck", by=BOT)
    with jira_provider(classic) as provider:
        writer = provider.work_item_writer
        with pytest.raises(ProviderError, match="no transition to 'In Review'") as caught:
            writer.transition_status(WorkItemId(key), "in-review")
        assert "issue PROJ-1 (To Do)" in str(caught.value)
        assert "Start Progress -> In Progress" in str(caught.value)
        assert caught.value.transient is False
        assert classic.status_of(key) == "To Do"
        writer.transition_status(WorkItemId(key), "in-progress")
        writer.transition_status(WorkItemId(key), "in-review")
        writer.close_work_item(WorkItemId(key))
        assert classic.status_of(key) == "Done"


def test_keys_that_are_no_issue_key_are_not_found_without_a_request(jira: FakeJira) -> None:
    with jira_provider(jira) as provider:
        jira.clear_requests()
        for bad in ("12", "proj-1", "PROJ-0", "PROJ-1; DROP"):
            with pytest.raises(NotFoundError, match="ids are Jira issue keys"):
                provider.work_item_writer.transition_status(WorkItemId(bad), "done")
        assert jira.requests == []
        with pytest.raises(NotFoundError, match="PROJ-99"):
            provider.work_item_writer.transition_status(WorkItemId("PROJ-99"), "done")

"""The status mapping resolved from a project's statuses at start, and the transition picked
for a change (pure: the statuses and transitions as Jira lists them)."""

from __future__ import annotations

from typing import Any

import pytest

from adapters.providers.jira.settings import JiraSettings
from adapters.providers.jira.statuses import JiraStatus, StatusMap, jira_status
from domain.errors import ConfigError, ProviderError


def status(sid: str, name: str, category: str) -> dict[str, Any]:
    return {"id": sid, "name": name, "statusCategory": {"key": category}}


FULL = [
    status("1", "To Do", "new"),
    status("3", "In Progress", "indeterminate"),
    status("4", "In Review", "indeterminate"),
    status("5", "Approved", "indeterminate"),
    status("6", "Needs Refinement", "new"),
    status("7", "Blocked", "indeterminate"),
    status("10", "Done", "done"),
]
SIMPLE = [
    status("1", "To Do", "new"),
    status("3", "In Progress", "indeterminate"),
    status("10", "Done", "done"),
]


def settings(**overrides: Any) -> JiraSettings:
    return JiraSettings(base_url="https://jira.example.org", project="PROJ", **overrides)


def types(*statuses: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{"name": f"type{n}", "statuses": s} for n, s in enumerate(statuses)]


def test_a_workflow_with_the_usual_names_maps_every_status_by_name() -> None:
    mapping = StatusMap(settings(), types(FULL))
    assert {cpe: s.name for cpe, s in mapping.chosen.items()} == {
        "pending": "To Do",
        "in-progress": "In Progress",
        "in-review": "In Review",
        "needs-refinement": "Needs Refinement",
        "approved": "Approved",
        "blocked": "Blocked",
        "done": "Done",
    }


def test_reading_a_status_gives_the_one_chosen_for_it_else_its_category() -> None:
    extra = [
        *FULL,
        status("20", "Waiting for QA", "indeterminate"),
        status("21", "Won't Do", "done"),
    ]
    mapping = StatusMap(settings(), types(extra))
    assert mapping.status_of(jira_status(status("4", "In Review", "indeterminate"))) == "in-review"
    assert (
        mapping.status_of(jira_status(status("6", "needs refinement", "new"))) == "needs-refinement"
    )
    assert (
        mapping.status_of(jira_status(status("20", "Waiting for QA", "indeterminate")))
        == "in-progress"
    )
    assert mapping.status_of(jira_status(status("21", "Won't Do", "done"))) == "done"
    assert mapping.status_of(jira_status(status("99", "Triage", "new"))) == "pending"


def test_the_three_category_statuses_fall_back_to_their_category_s_first_status() -> None:
    renamed = [
        status("1", "Backlog", "new"),
        status("3", "Doing", "indeterminate"),
        status("10", "Shipped", "done"),
    ]
    named = {"in-review": "Doing2", "approved": "A", "needs-refinement": "N", "blocked": "B"}
    workflow = [
        *renamed,
        *(status(str(40 + i), n, "indeterminate") for i, n in enumerate(named.values())),
    ]
    mapping = StatusMap(settings(statuses=named), types(workflow))
    assert (mapping.target("pending").name, mapping.target("in-progress").name) == (
        "Backlog",
        "Doing",
    )
    assert mapping.target("done").name == "Shipped"
    assert mapping.target("in-review").name == "Doing2"


def test_a_workflow_without_a_status_for_a_cpe_status_is_refused_listing_what_exists() -> None:
    with pytest.raises(ConfigError) as caught:
        StatusMap(settings(), types(SIMPLE))
    message = str(caught.value)
    # Every missing one in one line: one run says all there is to fix.
    assert "no status for in-review, needs-refinement, approved, blocked;" in message
    assert message.startswith("provider.jira.statuses: ")
    assert 'in-review = "In Review", needs-refinement = "Needs Refinement"' in message
    assert "To Do (new), In Progress (indeterminate), Done (done)" in message


def test_a_status_named_in_the_settings_must_exist() -> None:
    with pytest.raises(ConfigError, match="has no status 'Peer Review' \\(for in-review\\), 'Ok'"):
        StatusMap(settings(statuses={"in-review": "Peer Review", "approved": "Ok"}), types(FULL))


def test_two_cpe_statuses_on_one_jira_status_are_refused() -> None:
    with pytest.raises(ConfigError, match="both Jira's 'In Progress'"):
        StatusMap(settings(statuses={"blocked": "In Progress"}), types(FULL))


def test_statuses_are_gathered_over_every_issue_type() -> None:
    bug = [status("1", "To Do", "new"), status("4", "In Review", "indeterminate")]
    task = [s for s in FULL if s["name"] != "In Review"]
    assert StatusMap(settings(), types(task, bug)).target("in-review").id == "4"


def test_the_transition_picked_is_the_one_reaching_the_chosen_status() -> None:
    mapping = StatusMap(settings(), types(FULL))
    transitions = [
        {"id": "11", "name": "Start", "to": status("3", "In Progress", "indeterminate")},
        {"id": "31", "name": "Finish", "to": status("10", "Done", "done")},
    ]
    here = JiraStatus("1", "To Do", "new")
    assert mapping.pick("PROJ-1", here, "done", transitions) == "31"
    with pytest.raises(ProviderError, match="no transition to 'In Review'") as caught:
        mapping.pick("PROJ-1", here, "in-review", transitions)
    assert "Start -> In Progress, Finish -> Done" in str(caught.value)
    assert caught.value.transient is False

"""cpe's statuses as a Linear team's workflow states, the rate-limit waits Linear's headers ask
for, the ids cpe derives for its creates, and issues as the index reads them (pure parts: no
Linear needed)."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from adapters.providers.linear.api import made_id
from adapters.providers.linear.issue_index import view_of
from adapters.providers.linear.settings import LinearSettings
from adapters.providers.linear.transport import rate_limit_wait
from adapters.providers.linear.workflow import Workflow
from domain.errors import ConfigError

# Linear's default workflow (Backlog, Todo, In Progress, Done, Canceled) plus the states a team
# adds for review.
DEFAULT = [
    {"id": "s-backlog", "name": "Backlog", "type": "backlog", "position": 0},
    {"id": "s-todo", "name": "Todo", "type": "unstarted", "position": 1},
    {"id": "s-progress", "name": "In Progress", "type": "started", "position": 2},
    {"id": "s-done", "name": "Done", "type": "completed", "position": 4},
    {"id": "s-canceled", "name": "Canceled", "type": "canceled", "position": 5},
]
REVIEW = [
    {"id": "s-review", "name": "In Review", "type": "started", "position": 3},
    {"id": "s-approved", "name": "Approved", "type": "started", "position": 4},
    {"id": "s-rework", "name": "Needs Refinement", "type": "unstarted", "position": 2},
    {"id": "s-blocked", "name": "Blocked", "type": "backlog", "position": 1},
]


def test_each_status_is_a_state_of_the_team_found_by_type_or_by_name() -> None:
    flow = Workflow(LinearSettings(team="ENG"), DEFAULT + REVIEW)
    assert flow.state_ids == {
        "pending": "s-todo",
        "in-progress": "s-progress",
        "in-review": "s-review",
        "approved": "s-approved",
        "needs-refinement": "s-rework",
        "blocked": "s-blocked",
        "done": "s-done",
    }


def test_a_state_read_back_says_its_status_or_what_its_type_does() -> None:
    flow = Workflow(LinearSettings(team="ENG"), DEFAULT + REVIEW)
    assert flow.status_of("s-review", "started") == "in-review"
    assert flow.status_of("s-backlog", "backlog") == "pending"
    assert flow.status_of("s-canceled", "canceled") == "done"
    assert flow.status_of("s-triage", "triage") == "pending"  # a state made since start
    assert flow.status_of("s-qa", "started") == "in-progress"


def test_a_status_no_state_says_stops_the_start_listing_the_team_s_states() -> None:
    with pytest.raises(ConfigError) as caught:
        Workflow(LinearSettings(team="ENG"), DEFAULT)
    message = str(caught.value)
    assert "provider.linear.states" in message
    assert "in-review ('In Review')" in message
    assert "blocked ('Blocked')" in message
    assert "Backlog (backlog), Todo (unstarted)" in message


def test_a_state_new_issues_are_filed_in_is_no_status_of_cpe_s_doing(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # A newcomer mapping the statuses a default workflow lacks to the states left over: an
    # issue filed in Triage read as approved waited forever, nothing said; one filed in Backlog
    # read as blocked would never be worked on.
    triage = [{"id": "s-triage", "name": "Triage", "type": "triage", "position": 0}]
    states = DEFAULT + triage + [s for s in REVIEW if s["id"] != "s-approved"]
    with pytest.raises(ConfigError) as caught:
        Workflow(LinearSettings(team="ENG", states={"approved": "Triage"}), states)
    assert str(caught.value) == (
        "provider.linear.states: approved is the workflow state 'Triage' of team ENG, its triage "
        "state, where Linear files the issues of people outside the team and of integrations: "
        "each would be read as approved; expected a state of type started, completed or "
        "canceled for approved"
    )
    settings = LinearSettings(team="ENG", states={"approved": "Ready", "blocked": "Backlog"})
    states = DEFAULT + [s for s in REVIEW if s["id"] in ("s-review", "s-rework")]
    states.append({"id": "s-ready", "name": "Ready", "type": "started", "position": 6})
    with caplog.at_level("WARNING"):
        flow = Workflow(settings, states)
    assert flow.state_for("blocked") == "s-backlog"
    said = [r.getMessage() for r in caplog.records]
    assert said == [
        "blocked is the workflow state 'Backlog' (backlog) of team ENG: an issue filed in it is "
        "read as blocked, not as pending (provider.linear.states)"
    ]  # needs-refinement in an unstarted state is worked on all the same: not said


def test_states_map_statuses_to_the_team_s_own_names() -> None:
    settings = LinearSettings(
        team="ENG",
        states={
            "in-review": "In Progress",
            "approved": "Todo",
            "needs-refinement": "backlog",
            "blocked": "Needs Refinement",
            "pending": "Blocked",
            "in-progress": "In Review",
            "done": "Approved",
        },
    )
    flow = Workflow(settings, DEFAULT + REVIEW)
    assert flow.state_for("needs-refinement") == "s-backlog"  # names match without case
    assert flow.state_for("pending") == "s-blocked"
    assert flow.status_of("s-blocked", "backlog") == "pending"
    assert flow.status_of("s-approved", "started") == "done"


def test_a_status_other_than_done_on_a_closed_state_is_refused() -> None:
    # blocked = "Canceled" (a leftover of Linear's default workflow): Linear counts a canceled
    # issue closed, so cpe's blocked item was not listed at the next start ("cpe work retry
    # ENG-9: unknown work item") and no longer blocked what it blocked.
    states = DEFAULT + [s for s in REVIEW if s["id"] != "s-blocked"]
    with pytest.raises(ConfigError) as caught:
        Workflow(LinearSettings(team="ENG", states={"blocked": "Canceled"}), states)
    assert str(caught.value) == (
        "provider.linear.states: blocked is the workflow state 'Canceled' of team ENG, of type "
        "canceled: Linear counts its issues closed, so an item cpe set to blocked would be lost "
        "at a restart and would stop blocking the items it blocks; expected a state of type "
        "started for blocked"
    )
    with pytest.raises(ConfigError) as caught:  # and the error listing what is missing
        Workflow(LinearSettings(team="ENG"), states)  # does not offer it
    assert str(caught.value).endswith("[provider.linear.states] (not taken: Backlog)")


def test_a_status_found_by_type_never_takes_a_state_named_for_another() -> None:
    settings = LinearSettings(team="ENG", states={"in-review": "In Progress"})
    states = DEFAULT + [s for s in REVIEW if s["id"] != "s-review"]
    states.append({"id": "s-doing", "name": "Doing", "type": "started", "position": 9})
    flow = Workflow(settings, states)
    assert flow.state_for("in-review") == "s-progress"
    assert flow.state_for("in-progress") == "s-doing"


def test_a_team_without_an_unstarted_state_is_pending_in_its_backlog() -> None:
    states = [s for s in DEFAULT + REVIEW if s["type"] != "unstarted"]
    states.append({"id": "s-hold", "name": "On Hold", "type": "started", "position": 6})
    settings = LinearSettings(
        team="ENG", states={"needs-refinement": "Blocked", "blocked": "On Hold"}
    )
    assert Workflow(settings, states).state_for("pending") == "s-backlog"


@pytest.mark.parametrize(
    ("headers", "wait"),
    [
        ({"retry-after": "7"}, 7.0),
        ({"x-ratelimit-requests-reset": "1700000030000"}, 31.0),  # milliseconds: 30 s away, +1
        ({"x-ratelimit-requests-reset": "1700000030"}, 31.0),  # seconds
        (
            {
                "x-ratelimit-requests-reset": "1700000010000",
                "x-ratelimit-complexity-reset": "1700000050000",
            },
            51.0,
        ),
        (
            {  # the requests ran out: their reset, not the complexity's
                "x-ratelimit-requests-remaining": "0",
                "x-ratelimit-requests-reset": "1700000010000",
                "x-ratelimit-complexity-remaining": "9000",
                "x-ratelimit-complexity-reset": "1700000050000",
                "x-complexity": "40",
            },
            11.0,
        ),
        (
            {  # the points ran out: fewer left than the query costs
                "x-ratelimit-requests-remaining": "4000",
                "x-ratelimit-requests-reset": "1700000010000",
                "x-ratelimit-complexity-remaining": "30",
                "x-ratelimit-complexity-reset": "1700000020000",
                "x-complexity": "40",
            },
            21.0,
        ),
        ({}, 4.0),
        ({"retry-after": "soon"}, 4.0),
    ],
)
def test_a_rate_limit_is_waited_as_linear_s_headers_say(
    headers: dict[str, str], wait: float
) -> None:
    assert rate_limit_wait(headers, now=1_700_000_000.0, fallback=4.0) == pytest.approx(wait)


def test_ids_cpe_derives_are_uuid_v4_and_the_same_for_the_same_key() -> None:
    one = made_id("issue", "team-1", "plan:1:a")
    assert one == made_id("issue", "team-1", "plan:1:a")
    assert one != made_id("issue", "team-2", "plan:1:a") != made_id("issue", "team-1", "plan:1:b")
    assert uuid.UUID(one).version == 4


def test_an_issue_s_blockers_are_the_issues_whose_blocks_relations_point_at_it() -> None:
    issue: dict[str, Any] = {
        "id": "i-2",
        "identifier": "ENG-2",
        "title": "Second",
        "description": None,
        "updatedAt": "2026-01-02T03:04:05.678Z",
        "team": {"id": "t"},
        "project": None,
        "state": {"id": "s-todo", "name": "Todo", "type": "unstarted"},
        "creator": None,
        "labels": {"nodes": [{"id": "l-1", "name": "feature"}]},
        "inverseRelations": {
            "nodes": [
                {"type": "blocks", "issue": {"identifier": "ENG-1", "state": {"type": "started"}}},
                {"type": "related", "issue": {"identifier": "ENG-3", "state": {"type": "started"}}},
                {
                    "type": "blocks",
                    "issue": {"identifier": "OPS-4", "state": {"type": "completed"}},
                },
            ]
        },
    }
    view = view_of(issue)
    assert view.blockers == (("ENG-1", "started"), ("OPS-4", "completed"))
    assert view.body == ""
    assert view.creator_id is None
    assert view.label_names == ("feature",)
    assert view.updated_at.microsecond == 678000

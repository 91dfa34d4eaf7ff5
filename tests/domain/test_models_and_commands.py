"""What the domain's records compute for their callers: an agent run's role, subject and
liveness; the checks and keys of events and commands; the identifying fields of a log line."""

from __future__ import annotations

import pydantic
import pytest

from domain.commands import (
    ApplyPlan,
    CancelAgent,
    CreateRevision,
    MergeRevision,
    PostReview,
    StartAgent,
    TransitionStatus,
    UpdateRevision,
    idempotency_key,
    parse_command,
)
from domain.events import (
    AgentFailed,
    AgentRequested,
    AgentStarted,
    CommandFailed,
    EngineEvent,
    RevisionChanged,
    RevisionCreated,
    RevisionUpdated,
    SpecChanged,
    StatusTransitioned,
    WorkItemChanged,
    event_to_json,
    identify,
    is_agent_terminal,
    parse_event,
    parse_event_json,
)
from domain.models import (
    AgentRun,
    ImplementorStartParams,
    PlannerStartParams,
    ReviewerStartParams,
    with_session_id,
)
from domain.results import AgentReview, PlannerResult
from tests.domain.builders import implemented, item, revision, spec

IMPLEMENT = ImplementorStartParams(work_item_id="3", branch_name="cpe/3-x")
REVIEW = ReviewerStartParams(work_item_id="3", revision_id="r1")
PLAN = PlannerStartParams(spec_paths=("specs/a.md", "specs/b.md"))


def run(params: object, status: str = "requested", **fields: object) -> AgentRun:
    return AgentRun.model_validate(
        {"session_id": "s1", "params": params, "status": status, **fields}
    )


def test_a_run_knows_its_role_item_and_subject() -> None:
    assert (run(IMPLEMENT).role, run(IMPLEMENT).work_item_id, run(IMPLEMENT).subject) == (
        "implementor",
        "3",
        "3",
    )
    assert (run(REVIEW).role, run(REVIEW).work_item_id) == ("reviewer", "3")
    assert (run(PLAN).role, run(PLAN).work_item_id, run(PLAN).subject) == (
        "planner",
        None,
        "specs/a.md,specs/b.md",
    )


@pytest.mark.parametrize(
    ("status", "settled", "active", "terminal", "in_flight"),
    [
        ("requested", False, True, False, True),
        ("running", False, True, False, True),
        ("completed", False, False, True, True),  # its write is not made yet
        ("completed", True, False, True, False),
        ("failed", False, False, True, False),
        ("timed-out", False, False, True, False),
        ("cancelled", False, False, True, False),
    ],
)
def test_a_run_is_active_terminal_or_in_flight_by_its_status(
    status: str, settled: bool, active: bool, terminal: bool, in_flight: bool
) -> None:
    made = run(IMPLEMENT, status, settled=settled)
    assert (made.is_active, made.is_terminal, made.in_flight) == (active, terminal, in_flight)


def test_a_run_starts_requested_unsettled_and_without_cost() -> None:
    made = run(IMPLEMENT)
    assert (made.status, made.settled, made.cost_usd, made.cancel_requested) == (
        "requested",
        False,
        None,
        False,
    )
    assert (dict(made.spec_shas), made.blocked_by_at_start) == ({}, ())


def test_params_take_the_session_id_the_executor_gives() -> None:
    assert with_session_id(IMPLEMENT, "s7") == IMPLEMENT.model_copy(update={"session_id": "s7"})
    assert IMPLEMENT.session_id is None


def test_a_requested_run_whose_params_name_another_session_is_refused() -> None:
    with pytest.raises(pydantic.ValidationError, match="must equal session_id 's2'"):
        AgentRequested(session_id="s2", params=with_session_id(IMPLEMENT, "s1"))
    made = AgentRequested(session_id="s1", params=with_session_id(IMPLEMENT, "s1"))
    assert (made.subject_sha, dict(made.spec_shas)) == (None, {})


def test_revision_events_name_their_revision() -> None:
    rev = revision("r5", "3")
    assert RevisionCreated(work_item_id="3", revision=rev).revision_id == "r5"
    assert RevisionUpdated(work_item_id="3", revision=rev).revision_id == "r5"


def test_events_round_trip_through_json_and_plain_data() -> None:
    event = StatusTransitioned(work_item_id="3", to="blocked", reason="why")
    assert parse_event_json(event_to_json(event)) == event
    assert parse_event(event.model_dump()) == event
    assert event.at is None


def test_the_terminal_events_of_a_run_are_known_as_such() -> None:
    assert is_agent_terminal(implemented("s1"))
    assert is_agent_terminal(
        AgentFailed(session_id="s1", role="planner", kind="failed", reason="x")
    )
    assert not is_agent_terminal(AgentStarted(session_id="s1"))


@pytest.mark.parametrize(
    ("event", "fields"),
    [
        (
            WorkItemChanged(work_item=item("3", "in-review")),
            {"event_type": "WorkItemChanged", "work_item_id": "3", "status": "in-review"},
        ),
        (
            RevisionChanged(revision=revision("r1", "3")),
            {"event_type": "RevisionChanged", "revision_id": "r1"},
        ),
        (
            RevisionCreated(session_id="s1", work_item_id="3", revision=revision("r1", "3")),
            {"event_type": "RevisionCreated", "session_id": "s1", "work_item_id": "3",
             "revision_id": "r1"},
        ),
        (SpecChanged(spec=spec("specs/x.md")), {"event_type": "SpecChanged", "path": "specs/x.md"}),
        (
            CommandFailed(command=MergeRevision(work_item_id="3", revision_id="r1"), error="e"),
            {"event_type": "CommandFailed", "command": "MergeRevision"},
        ),
        (
            AgentRequested(session_id="s1", params=with_session_id(IMPLEMENT, "s1")),
            {"event_type": "AgentRequested", "session_id": "s1", "role": "implementor"},
        ),
        (
            AgentFailed(session_id="s1", role="planner", kind="cancelled", reason="x"),
            {"event_type": "AgentFailed", "session_id": "s1", "role": "planner",
             "kind": "cancelled"},
        ),
        (
            StatusTransitioned(work_item_id="3", to="done"),
            {"event_type": "StatusTransitioned", "work_item_id": "3", "to": "done"},
        ),
    ],
)  # fmt: skip
def test_a_log_line_names_what_identifies_the_event(
    event: EngineEvent, fields: dict[str, str]
) -> None:
    assert identify(event) == fields


REVIEWED = AgentReview(verdict="approve", summary="fine", comments=())
PLANNED = PlannerResult(create=())


@pytest.mark.parametrize(
    ("command", "key"),
    [
        (ApplyPlan(session_id="p1", result=PLANNED, spec_shas={"a": "1"}), "apply-plan:p1"),
        (ApplyPlan(result=PLANNED, spec_shas={"b": "2", "a": "1"}), "apply-plan:a@1,b@2"),
        (
            CreateRevision(session_id="s1", work_item_id="3", branch_name="cpe/3-x", title="t",
                           body="b", patch="p"),
            "create-revision:s1",
        ),
        (
            CreateRevision(work_item_id="3", branch_name="cpe/3-x", title="t", body="b",
                           patch="p"),
            "create-revision:3:cpe/3-x",
        ),
        (
            UpdateRevision(session_id="s1", work_item_id="3", revision_id="r1", patch="p"),
            "update-revision:s1",
        ),
        (
            UpdateRevision(work_item_id="3", revision_id="r1", patch="p"),
            "update-revision:r1:148de9c5a7a44d19",  # the patch's sha256, 16 hex digits
        ),
        (
            PostReview(session_id="v1", work_item_id="3", revision_id="r1", head_sha="h",
                       review=REVIEWED),
            "post-review:v1",
        ),
        (
            PostReview(work_item_id="3", revision_id="r1", head_sha="h", review=REVIEWED),
            "post-review:r1@h",
        ),
        (TransitionStatus(work_item_id="3", to="done"), "transition:3:done"),
        (MergeRevision(work_item_id="3", revision_id="r1"), "merge:r1"),
        (
            CancelAgent(session_id="s1"),
            'CancelAgent:{"type":"CancelAgent","session_id":"s1",'
            '"reason":"cancelled by a person","infrastructure":false}',
        ),
    ],
)  # fmt: skip
def test_each_write_has_a_key_that_is_the_same_each_time_it_is_attempted(
    command: object, key: str
) -> None:
    assert idempotency_key(command) == key  # type: ignore[arg-type]
    assert idempotency_key(parse_command(command.model_dump())) == key  # type: ignore[attr-defined]


def test_a_start_is_keyed_by_all_it_says() -> None:
    start = StartAgent(params=IMPLEMENT)
    assert (start.subject_sha, dict(start.spec_shas), start.requested_by_user) == (None, {}, False)
    assert idempotency_key(start).startswith('StartAgent:{"type":"StartAgent","params":')
    assert idempotency_key(start) != idempotency_key(StartAgent(params=IMPLEMENT, subject_sha="h"))

"""Property tests: random event sequences through apply_event and the handlers.

A small simulated engine runs the real reducer and handlers; a fake executor turns commands into
their result events (or failures), and external events (polls, agent ends, user actions) are
interleaved at random. Whatever happens, the engine must never move a work item outside the
workflow table on its own, and never start two implementors for one item.
"""

from __future__ import annotations

import copy
from collections import deque
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from domain.commands import (
    ApplyPlan,
    CancelAgent,
    CreateRevision,
    MergeRevision,
    PostReview,
    StartAgent,
    TransitionStatus,
    UpdateBranch,
    UpdateRevision,
)
from domain.events import (
    AgentFailed,
    AgentRequested,
    AgentStarted,
    BranchUpdated,
    CommandFailed,
    CommandRejected,
    EngineEvent,
    ImplementorCompleted,
    LandingRefused,
    PlanApplied,
    PlannerCompleted,
    ReviewerCompleted,
    ReviewPosted,
    RevisionChanged,
    RevisionCreated,
    RevisionMerged,
    RevisionUpdated,
    SpecChanged,
    StatusTransitioned,
    UserCancelledRun,
    UserRequestedImplementorRun,
    UserTransitionedStatus,
    WorkItemChanged,
)
from domain.handlers import create_handlers, run_handlers
from domain.handlers.options import HandlerOptions
from domain.models import (
    STATUSES,
    EngineState,
    ImplementorStartParams,
    PlannerStartParams,
    SessionId,
    with_session_id,
)
from domain.results import (
    AgentReview,
    ImplementorResult,
    PlannedWorkItem,
    PlannerResult,
    ReviewerResult,
)
from domain.selectors import has_run_in_flight
from domain.state import apply_event
from domain.workflow import ALLOWED_TRANSITIONS
from tests.domain.builders import item, revision, spec

ITEMS = ("1", "2", "3")
HANDLERS = create_handlers(
    HandlerOptions(
        max_attempts=2,
        auto_merge=True,
        max_concurrent={"planner": 1, "implementor": 2, "reviewer": 1},
    )
)


class Simulation:
    def __init__(self, data: st.DataObject) -> None:
        self.data = data
        self.state = EngineState()
        self.queue: deque[EngineEvent] = deque()
        self.live: dict[str, Any] = {}  # session id -> params, for the sessions still running
        self.sessions = 0
        self.revisions = 0
        self.checked_transitions = 0

    # -- the engine loop, with the invariants checked on every cycle
    def process(self, event: EngineEvent) -> None:
        before = self.state
        frozen = copy.deepcopy(before.model_dump())
        self.state = apply_event(before, event)
        assert before.model_dump() == frozen, "apply_event mutated its input"
        commands = run_handlers(HANDLERS, event, self.state)
        self.check(event, commands)
        for command in commands:
            self.queue.extend(self.execute(command))

    def check(self, event: EngineEvent, commands: list[Any]) -> None:
        snapshot = self.state
        started: list[str] = []
        for command in commands:
            if isinstance(command, StartAgent) and command.params.role == "implementor":
                wid = command.params.work_item_id
                assert wid not in started, f"two implementor starts for {wid} from one state"
                assert not has_run_in_flight(snapshot, wid), f"{wid} already has a run in flight"
                started.append(wid)
            if isinstance(command, TransitionStatus) and not isinstance(
                event, UserTransitionedStatus
            ):
                current = snapshot.work_items[command.work_item_id].status
                assert (current, command.to) in ALLOWED_TRANSITIONS, (
                    f"{command.work_item_id}: {current} -> {command.to} on {event.type}"
                )
                self.checked_transitions += 1

    # -- a fake executor: the real one's result events, or a persistent failure
    def execute(self, command: Any) -> list[EngineEvent]:
        if isinstance(command, StartAgent):
            return self.start(command)
        if isinstance(command, CancelAgent):
            params = self.live.pop(command.session_id, None)
            if params is None:
                return []
            return [_failed(command.session_id, params.role, "cancelled")]
        if self.data.draw(st.integers(0, 9), label="write fails") == 0:
            return [CommandFailed(command=command, error="HTTP 502")]
        if isinstance(command, TransitionStatus):
            return [StatusTransitioned(work_item_id=command.work_item_id, to=command.to)]
        if isinstance(command, ApplyPlan):
            return [PlanApplied(session_id=command.session_id, spec_shas=command.spec_shas)]
        if isinstance(command, CreateRevision | UpdateRevision) and self.conflicts():
            return [_conflict(command.work_item_id, None, command.session_id)]
        if isinstance(command, CreateRevision | UpdateRevision):
            self.revisions += 1
            rid = getattr(command, "revision_id", f"r{command.work_item_id}")
            rev = revision(rid, command.work_item_id, head=f"h{self.revisions}", pipeline="pending")
            cls = RevisionCreated if isinstance(command, CreateRevision) else RevisionUpdated
            return [
                cls(session_id=command.session_id, work_item_id=command.work_item_id, revision=rev)
            ]
        if isinstance(command, PostReview):
            return [
                ReviewPosted(
                    session_id=command.session_id,
                    revision_id=command.revision_id,
                    head_sha=command.head_sha,
                    verdict=command.review.verdict,
                )
            ]
        if isinstance(command, MergeRevision) and command.expected_base and self.conflicts():
            moved = {"work_item_id": command.work_item_id, "revision_id": command.revision_id}
            return [LandingRefused.model_validate({**moved, "kind": "moved", "reason": "moved"})]
        if isinstance(command, MergeRevision):
            return [RevisionMerged(revision_id=command.revision_id)]
        if isinstance(command, UpdateBranch) and self.conflicts():
            return [_conflict(command.work_item_id, command.revision_id, None)]
        if isinstance(command, UpdateBranch):
            self.revisions += 1
            head = self.data.draw(st.sampled_from([command.head_sha, f"h{self.revisions}"]))
            rev = revision(command.revision_id, command.work_item_id, head=head, pipeline="pending")
            return [BranchUpdated(work_item_id=command.work_item_id, revision=rev, base_sha="b")]
        raise AssertionError(f"unexpected command {command!r}")

    def conflicts(self) -> bool:
        """The provider refuses a landing step (a conflict, a moved default branch)."""
        return self.data.draw(st.integers(0, 3), label="landing refused") == 0

    def start(self, command: StartAgent) -> list[EngineEvent]:
        wid = getattr(command.params, "work_item_id", None)
        for params in self.live.values():  # the executor's guard: one run per work item
            if wid is not None and getattr(params, "work_item_id", None) == wid:
                return [CommandRejected(command=command, reason="a run is active for the item")]
        self.sessions += 1
        sid = SessionId(f"s{self.sessions}")
        params = with_session_id(command.params, sid)
        self.live[sid] = params
        return [
            AgentRequested(
                session_id=sid,
                params=params,
                subject_sha=command.subject_sha,
                spec_shas=command.spec_shas,
            )
        ]

    # -- the outside world
    def external(self) -> EngineEvent:
        d, draw = self.data, self.data.draw
        kind = draw(
            st.sampled_from(
                [
                    "item",
                    "revision",
                    "spec",
                    "agent-end",
                    "agent-start",
                    "user-run",
                    "user-cancel",
                    "user-status",
                ]
            ),
            label="external",
        )
        if kind == "item":
            wid = draw(st.sampled_from(ITEMS))
            blockers = draw(st.lists(st.sampled_from(ITEMS), max_size=2, unique=True))
            status = draw(st.sampled_from(STATUSES))
            return WorkItemChanged(
                work_item=item(wid, status, blocked_by=[b for b in blockers if b != wid])
            )
        if kind == "revision":
            wid = draw(st.sampled_from(ITEMS))
            return RevisionChanged(
                revision=revision(
                    f"r{wid}",
                    wid,
                    head=draw(st.sampled_from(["h1", "h2", f"h{self.revisions}"])),
                    pipeline=draw(st.sampled_from(["pending", "success", "failure", "none"])),
                    state=draw(st.sampled_from(["open", "open", "merged", "closed"])),
                )
            )
        if kind == "spec":
            return SpecChanged(
                spec=spec(
                    draw(st.sampled_from(["specs/a.md", "specs/b.md"])),
                    draw(st.sampled_from(["b1", "b2", "b3"])),
                )
            )
        if kind in ("agent-end", "agent-start", "user-cancel") and self.live:
            sid = draw(st.sampled_from(sorted(self.live)))
            if kind == "agent-start":
                return AgentStarted(session_id=SessionId(sid))
            if kind == "user-cancel":
                return UserCancelledRun(session_id=SessionId(sid))
            return self.end(sid, d)
        if kind == "user-run":
            return UserRequestedImplementorRun(work_item_id=draw(st.sampled_from(ITEMS)))
        return UserTransitionedStatus(
            work_item_id=draw(st.sampled_from(ITEMS)), to=draw(st.sampled_from(STATUSES))
        )

    def end(self, sid: str, d: st.DataObject) -> EngineEvent:
        params = self.live.pop(sid)
        if d.draw(st.booleans(), label="run fails"):
            return _failed(
                sid, params.role, d.draw(st.sampled_from(["failed", "timed-out", "cancelled"]))
            )
        if isinstance(params, PlannerStartParams):
            plan = PlannerResult(create=(PlannedWorkItem(temp_id="t", title="T", body="b"),))
            return PlannerCompleted(session_id=SessionId(sid), result=plan)
        if isinstance(params, ImplementorStartParams):
            outcome = d.draw(
                st.sampled_from(["completed", "completed", "blocked", "validation-failure"])
            )
            patch = "diff --git a/f b/f\n" if outcome == "completed" else None
            result = ImplementorResult(outcome=outcome, summary="s", patch=patch)
            return ImplementorCompleted(session_id=SessionId(sid), result=result)
        verdict = d.draw(st.sampled_from(["approve", "needs-changes"]))
        review = AgentReview(verdict=verdict, summary="s")
        return ReviewerCompleted(session_id=SessionId(sid), result=ReviewerResult(review=review))


def _conflict(wid: str, rid: str | None, sid: str | None) -> LandingRefused:
    return LandingRefused.model_validate(
        {"work_item_id": wid, "revision_id": rid, "session_id": sid, "kind": "conflict",
         "reason": "conflicts in f", "files": ["f"]}
    )  # fmt: skip


def _failed(sid: str, role: str, kind: str) -> AgentFailed:
    return AgentFailed.model_validate(
        {"session_id": sid, "role": role, "kind": kind, "reason": "x"}
    )


@settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(st.data())
def test_random_event_sequences_keep_the_workflow_and_start_one_implementor_per_item(
    data: st.DataObject,
) -> None:
    sim = Simulation(data)
    steps = data.draw(st.integers(5, 60), label="steps")
    for _ in range(steps):
        if sim.queue and data.draw(st.booleans(), label="deliver a queued result"):
            sim.process(sim.queue.popleft())
        else:
            sim.process(sim.external())
    while sim.queue:  # drain, as shutdown does
        sim.process(sim.queue.popleft())

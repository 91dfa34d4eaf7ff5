"""Engine events: everything that happens, as a discriminated union on ``type``.

Four families: observations from the pollers, agent lifecycle events from the
sessions, result events from the command executor, and user requests. Events are the only input
of ``domain.state.apply_event`` and of the handlers, and what the journal stores.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Annotated, Literal

from pydantic import Field, TypeAdapter, model_validator

from domain.commands import EngineCommand
from domain.errors import AgentFailureKind, FailureClass
from domain.models import (
    AgentRole,
    AgentStartParams,
    Baseline,
    Frozen,
    IgnoredWorkItem,
    Revision,
    RevisionId,
    RunSignal,
    SentBack,
    SessionId,
    Spec,
    Status,
    WorkItem,
    WorkItemId,
)
from domain.results import ImplementorResult, PlannerResult, ReviewerResult, ReviewVerdict


class _Event(Frozen):
    at: datetime | None = Field(default=None, description="When the source saw it happen")


# ---------------------------------------------------------------------------- observed


class WorkItemChanged(_Event):
    type: Literal["WorkItemChanged"] = "WorkItemChanged"
    work_item: WorkItem


class WorkItemRemoved(_Event):
    type: Literal["WorkItemRemoved"] = "WorkItemRemoved"
    work_item_id: WorkItemId


class WorkItemIgnored(_Event):
    """The tracker holds an item that is not work, and why (``IgnoredWorkItem``)."""

    type: Literal["WorkItemIgnored"] = "WorkItemIgnored"
    item: IgnoredWorkItem


class WorkItemIgnoredRemoved(_Event):
    """An ignored item is gone from the tracker, was admitted, or was closed."""

    type: Literal["WorkItemIgnoredRemoved"] = "WorkItemIgnoredRemoved"
    work_item_id: WorkItemId


class RevisionChanged(_Event):
    type: Literal["RevisionChanged"] = "RevisionChanged"
    revision: Revision


class RevisionRemoved(_Event):
    type: Literal["RevisionRemoved"] = "RevisionRemoved"
    revision_id: RevisionId


class SpecChanged(_Event):
    type: Literal["SpecChanged"] = "SpecChanged"
    spec: Spec


class SpecRemoved(_Event):
    type: Literal["SpecRemoved"] = "SpecRemoved"
    path: str


class BaselineChanged(_Event):
    """The default branch's pipeline, observed: a new head, or its pipeline's new state."""

    type: Literal["BaselineChanged"] = "BaselineChanged"
    baseline: Baseline


class BaselineRemoved(_Event):
    """No pipeline is observed on the default branch any more (none is configured)."""

    type: Literal["BaselineRemoved"] = "BaselineRemoved"


# ---------------------------------------------------------------------------- agent lifecycle


class AgentRequested(_Event):
    """The executor accepted a ``StartAgent`` and assigned the session id."""

    type: Literal["AgentRequested"] = "AgentRequested"
    session_id: SessionId
    params: AgentStartParams
    subject_sha: str | None = None
    spec_shas: Mapping[str, str] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _params_carry_the_session_id(self) -> AgentRequested:
        if self.params.session_id != self.session_id:
            raise ValueError(
                f"params.session_id {self.params.session_id!r} must equal "
                f"session_id {self.session_id!r}"
            )
        return self


class AgentStarted(_Event):
    type: Literal["AgentStarted"] = "AgentStarted"
    session_id: SessionId
    log_file_path: str | None = None


class _AgentCompleted(_Event):
    session_id: SessionId
    cost_usd: float | None = None
    turns: int | None = None
    model: str | None = None


class PlannerCompleted(_AgentCompleted):
    type: Literal["PlannerCompleted"] = "PlannerCompleted"
    result: PlannerResult


class ImplementorCompleted(_AgentCompleted):
    type: Literal["ImplementorCompleted"] = "ImplementorCompleted"
    result: ImplementorResult


class ReviewerCompleted(_AgentCompleted):
    type: Literal["ReviewerCompleted"] = "ReviewerCompleted"
    result: ReviewerResult


class AgentFailed(_Event):
    type: Literal["AgentFailed"] = "AgentFailed"
    session_id: SessionId
    role: AgentRole
    kind: AgentFailureKind
    reason: str
    cost_usd: float | None = None
    turns: int | None = None
    model: str | None = None
    # "infrastructure": it failed under the agent (credentials, the model API, the CLI): no
    # attempt is spent (domain.errors.AgentFailure)
    failure_class: FailureClass = "work"


class AgentSignalled(_Event):
    """A live run's CLI said something of the model API (``RunSignal``): retrying, answering
    again, rate-limited, its account's headroom. Journaled like every event; the run goes on."""

    type: Literal["AgentSignalled"] = "AgentSignalled"
    session_id: SessionId
    signal: RunSignal


# ---------------------------------------------------------------------------- command results


class PlanApplied(_Event):
    type: Literal["PlanApplied"] = "PlanApplied"
    session_id: SessionId | None = None
    spec_shas: Mapping[str, str]
    created_ids: tuple[WorkItemId, ...] = ()
    # The blockers the plan gave the items it made, by item: the engine holds them until a poll
    # shows the item with them (a tracker writes an issue and its links apart).
    blockers: Mapping[WorkItemId, tuple[WorkItemId, ...]] = Field(default_factory=dict)


class RevisionCreated(_Event):
    type: Literal["RevisionCreated"] = "RevisionCreated"
    session_id: SessionId | None = None
    work_item_id: WorkItemId
    revision: Revision

    @property
    def revision_id(self) -> RevisionId:
        return self.revision.id


class RevisionUpdated(_Event):
    type: Literal["RevisionUpdated"] = "RevisionUpdated"
    session_id: SessionId | None = None
    work_item_id: WorkItemId
    revision: Revision

    @property
    def revision_id(self) -> RevisionId:
        return self.revision.id


class ReviewPosted(_Event):
    type: Literal["ReviewPosted"] = "ReviewPosted"
    session_id: SessionId | None = None
    revision_id: RevisionId
    head_sha: str
    verdict: ReviewVerdict


class RevisionMerged(_Event):
    type: Literal["RevisionMerged"] = "RevisionMerged"
    revision_id: RevisionId
    merge_sha: str | None = None


class MergeWaiting(_Event):
    """A merge the provider refused for now (``MergeWaitError``): the revision waits for what
    protects the target branch (``reason``), and the merge is tried again on the next poll."""

    type: Literal["MergeWaiting"] = "MergeWaiting"
    work_item_id: WorkItemId
    revision_id: RevisionId
    head_sha: str
    reason: str


class BranchUpdated(_Event):
    """The merge queue brought a revision up to date: ``revision`` as it is now (a new head
    when the default branch had to be merged in, with that head's pipeline), containing the
    default branch's head ``base_sha``."""

    type: Literal["BranchUpdated"] = "BranchUpdated"
    work_item_id: WorkItemId
    revision: Revision
    base_sha: str

    @property
    def revision_id(self) -> RevisionId:
        return self.revision.id


LandingRefusal = Literal["conflict", "moved"]


class LandingRefused(_Event):
    """The provider refused a merge queue step: the revision conflicts with the default branch
    (``conflict``: ``files`` and the conflict hunks in ``detail``), or the default branch moved
    since the revision was tested (``moved``: it is tested again). ``session_id`` is set when
    the refused write was a run's revision (its patch no longer applies)."""

    type: Literal["LandingRefused"] = "LandingRefused"
    work_item_id: WorkItemId
    revision_id: RevisionId | None = None
    session_id: SessionId | None = None
    kind: LandingRefusal
    reason: str
    files: tuple[str, ...] = ()
    detail: str = ""
    head_sha: str | None = None  # the revision's head the refused step was asked for


class StatusTransitioned(_Event):
    type: Literal["StatusTransitioned"] = "StatusTransitioned"
    work_item_id: WorkItemId
    to: Status
    reason: str | None = None
    landing: SentBack | None = None


class CommandFailed(_Event):
    """A command failed persistently (after the provider's retries)."""

    type: Literal["CommandFailed"] = "CommandFailed"
    command: EngineCommand
    error: str


class CommandRejected(_Event):
    """A command was refused by the policy or a concurrency guard; nothing was attempted."""

    type: Literal["CommandRejected"] = "CommandRejected"
    command: EngineCommand
    reason: str


# ---------------------------------------------------------------------------- time


class DispatchDue(_Event):
    """A pause of dispatch is over (queued by a timer at its end): what waited may start."""

    type: Literal["DispatchDue"] = "DispatchDue"


# ---------------------------------------------------------------------------- the engine's own


class EngineStarted(_Event):
    """An engine took this state and started (``cpe run``), as process ``pid``. A start with no
    ``EngineStopped`` after it ended in a crash (or a ``kill -9``)."""

    type: Literal["EngineStarted"] = "EngineStarted"
    pid: int


class EngineStopped(_Event):
    """The engine's last word: ``stopped`` when its graceful stop finished (``reason``: what
    asked for it), ``interrupted`` when it exited without waiting (a second Ctrl-C),
    ``crashed`` when its supervision gave up (``reason``: the last crash)."""

    type: Literal["EngineStopped"] = "EngineStopped"
    how: Literal["stopped", "interrupted", "crashed"]
    reason: str = ""


# ---------------------------------------------------------------------------- user


class UserRequestedImplementorRun(_Event):
    type: Literal["UserRequestedImplementorRun"] = "UserRequestedImplementorRun"
    work_item_id: WorkItemId


class UserCancelledRun(_Event):
    type: Literal["UserCancelledRun"] = "UserCancelledRun"
    session_id: SessionId


class UserTransitionedStatus(_Event):
    type: Literal["UserTransitionedStatus"] = "UserTransitionedStatus"
    work_item_id: WorkItemId
    to: Status


class UserPausedDispatch(_Event):
    """A person paused dispatch (``cpe pause``): no agent run starts until they resume it.
    Journaled, so the pause outlives a restart."""

    type: Literal["UserPausedDispatch"] = "UserPausedDispatch"
    reason: str = ""


class UserResumedDispatch(_Event):
    """A person resumed dispatch (``cpe resume``): their pause ends, and so does a pause the
    breaker holds (they say the cause is fixed); what waited may start."""

    type: Literal["UserResumedDispatch"] = "UserResumedDispatch"


EngineEvent = Annotated[
    WorkItemChanged
    | WorkItemRemoved
    | WorkItemIgnored
    | WorkItemIgnoredRemoved
    | RevisionChanged
    | RevisionRemoved
    | SpecChanged
    | SpecRemoved
    | BaselineChanged
    | BaselineRemoved
    | AgentRequested
    | AgentStarted
    | PlannerCompleted
    | ImplementorCompleted
    | ReviewerCompleted
    | AgentFailed
    | AgentSignalled
    | PlanApplied
    | RevisionCreated
    | RevisionUpdated
    | ReviewPosted
    | RevisionMerged
    | MergeWaiting
    | BranchUpdated
    | LandingRefused
    | StatusTransitioned
    | CommandFailed
    | CommandRejected
    | DispatchDue
    | EngineStarted
    | EngineStopped
    | UserRequestedImplementorRun
    | UserCancelledRun
    | UserTransitionedStatus
    | UserPausedDispatch
    | UserResumedDispatch,
    Field(discriminator="type"),
]

AgentTerminalEvent = PlannerCompleted | ImplementorCompleted | ReviewerCompleted | AgentFailed
"""The events that end a run; the queue accepts these during shutdown."""

AGENT_TERMINAL_EVENTS: tuple[type[_Event], ...] = (
    PlannerCompleted,
    ImplementorCompleted,
    ReviewerCompleted,
    AgentFailed,
)

USER_EVENTS: tuple[type[_Event], ...] = (
    UserRequestedImplementorRun,
    UserCancelledRun,
    UserTransitionedStatus,
    UserPausedDispatch,
    UserResumedDispatch,
)

ENGINE_LIFE_EVENTS: tuple[type[_Event], ...] = (EngineStarted, EngineStopped)
"""The engine's own starts and stops (``EngineState.engine``)."""

WAKE_EVENTS: tuple[type[_Event], ...] = (DispatchDue, UserResumedDispatch)
"""Events after which what waited for dispatch (a pause, a backoff) may start."""

EVENT_ADAPTER: TypeAdapter[EngineEvent] = TypeAdapter(EngineEvent)


def parse_event(data: object) -> EngineEvent:
    """An event from plain data (the journal, a test fixture)."""
    return EVENT_ADAPTER.validate_python(data)


def parse_event_json(data: str | bytes) -> EngineEvent:
    return EVENT_ADAPTER.validate_json(data)


def event_to_json(event: EngineEvent) -> str:
    return EVENT_ADAPTER.dump_json(event).decode()


def is_agent_terminal(event: EngineEvent) -> bool:
    return isinstance(event, AGENT_TERMINAL_EVENTS)


def identify(event: EngineEvent) -> dict[str, str]:
    """The identifying fields of an event, for log lines (work item, session, path …)."""
    fields: dict[str, str] = {"event_type": event.type}
    for name in ("session_id", "work_item_id", "revision_id", "path", "role", "kind", "to"):
        value = getattr(event, name, None)
        if value is not None:
            fields[name] = str(value)
    if isinstance(event, WorkItemChanged):
        fields["work_item_id"] = event.work_item.id
        fields["status"] = event.work_item.status
    elif isinstance(event, RevisionChanged | RevisionCreated | RevisionUpdated):
        fields["revision_id"] = event.revision.id
    elif isinstance(event, SpecChanged):
        fields["path"] = event.spec.path
    elif isinstance(event, CommandFailed | CommandRejected):
        fields["command"] = event.command.type
    elif isinstance(event, AgentRequested):
        fields["role"] = event.params.role
    return fields

"""The domain model: what the engine knows about work items, revisions, specs and agent runs.

Every model is a frozen pydantic model; collections are tuples or read-only mappings, and a new
state is always a new object (``domain.state.apply_event``). Field names are a contract
(adapters, the journal and the dashboard read them); fields may grow.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Annotated, Literal, NewType, get_args

from pydantic import BaseModel, ConfigDict, Field

from domain.errors import FailureClass

WorkItemId = NewType("WorkItemId", str)
RevisionId = NewType("RevisionId", str)
SessionId = NewType("SessionId", str)

Status = Literal[
    "pending", "in-progress", "in-review", "needs-refinement", "approved", "blocked", "done"
]
STATUSES: tuple[Status, ...] = get_args(Status)

RevisionState = Literal["open", "merged", "closed"]
PipelineStatus = Literal["pending", "success", "failure", "none"]
FileStatus = Literal["added", "modified", "removed", "renamed"]

AgentRole = Literal["planner", "implementor", "reviewer"]
AGENT_ROLES: tuple[AgentRole, ...] = get_args(AgentRole)

AgentRunStatus = Literal["requested", "running", "completed", "failed", "timed-out", "cancelled"]
ACTIVE_RUN_STATUSES: frozenset[AgentRunStatus] = frozenset({"requested", "running"})
TERMINAL_RUN_STATUSES: frozenset[AgentRunStatus] = frozenset(
    {"completed", "failed", "timed-out", "cancelled"}
)


class Frozen(BaseModel):
    """Base of every domain model: immutable, and unknown fields are an error."""

    model_config = ConfigDict(frozen=True, extra="forbid")


class WorkItem(Frozen):
    """A unit of work (a GitHub issue, a local tracker row)."""

    id: WorkItemId
    title: str
    status: Status
    labels: tuple[str, ...] = ()
    blocked_by: tuple[WorkItemId, ...] = ()
    linked_revision: RevisionId | None = None


class Pipeline(Frozen):
    """The CI state of a revision's head. ``none`` means no CI is configured (treated as green).
    ``failed_checks`` names each check that failed (a check run, a commit status, the local
    pipeline command), so that a failure can be compared with the default branch's."""

    status: PipelineStatus = "none"
    reason: str | None = None
    url: str | None = None
    failed_checks: tuple[str, ...] = ()


class Baseline(Frozen):
    """The pipeline of the default branch's head: what a revision's checks are compared with.
    A check that fails there too is not the revision's doing."""

    sha: str
    pipeline: Pipeline


class Revision(Frozen):
    """A proposed change (a pull request, a local revision branch) for one work item."""

    id: RevisionId
    title: str
    work_item_id: WorkItemId | None
    branch: str
    head_sha: str
    state: RevisionState = "open"
    pipeline: Pipeline = Pipeline()
    reviewed_sha: str | None = None


class RevisionFile(Frozen):
    """One changed file of a revision; ``patch`` is None for binary or oversized diffs."""

    path: str
    status: FileStatus
    patch: str | None = None


class Spec(Frozen):
    """A spec file at the default branch's head. ``problem`` says why it cannot be planned
    (not UTF-8 text, empty, too large, broken frontmatter): it waits for its next version."""

    path: str
    blob_sha: str
    problem: str | None = None


class ReviewSubmission(Frozen):
    author: str
    state: str
    body: str


class ReviewInlineComment(Frozen):
    path: str
    line: int | None
    author: str
    body: str


class ReviewHistory(Frozen):
    reviews: tuple[ReviewSubmission, ...] = ()
    inline_comments: tuple[ReviewInlineComment, ...] = ()
    left_out: int = Field(default=0, ge=0)
    """Reviews and comments the reader left out because their authors are not trusted (people
    without the configured permission on the repository): the prompt says how many."""


# ---------------------------------------------------------------------------- agent start params


class PlannerStartParams(Frozen):
    role: Literal["planner"] = "planner"
    session_id: SessionId | None = None
    spec_paths: tuple[str, ...]


class ImplementorStartParams(Frozen):
    role: Literal["implementor"] = "implementor"
    session_id: SessionId | None = None
    work_item_id: WorkItemId
    branch_name: str


class ReviewerStartParams(Frozen):
    role: Literal["reviewer"] = "reviewer"
    session_id: SessionId | None = None
    work_item_id: WorkItemId
    revision_id: RevisionId


AgentStartParams = Annotated[
    PlannerStartParams | ImplementorStartParams | ReviewerStartParams,
    Field(discriminator="role"),
]
"""What a runtime needs to start a run. ``session_id`` is None in a handler's ``StartAgent`` and
is assigned by the executor before the runtime sees the params."""


def with_session_id(params: AgentStartParams, session_id: SessionId) -> AgentStartParams:
    """The same params with the executor-assigned session id."""
    return params.model_copy(update={"session_id": session_id})


# ---------------------------------------------------------------------------- agent runs


class RunUsage(Frozen):
    """What a run cost, as far as the runtime can tell."""

    cost_usd: float | None = None
    turns: int | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    model: str | None = None  # the model the run used, as its runtime named it


RetryCause = Literal[
    "unreachable", "overloaded", "server_error", "authentication", "rate_limit", "other"
]
# The causes that mean the model API is down for everyone (the breaker's business); a rate
# limit is the account's, and is waited out.
OUTAGE_CAUSES: frozenset[RetryCause] = frozenset(
    {"unreachable", "overloaded", "server_error", "authentication"}
)
SignalKind = Literal["retrying", "recovered", "rate_limited", "quota"]
QuotaStatus = Literal["allowed", "allowed_warning", "rejected"]


class QuotaWindow(Frozen):
    """One usage window of a model account as its API reports it: ``five_hour``,
    ``seven_day`` (Anthropic's subscription windows), ``primary``, ``secondary`` (codex's);
    ``utilization`` 0..1, when it resets."""

    name: str
    utilization: float | None = None
    resets_at: datetime | None = None
    status: QuotaStatus | None = None


class RunSignal(Frozen):
    """What a live run's CLI or SDK says of the model API, in runtime-neutral terms.

    ``retrying``: a model request failed and the CLI will try again (``cause``, its ``detail``,
    retry ``attempt`` of ``max_attempts``, the next try in ``retry_in`` seconds);
    ``recovered``: the model answered again after retries; ``rate_limited``: the account may
    not use the model until ``until`` (a spent usage window: ``window``); ``quota``: the
    account's headroom (``windows``), reported as it goes. ``account`` names the model account
    the run uses (``anthropic``, ``openai``): quota is per account."""

    kind: SignalKind
    account: str = "model"
    cause: RetryCause | None = None
    detail: str | None = None
    attempt: int | None = None
    max_attempts: int | None = None
    retry_in: float | None = None
    until: datetime | None = None
    window: str | None = None
    windows: tuple[QuotaWindow, ...] = ()


class ModelHealth(Frozen):
    """Retries for an outage cause (``OUTAGE_CAUSES``) reported by live runs since the model
    API last answered: how many, since when, the last one's time and reason. A run that
    completes, or a run whose model answers again (``recovered``), ends it. Held long enough it
    pauses dispatch (``domain.decisions.model_outage``)."""

    retries: int = 0
    since: datetime | None = None
    last_at: datetime | None = None
    last_reason: str | None = None


class AccountQuota(Frozen):
    """A model account's usage as its runs last reported it: the windows' headroom, and, once
    a window was spent (a ``rate_limited`` signal), until when it may not be used and why."""

    windows: tuple[QuotaWindow, ...] = ()
    reported_at: datetime | None = None
    rejected_until: datetime | None = None
    reason: str | None = None


class AgentRun(Frozen):
    """One agent run, from the executor's request to its terminal event and its follow-up.

    ``settled`` tells whether the run's result has been turned into its provider write (plan
    applied, revision created or updated, review posted) or needs none. A completed run that is
    not settled is still *in flight*: its work exists but is not visible on the provider yet, so
    nothing may start the same work again.
    """

    session_id: SessionId
    params: AgentStartParams
    status: AgentRunStatus = "requested"
    subject_sha: str | None = None
    spec_shas: Mapping[str, str] = Field(default_factory=dict)
    requested_at: datetime | None = None
    started_at: datetime | None = None
    ended_at: datetime | None = None
    log_file_path: str | None = None
    cost_usd: float | None = None
    turns: int | None = None
    model: str | None = None
    outcome: str | None = None
    failure_reason: str | None = None
    failure_class: FailureClass | None = None
    settled: bool = False
    delivered_revision: RevisionId | None = None
    cancel_requested: bool = False
    # The item's blockers when the run was requested: one it gains meanwhile cancels the run.
    blocked_by_at_start: tuple[WorkItemId, ...] = ()
    # The run answers the merge queue sending its item back (another item's landing made the
    # revision conflict or fail): when it completes, it spends no attempt.
    landing_round: bool = False
    # Its patch no longer applied to the default branch (``LandingRefused``): sent back.
    conflicted: bool = False
    # What its CLI last said of the model API while it ran (retrying …); None once it answered.
    signal: RunSignal | None = None

    @property
    def role(self) -> AgentRole:
        return self.params.role

    @property
    def work_item_id(self) -> WorkItemId | None:
        if isinstance(self.params, PlannerStartParams):
            return None
        return self.params.work_item_id

    @property
    def subject(self) -> str:
        """The work item id, or the spec paths for a planner run."""
        if isinstance(self.params, PlannerStartParams):
            return ",".join(self.params.spec_paths)
        return self.params.work_item_id

    @property
    def is_active(self) -> bool:
        """The run has been requested and has not ended."""
        return self.status in ACTIVE_RUN_STATUSES

    @property
    def is_terminal(self) -> bool:
        return self.status in TERMINAL_RUN_STATUSES

    @property
    def in_flight(self) -> bool:
        """Active, or completed with its result not yet written to the provider."""
        return self.is_active or (self.status == "completed" and not self.settled)


# ---------------------------------------------------------------------------- engine state


class InfrastructureStreak(Frozen):
    """Agent runs that failed under the agent in a row (``AgentFailed.failure_class``), the
    last one's time and reason; any run that ends otherwise resets it. Past a threshold it
    pauses dispatch (``domain.decisions.dispatch_pause``)."""

    count: int = 0
    last_at: datetime | None = None
    last_reason: str | None = None


class LandingFailure(Frozen):
    """A step of the merge queue whose write failed after the provider's own retries (the
    forge down, a refusal cpe does not know): which step, why, since when, how many times. The
    queue asks the step again on every poll (the revision is due each cycle), and says so,
    until it goes through, or the revision's head moves, or it is merged or closed; a failure
    never leaves the queue waiting for an event that will not come."""

    work_item_id: WorkItemId
    head_sha: str
    step: Literal["update", "merge"]
    reason: str
    since: datetime | None = None
    last_at: datetime | None = None
    tries: int = 1


class MergeWait(Frozen):
    """An approved revision whose merge the provider refused for now (branch protection):
    why, since when, how many tries so far. The merge is tried again on every poll until it
    goes through, or the revision's head moves, or it is closed."""

    work_item_id: WorkItemId
    head_sha: str
    reason: str
    since: datetime | None = None
    last_at: datetime | None = None
    tries: int = 1


LandingProblem = Literal["conflict", "failed"]


class LandingTest(Frozen):
    """An approved revision under test in the merge queue. Its head ``tested_sha`` contains the
    default branch's head ``base_sha``, so its pipeline runs on exactly the tree the default
    branch moves to if it lands. ``approved_sha`` is the head the reviewer approved (with
    pipeline ``approved_pipeline``); ``heads`` every head cpe gave the revision since (a head
    outside them was pushed by someone else, and is not landed unreviewed). ``stale``: the
    default branch moved since, so it is tested again."""

    work_item_id: WorkItemId
    approved_sha: str
    approved_pipeline: PipelineStatus = "success"
    base_sha: str
    tested_sha: str
    heads: tuple[str, ...] = ()
    at: datetime | None = None
    tests: int = 1
    stale: bool = False
    note: str | None = None
    # The default branch's own pipeline was red at ``base_sha`` when the test began: a failure
    # there is judged again once the default branch moves, not charged to the revision.
    base_red: bool = False


class SentBack(Frozen):
    """Why the merge queue sent an item back to its implementor, for its next prompt and for
    the operator: the revision no longer applies to the default branch (``conflict``: the
    ``files``, and the conflict hunks in ``detail``) or its pipeline failed once merged with it
    (``failed``: the failing checks in ``detail``); ``moved_by`` says which landing moved the
    branch. ``rounds`` counts the item's rounds so far (bounded by ``max_landing_rounds``);
    ``answered_by`` is the implementor run that took it up."""

    revision_id: RevisionId | None = None
    problem: LandingProblem
    reason: str
    files: tuple[str, ...] = ()
    detail: str = ""
    moved_by: str | None = None
    base_sha: str | None = None
    rounds: int = 1
    at: datetime | None = None
    answered_by: SessionId | None = None
    # What was refused (the revision's head, or the run whose patch it was): the same refusal
    # delivered again is one round, not two.
    refused: str | None = None


class Landed(Frozen):
    """A revision cpe merged: which item's merge moved the default branch, and to what."""

    work_item_id: WorkItemId | None
    revision_id: RevisionId
    merge_sha: str | None
    at: datetime | None = None
    approved_at: datetime | None = None  # when it entered the queue
    tests: int = 0  # pipeline runs the queue spent on it (0: it was up to date already)


class ManualPause(Frozen):
    """Dispatch paused by a person (``UserPausedDispatch``): since when, and why they said."""

    reason: str = ""
    at: datetime | None = None


class EngineProcess(Frozen):
    """The last engine on this state, as it journaled its start and stop (``EngineStarted``,
    ``EngineStopped``): no ``stopped_at`` after its ``started_at``, and no engine holds the
    state now: it crashed."""

    pid: int | None = None
    started_at: datetime | None = None
    stopped_at: datetime | None = None
    how: Literal["stopped", "interrupted", "crashed"] | None = None
    reason: str = ""


class IgnoredWorkItem(Frozen):
    """An item on the tracker that is not work: not trusted (filed by someone without the
    configured permission, and not admitted by someone with it), or lacking a required label.
    Listed so a person can see it and why; never dispatched, never written to."""

    id: WorkItemId
    title: str
    reason: str


class EngineState(Frozen):
    """Everything the engine knows. Provider-owned parts come from the pollers; engine-owned
    parts (``last_planned_shas``, ``agent_runs``, ``attempts``) are restored from the journal."""

    work_items: Mapping[WorkItemId, WorkItem] = Field(default_factory=dict)
    revisions: Mapping[RevisionId, Revision] = Field(default_factory=dict)
    specs: Mapping[str, Spec] = Field(default_factory=dict)
    last_planned_shas: Mapping[str, str] = Field(default_factory=dict)
    agent_runs: Mapping[SessionId, AgentRun] = Field(default_factory=dict)
    attempts: Mapping[WorkItemId, int] = Field(default_factory=dict)
    infrastructure: InfrastructureStreak = InfrastructureStreak()
    baseline: Baseline | None = None  # the default branch's pipeline, as last observed
    merge_waits: Mapping[RevisionId, MergeWait] = Field(default_factory=dict)
    # The merge queue's writes that failed (a branch update, a merge): tried again each poll.
    landing_failures: Mapping[RevisionId, LandingFailure] = Field(default_factory=dict)
    manual_pause: ManualPause | None = None  # dispatch paused by a person, until they resume
    # The merge queue: approved items in the order they were approved, the test of each
    # revision on top of the default branch, the items it sent back, the latest landings.
    approved_at: Mapping[WorkItemId, datetime] = Field(default_factory=dict)
    landing: Mapping[RevisionId, LandingTest] = Field(default_factory=dict)
    sent_back: Mapping[WorkItemId, SentBack] = Field(default_factory=dict)
    landed: tuple[Landed, ...] = ()
    landings_total: int = 0  # revisions cpe merged, ever
    ignored: Mapping[WorkItemId, IgnoredWorkItem] = Field(default_factory=dict)
    # Blockers a plan gave the items it made that no poll has shown on them yet (a tracker that
    # writes an issue and its links apart may list it without them): they count until it does.
    planned_blockers: Mapping[WorkItemId, tuple[WorkItemId, ...]] = Field(default_factory=dict)
    # A pipeline has reported on this repository (a revision's head or the default branch's):
    # from then on a head with no checks is CI not reported yet, never "no CI".
    pipelines_seen: bool = False
    model_health: ModelHealth = ModelHealth()
    quota: Mapping[str, AccountQuota] = Field(default_factory=dict)  # per model account
    engine: EngineProcess | None = None  # the last engine's start and stop, as journaled
    # Items a person asked a run for that a guard refused as it was to start: the next slot's.
    asked: frozenset[WorkItemId] = frozenset()


def item_ref(work_item_id: str) -> str:
    """A work item as a line names it: ``#7`` by its number (local, GitHub, GitLab), its key as
    it is (Linear's and Jira's ``ENG-12``)."""
    return f"#{work_item_id}" if work_item_id.isdigit() else work_item_id

"""The seven handlers: pure ``(event, state) -> list[EngineCommand]``.

Each handler sees the event and one snapshot taken after the event was applied; it never sees
another handler's commands (S002-03). ``run_handlers`` runs them in order and collects their
commands. Options come from configuration through ``create_handlers(options)``.

1. plan — specs whose blob differs from the last planned one → one planner run for all of
   them, unless a planner is in flight.
2. apply plan — a planner result → ``ApplyPlan``.
3. dispatch — an unblocked pending or a needs-refinement item with no run in flight →
   implementor run (and a user's request); the request itself → ``in-progress``.
4. implementor done — a patch → create or update the revision; anything else → the item's
   next status.
5. revision — a delivered revision → in-review; a green head not yet reviewed → reviewer run;
   a red pipeline → needs-refinement, unless it fails only where the default branch's
   pipeline fails too (reviewed then, never merged automatically); merged → done; closed →
   blocked.
6. review done — a reviewer result for the current head → ``PostReview`` (a stale one is
   dropped and the new head reviewed); a posted review → approved (and merged when
   ``auto_merge``) or needs-refinement.
7. recovery and failures — in-progress with nothing in flight (seen on a poll, or just moved
   there after its run already ended) → pending, or where its last run says; a failed run →
   pending or blocked by attempts; user cancel and user status.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType

from pydantic import Field

from domain.commands import (
    ApplyPlan,
    CancelAgent,
    CreateRevision,
    EngineCommand,
    MergeRevision,
    PostReview,
    StartAgent,
    TransitionStatus,
    UpdateRevision,
)
from domain.decisions import outage_cancels
from domain.dispatch import dispatch_items, start_implementor
from domain.events import (
    WAKE_EVENTS,
    AgentFailed,
    AgentRequested,
    AgentSignalled,
    BaselineChanged,
    BranchUpdated,
    CommandFailed,
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
    RevisionRemoved,
    RevisionUpdated,
    SpecChanged,
    StatusTransitioned,
    UserCancelledRun,
    UserRequestedImplementorRun,
    UserTransitionedStatus,
    WorkItemChanged,
    WorkItemRemoved,
    is_agent_terminal,
)
from domain.landing import landing_step, send_back
from domain.models import (
    AgentRole,
    EngineState,
    Frozen,
    ImplementorStartParams,
    PlannerStartParams,
    ReviewerStartParams,
    WorkItem,
)
from domain.revisions import (
    Required,
    needs_review,
    pipeline_acceptable,
    reviews_wanted,
    revision_step,
    start_reviewer,
)
from domain.run_end import settle, why_cancel
from domain.selectors import (
    dependents_of,
    has_run_in_flight,
    planner_failures,
    planner_in_flight,
    revision_for,
    specs_to_plan,
    spent_on_spec,
)
from domain.workflow import transition

_DEFAULT_CONCURRENCY: Mapping[AgentRole, int] = MappingProxyType(
    {"planner": 1, "implementor": 2, "reviewer": 2}
)


class HandlerOptions(Frozen):
    """Workflow options from ``supervisor.toml`` (``[workflow]``)."""

    max_attempts: int = Field(
        default=3, ge=1, description="implementor runs per work item; planner runs per spec version"
    )
    auto_merge: bool = Field(default=False, description="merge a revision once approved")
    merge_queue: bool = Field(
        default=True,
        description="land approved revisions through the merge queue (each tested on top of "
        "the default branch first) where the provider supports it; else merge them as they are",
    )
    max_landing_rounds: int = Field(
        default=3,
        ge=1,
        le=100,
        description="times the merge queue may send an item back (a conflict, a failure once "
        "merged) before it is blocked; such rounds spend no attempt",
    )
    charge_baseline_failures: bool = Field(
        default=False,
        description="a red check the default branch fails too sends the revision back anyway",
    )
    outage_after: float = Field(
        default=15,
        gt=0,
        le=3600,
        description="seconds live runs retry the model API for an outage cause before dispatch "
        "pauses ([breaker])",
    )
    cancel_retrying: bool = Field(
        default=True,
        description="during an outage, cancel the runs retrying the model API (no attempt "
        "spent) instead of leaving them to retry ([breaker])",
    )
    pipeline_required: Required = Field(
        default="auto",
        description="a head with no checks lands: never (true), always (false), or only while "
        "no pipeline has ever reported on the repository (auto)",
    )
    retry_backoff_initial: float = Field(
        default=30, gt=0, le=86_400, allow_inf_nan=False, description="seconds, first retry"
    )
    retry_backoff_max: float = Field(
        default=900, gt=0, le=86_400, allow_inf_nan=False, description="seconds, the cap"
    )
    item_budget_usd: float | None = Field(
        default=None, gt=0, description="what all of an item's runs may cost; None: no limit"
    )
    spec_budget_usd: float | None = Field(
        default=None, gt=0, description="what planning one spec version may cost; None: no limit"
    )
    block_on_item_budget: bool = Field(
        default=True, description="an item over its budget is blocked (else it waits)"
    )
    branch_prefix: str = Field(default="cpe/", pattern=r"^[A-Za-z0-9._-]+/$")
    max_concurrent: Mapping[AgentRole, int] = Field(
        default_factory=lambda: dict(_DEFAULT_CONCURRENCY)
    )


HandlerFn = Callable[[EngineEvent, EngineState, HandlerOptions], list[EngineCommand]]


@dataclass(frozen=True)
class Handler:
    """A handler bound to its options; call it as ``handler(event, state)``."""

    name: str
    fn: HandlerFn
    options: HandlerOptions

    def __call__(self, event: EngineEvent, state: EngineState) -> list[EngineCommand]:
        return self.fn(event, state, self.options)


# ---------------------------------------------------------------------------- 1. plan


def plan(event: EngineEvent, state: EngineState, o: HandlerOptions) -> list[EngineCommand]:
    if not isinstance(event, (SpecChanged, PlanApplied, *WAKE_EVENTS)) and not (
        isinstance(event, AgentFailed) and event.role == "planner"
    ):
        return []
    if planner_in_flight(state):
        return []
    # A failed planner is run again on the same spec versions (an API blip, a timeout) until
    # ``max_attempts`` runs failed on a version, however the runs grouped the specs; then that
    # version waits for the spec's next change instead of failing in a loop. The failures are
    # journaled, so a restart does not start the count again. A version whose planner runs
    # have spent ``spec_budget_usd`` waits for the next change the same way.
    budget = o.spec_budget_usd
    wanted = {
        path: sha
        for path, sha in specs_to_plan(state).items()
        if planner_failures(state, path, sha) < o.max_attempts
        and (budget is None or spent_on_spec(state, path, sha) < budget)
    }
    if not wanted:
        return []
    return [StartAgent(params=PlannerStartParams(spec_paths=tuple(wanted)), spec_shas=wanted)]


# ---------------------------------------------------------------------------- 2. apply plan


def apply_plan(event: EngineEvent, state: EngineState, o: HandlerOptions) -> list[EngineCommand]:
    if not isinstance(event, PlannerCompleted):
        return []
    run = state.agent_runs.get(event.session_id)
    if run is None or run.role != "planner" or run.settled:
        return []  # an unknown run cannot say which spec versions it planned
    return [ApplyPlan(session_id=run.session_id, result=event.result, spec_shas=run.spec_shas)]


# ---------------------------------------------------------------------------- 3. dispatch


def dispatch(event: EngineEvent, state: EngineState, o: HandlerOptions) -> list[EngineCommand]:
    if isinstance(event, AgentRequested):
        if isinstance(event.params, ImplementorStartParams):
            item = state.work_items.get(event.params.work_item_id)
            return transition(item, "implementor-requested") if item else []
        return []
    if isinstance(event, UserRequestedImplementorRun):
        return _user_dispatch(state, event, o)
    candidates: Iterable[WorkItem]
    if isinstance(event, WorkItemChanged):
        candidates = _with_dependents(state, state.work_items.get(event.work_item.id))
    elif isinstance(event, StatusTransitioned):
        candidates = _with_dependents(state, state.work_items.get(event.work_item_id))
    elif is_agent_terminal(event) or isinstance(event, WAKE_EVENTS):
        candidates = state.work_items.values()  # a slot is free: anyone who waited for one
    else:
        return []
    return dispatch_items(
        state,
        candidates,
        max_attempts=o.max_attempts,
        max_concurrent=o.max_concurrent,
        branch_prefix=o.branch_prefix,
        item_budget=o.item_budget_usd,
        block_on_budget=o.block_on_item_budget,
    )


def _with_dependents(state: EngineState, item: WorkItem | None) -> list[WorkItem]:
    if item is None:
        return []
    if item.status == "done":
        return dependents_of(state, item.id)
    return [item]


def _user_dispatch(
    state: EngineState, event: UserRequestedImplementorRun, o: HandlerOptions
) -> list[EngineCommand]:
    """A person asked for a run: blockers and attempts do not stop it; the guards still do."""
    item = state.work_items.get(event.work_item_id)
    if item is None or item.status not in ("pending", "needs-refinement", "blocked"):
        return []
    if has_run_in_flight(state, item.id):
        return []
    start = start_implementor(item, o.branch_prefix)
    return [start.model_copy(update={"requested_by_user": True})]


# ---------------------------------------------------------------------------- 4. implementor done


def implementor_done(
    event: EngineEvent, state: EngineState, o: HandlerOptions
) -> list[EngineCommand]:
    if not isinstance(event, ImplementorCompleted):
        return []
    run = state.agent_runs.get(event.session_id)
    if run is None or not isinstance(run.params, ImplementorStartParams):
        return []
    item = state.work_items.get(run.params.work_item_id)
    if item is None:
        return []  # the item is gone; the patch stays in the journal
    result = event.result
    if result.outcome == "completed" and result.patch and not run.settled:
        revision = revision_for(state, item)
        if revision is not None and revision.state == "open":
            return [
                UpdateRevision(
                    session_id=run.session_id,
                    work_item_id=item.id,
                    revision_id=revision.id,
                    patch=result.patch,
                    base_sha=result.base_sha,
                )
            ]
        return [
            CreateRevision(
                session_id=run.session_id,
                work_item_id=item.id,
                branch_name=run.params.branch_name,
                title=item.title,
                body=f"{result.summary}\n\nWork item: #{item.id}\nAgent session: {run.session_id}",
                patch=result.patch,
                base_sha=result.base_sha,
            )
        ]
    return settle(state, item, o.max_attempts)


# ---------------------------------------------------------------------------- 5. revision


def revision(event: EngineEvent, state: EngineState, o: HandlerOptions) -> list[EngineCommand]:
    commands = _revision(event, state, o)
    if o.auto_merge and o.merge_queue:
        commands += [c for c in _land(event, state, o) if c not in commands]
    return commands


_QUEUE_EVENTS: tuple[type[Frozen], ...] = (
    RevisionChanged,
    RevisionMerged,
    RevisionRemoved,
    BaselineChanged,
    BranchUpdated,
    StatusTransitioned,
    WorkItemChanged,
    *WAKE_EVENTS,
)


def _land(event: EngineEvent, state: EngineState, o: HandlerOptions) -> list[EngineCommand]:
    """The merge queue's next step (``domain.landing``), after any event that can move it; a
    refused step sends its item back."""
    if isinstance(event, LandingRefused):
        item = state.work_items.get(event.work_item_id)
        report = state.sent_back.get(event.work_item_id)
        if event.kind == "conflict" and item is not None and report is not None:
            return send_back(state, item, report, o.max_landing_rounds)
    elif not isinstance(event, _QUEUE_EVENTS) or not _moves_the_queue(event, state):
        return []
    return landing_step(
        state,
        max_rounds=o.max_landing_rounds,
        charge_baseline=o.charge_baseline_failures,
        required=o.pipeline_required,
    )


def _moves_the_queue(event: EngineEvent, state: EngineState) -> bool:
    """A change of an item or revision outside the queue leaves it where it is (a poll that
    reports many items would otherwise ask the queue's step again for each)."""
    if isinstance(event, WorkItemChanged):
        return event.work_item.status == "approved" or event.work_item.id in state.approved_at
    if isinstance(event, RevisionChanged):
        wid = event.revision.work_item_id
        item = state.work_items.get(wid) if wid is not None else None
        return item is not None and (item.status == "approved" or item.id in state.approved_at)
    return True


def _revision(event: EngineEvent, state: EngineState, o: HandlerOptions) -> list[EngineCommand]:
    if isinstance(event, RevisionCreated | RevisionUpdated):
        item = state.work_items.get(event.work_item_id)
        return settle(state, item, o.max_attempts) if item else []
    if is_agent_terminal(event) or isinstance(event, (*WAKE_EVENTS, BaselineChanged)):
        wanted = reviews_wanted(
            state,
            max_attempts=o.max_attempts,
            max_concurrent=o.max_concurrent,
            charge_baseline=o.charge_baseline_failures,
        )
        # A review a person cancelled is not started again: its item goes to blocked (7.).
        stopped = _cancelled_by_a_person(event, state)
        if stopped is None:
            return wanted
        return [c for c in wanted if getattr(_params(c), "work_item_id", None) != stopped]
    merge_approved = False
    if isinstance(event, RevisionChanged):
        rev = state.revisions.get(event.revision.id)
        merge_approved = True  # after a restart an approved head is merged on first sight
    elif isinstance(event, RevisionMerged):
        rev = state.revisions.get(event.revision_id)
    elif isinstance(event, StatusTransitioned) and event.to == "in-review":
        item = state.work_items.get(event.work_item_id)
        rev = revision_for(state, item) if item else None
    else:
        return []
    if rev is None or rev.work_item_id is None:
        return []
    item = state.work_items.get(rev.work_item_id)
    if item is None:
        return []
    return revision_step(
        state,
        item,
        rev,
        max_attempts=o.max_attempts,
        max_concurrent=o.max_concurrent,
        auto_merge=o.auto_merge and not o.merge_queue,  # the queue merges (_land)
        merge_approved=merge_approved,
        charge_baseline=o.charge_baseline_failures,
        required=o.pipeline_required,
    )


def _params(command: EngineCommand) -> object:
    return command.params if isinstance(command, StartAgent) else None


def _cancelled_by_a_person(event: EngineEvent, state: EngineState) -> str | None:
    """The work item of the run ``event`` ends, when a person cancelled that run."""
    if not isinstance(event, AgentFailed) or event.kind != "cancelled":
        return None
    run = state.agent_runs.get(event.session_id)
    return run.work_item_id if run is not None and run.cancel_requested else None


# ---------------------------------------------------------------------------- 6. review done


def review_done(event: EngineEvent, state: EngineState, o: HandlerOptions) -> list[EngineCommand]:
    if isinstance(event, ReviewerCompleted):
        return _post_or_rereview(event, state, o)
    if not isinstance(event, ReviewPosted):
        return []
    rev = state.revisions.get(event.revision_id)
    if rev is None or rev.work_item_id is None or rev.head_sha != event.head_sha:
        return []  # the head moved on; the new head gets its own review
    item = state.work_items.get(rev.work_item_id)
    if item is None:
        return []
    if event.verdict == "needs-changes":
        return transition(item, "review-needs-changes")
    if not pipeline_acceptable(state, rev, o.charge_baseline_failures):
        return []  # approved, but CI is not green: the pipeline decides
    commands = transition(item, "review-approved")
    green = rev.pipeline.status in ("success", "none")  # red as the default branch: by hand
    if commands and o.auto_merge and green and not o.merge_queue:  # else the queue lands it
        commands.append(MergeRevision(work_item_id=item.id, revision_id=rev.id))
    return commands


def _post_or_rereview(
    event: ReviewerCompleted, state: EngineState, o: HandlerOptions
) -> list[EngineCommand]:
    run = state.agent_runs.get(event.session_id)
    if run is None or not isinstance(run.params, ReviewerStartParams) or run.subject_sha is None:
        return []
    rev = state.revisions.get(run.params.revision_id)
    item = state.work_items.get(run.params.work_item_id)
    if rev is None or item is None:
        return []
    if rev.state == "open" and rev.head_sha == run.subject_sha:
        if run.settled:
            return []
        return [
            PostReview(
                session_id=run.session_id,
                work_item_id=item.id,
                revision_id=rev.id,
                head_sha=run.subject_sha,
                review=event.result.review,
            )
        ]
    # Stale: the review is of a head the revision no longer has. Review the new head instead.
    if item.status == "in-review" and needs_review(
        state, rev, o.max_attempts, o.charge_baseline_failures
    ):
        return [start_reviewer(item, rev)]
    return []


# ---------------------------------------------------------------------------- 7. recovery


def recovery(event: EngineEvent, state: EngineState, o: HandlerOptions) -> list[EngineCommand]:
    if isinstance(event, AgentSignalled):
        # The model API down for long enough: the runs retrying it free their slots.
        return outage_cancels(state, after=o.outage_after) if o.cancel_retrying else []
    cancels = _reconcile(event, state)
    if isinstance(event, WorkItemChanged):
        item = state.work_items.get(event.work_item.id)
        return cancels + (settle(state, item, o.max_attempts) if item else [])
    return cancels + _recover(event, state, o)


def _reconcile(event: EngineEvent, state: EngineState) -> list[EngineCommand]:
    """A change seen on the tracker that a running agent no longer serves cancels the run at
    once (no attempt is spent; its ending cleans up): ``why_cancel``."""
    if isinstance(event, WorkItemChanged | WorkItemRemoved):
        wid = event.work_item.id if isinstance(event, WorkItemChanged) else event.work_item_id
        runs = [run for run in state.agent_runs.values() if run.work_item_id == wid]
    elif isinstance(event, RevisionChanged | RevisionRemoved):
        rid = event.revision.id if isinstance(event, RevisionChanged) else event.revision_id
        runs = [
            run
            for run in state.agent_runs.values()
            if isinstance(run.params, ReviewerStartParams) and run.params.revision_id == rid
        ]
    else:
        return []
    commands: list[EngineCommand] = []
    for run in runs:
        why = why_cancel(state, run)
        if why is not None:
            reason = f"#{run.work_item_id}: run cancelled: {why}"
            commands.append(CancelAgent(session_id=run.session_id, reason=reason))
    return commands


def _recover(event: EngineEvent, state: EngineState, o: HandlerOptions) -> list[EngineCommand]:
    if isinstance(event, StatusTransitioned) and event.to == "in-progress":
        # The run may have ended before its in-progress transition was processed (a start
        # that failed at once, a cancel at shutdown): then nothing else would move the item.
        item = state.work_items.get(event.work_item_id)
        return settle(state, item, o.max_attempts) if item else []
    if isinstance(event, AgentFailed) and event.role == "implementor":
        run = state.agent_runs.get(event.session_id)
        item = state.work_items.get(run.work_item_id) if run and run.work_item_id else None
        return settle(state, item, o.max_attempts) if item else []
    if isinstance(event, AgentFailed) and event.role == "reviewer" and event.kind == "cancelled":
        # A person cancelled the review: the item waits for them (else it is reviewed again).
        run = state.agent_runs.get(event.session_id)
        item = state.work_items.get(run.work_item_id) if run and run.work_item_id else None
        return transition(item, "user-cancelled") if item and run and run.cancel_requested else []
    if isinstance(event, CommandFailed) and isinstance(
        event.command, CreateRevision | UpdateRevision
    ):
        item = state.work_items.get(event.command.work_item_id)
        return settle(state, item, o.max_attempts) if item else []
    if isinstance(event, UserCancelledRun):
        run = state.agent_runs.get(event.session_id)
        if run is None or not run.is_active:
            return []
        return [CancelAgent(session_id=event.session_id, reason="cancelled by a person")]
    if isinstance(event, UserTransitionedStatus):
        item = state.work_items.get(event.work_item_id)
        if item is None or item.status == event.to:
            return []
        return [TransitionStatus(work_item_id=item.id, to=event.to)]
    return []


# ---------------------------------------------------------------------------- wiring

HANDLER_FUNCTIONS: tuple[HandlerFn, ...] = (
    plan,
    apply_plan,
    dispatch,
    implementor_done,
    revision,
    review_done,
    recovery,
)


def create_handlers(options: HandlerOptions | None = None) -> tuple[Handler, ...]:
    """The seven handlers, in order, bound to ``options``."""
    bound = options or HandlerOptions()
    return tuple(Handler(fn.__name__, fn, bound) for fn in HANDLER_FUNCTIONS)


def run_handlers(
    handlers: Sequence[Callable[[EngineEvent, EngineState], list[EngineCommand]]],
    event: EngineEvent,
    state: EngineState,
) -> list[EngineCommand]:
    """Every handler's commands for ``event`` against the one ``state`` snapshot, in handler
    order; a command two handlers both emit is kept once."""
    commands: list[EngineCommand] = []
    for handler in handlers:
        for command in handler(event, state):
            if command not in commands:
                commands.append(command)
    return commands

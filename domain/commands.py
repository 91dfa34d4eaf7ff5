"""Engine commands: what the handlers ask the executor to do, as a union on ``type``.

Commands emitted for one event are independent of each other: none relies on the effect of
another from the same cycle (they all see one snapshot, S002-03). Commands that follow up on an
agent run carry its ``session_id``, so their result (or failure) settles that run.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Annotated, Literal

from pydantic import Field, TypeAdapter

from domain.models import (
    AgentStartParams,
    Frozen,
    RevisionId,
    SentBack,
    SessionId,
    Status,
    WorkItemId,
)
from domain.results import AgentReview, PlannerResult


class StartAgent(Frozen):
    type: Literal["StartAgent"] = "StartAgent"
    params: AgentStartParams
    subject_sha: str | None = Field(
        default=None, description="The revision head a reviewer reviews"
    )
    spec_shas: Mapping[str, str] = Field(
        default_factory=dict, description="The blob SHAs a planner run plans (path → sha)"
    )
    requested_by_user: bool = Field(
        default=False, description="A person asked for it: no retry backoff holds it"
    )


class CancelAgent(Frozen):
    type: Literal["CancelAgent"] = "CancelAgent"
    session_id: SessionId
    reason: str = Field(default="cancelled by a person", description="Why, as the run's reason")
    # The run ends as an infrastructure failure (the model API is down): no attempt spent,
    # and the breaker counts it.
    infrastructure: bool = False


class TransitionStatus(Frozen):
    type: Literal["TransitionStatus"] = "TransitionStatus"
    work_item_id: WorkItemId
    to: Status
    reason: str | None = None  # why, where the decision knows more than the state shows
    landing: SentBack | None = None  # the merge queue sends the item back: what its prompt says


class ApplyPlan(Frozen):
    type: Literal["ApplyPlan"] = "ApplyPlan"
    session_id: SessionId | None = None
    result: PlannerResult
    spec_shas: Mapping[str, str]


class CreateRevision(Frozen):
    type: Literal["CreateRevision"] = "CreateRevision"
    session_id: SessionId | None = None
    work_item_id: WorkItemId
    branch_name: str
    title: str
    body: str
    patch: str
    base_sha: str | None = Field(default=None, description="The run's fork point (the patch's)")


class UpdateRevision(Frozen):
    type: Literal["UpdateRevision"] = "UpdateRevision"
    session_id: SessionId | None = None
    work_item_id: WorkItemId
    revision_id: RevisionId
    patch: str
    base_sha: str | None = Field(default=None, description="The run's fork point (the patch's)")


class PostReview(Frozen):
    type: Literal["PostReview"] = "PostReview"
    session_id: SessionId | None = None
    work_item_id: WorkItemId
    revision_id: RevisionId
    head_sha: str
    review: AgentReview


class MergeRevision(Frozen):
    """Merge the revision. From the merge queue it carries the tested tree: ``head_sha``, which
    contains the default branch's head ``expected_base``; the merge is made only while the
    default branch is still there (else ``LandingRefused`` ``moved``, and it is tested again)."""

    type: Literal["MergeRevision"] = "MergeRevision"
    work_item_id: WorkItemId
    revision_id: RevisionId
    expected_base: str | None = None
    head_sha: str | None = None


class UpdateBranch(Frozen):
    """The merge queue's first step for a revision: merge the default branch's head into its
    branch, so its pipeline runs on the tree that would land. ``head_sha`` is the head it had
    when asked and ``stale_base`` the base of the test this one replaces (None for a first
    test): together they key the write, so a test done again is a new write."""

    type: Literal["UpdateBranch"] = "UpdateBranch"
    work_item_id: WorkItemId
    revision_id: RevisionId
    head_sha: str
    stale_base: str | None = None


EngineCommand = Annotated[
    StartAgent
    | CancelAgent
    | TransitionStatus
    | ApplyPlan
    | CreateRevision
    | UpdateRevision
    | PostReview
    | MergeRevision
    | UpdateBranch,
    Field(discriminator="type"),
]

PROVIDER_WRITES: tuple[type[Frozen], ...] = (
    TransitionStatus,
    ApplyPlan,
    CreateRevision,
    UpdateRevision,
    PostReview,
    MergeRevision,
    UpdateBranch,
)
"""Commands the executor turns into provider writes (recorded as intents in the journal)."""

COMMAND_ADAPTER: TypeAdapter[EngineCommand] = TypeAdapter(EngineCommand)


def parse_command(data: object) -> EngineCommand:
    return COMMAND_ADAPTER.validate_python(data)


def idempotency_key(command: EngineCommand) -> str:
    """A key that is the same every time the *same* write is attempted.

    The executor records it with the write intent before the write and the provider uses it to
    find a write that was applied but not acknowledged (a 502 after GitHub created the PR), so a
    retry or a restart never writes twice. Writes that follow an agent run are keyed by the run;
    the others by their target and arguments.
    """
    match command:
        case ApplyPlan(session_id=sid) if sid is not None:
            return f"apply-plan:{sid}"
        case ApplyPlan(spec_shas=shas):
            return "apply-plan:" + ",".join(f"{p}@{s}" for p, s in sorted(shas.items()))
        case CreateRevision(session_id=sid) if sid is not None:
            return f"create-revision:{sid}"
        case CreateRevision(work_item_id=wid, branch_name=branch):
            return f"create-revision:{wid}:{branch}"
        case UpdateRevision(session_id=sid) if sid is not None:
            return f"update-revision:{sid}"
        case UpdateRevision(revision_id=rid, patch=patch):
            return f"update-revision:{rid}:{_digest(patch)}"
        case PostReview(session_id=sid) if sid is not None:
            return f"post-review:{sid}"
        case PostReview(revision_id=rid, head_sha=sha):
            return f"post-review:{rid}@{sha}"
        case TransitionStatus(work_item_id=wid, to=to):
            return f"transition:{wid}:{to}"
        case MergeRevision(revision_id=rid, expected_base=base) if base is not None:
            return f"merge:{rid}@{base}"  # each test's merge: a refused one is answered again
        case MergeRevision(revision_id=rid):
            return f"merge:{rid}"
        case UpdateBranch(revision_id=rid, head_sha=sha, stale_base=stale):
            return f"update-branch:{rid}@{sha}" + (f"~{stale}" if stale else "")
        case StartAgent() | CancelAgent():
            return f"{command.type}:{COMMAND_ADAPTER.dump_json(command).decode()}"


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]

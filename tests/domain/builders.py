"""Small builders for domain objects, so a test states only what it is about."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from domain.events import (
    AgentRequested,
    EngineEvent,
    ImplementorCompleted,
    ReviewerCompleted,
)
from domain.handlers import create_handlers, run_handlers
from domain.handlers.options import HandlerOptions
from domain.models import (
    AgentRun,
    EngineState,
    ImplementorStartParams,
    Pipeline,
    PlannerStartParams,
    ReviewerStartParams,
    Revision,
    RevisionId,
    SessionId,
    Spec,
    Status,
    WorkItem,
    WorkItemId,
)
from domain.results import AgentReview, AgentReviewComment, ImplementorResult, ReviewerResult
from domain.state import apply_event


def item(
    wid: str = "1",
    status: Status = "pending",
    *,
    title: str | None = None,
    blocked_by: Iterable[str] = (),
    linked_revision: str | None = None,
) -> WorkItem:
    return WorkItem(
        id=WorkItemId(wid),
        title=title or f"Item {wid}",
        status=status,
        blocked_by=tuple(WorkItemId(b) for b in blocked_by),
        linked_revision=RevisionId(linked_revision) if linked_revision else None,
    )


def revision(
    rid: str = "r1",
    wid: str | None = "1",
    *,
    head: str = "h1",
    pipeline: str = "success",
    state: str = "open",
    reviewed_sha: str | None = None,
    reason: str | None = None,
    failed: tuple[str, ...] = (),
) -> Revision:
    return Revision.model_validate(
        {
            "id": rid,
            "title": f"Revision {rid}",
            "work_item_id": wid,
            "branch": f"cpe/{wid}-x",
            "head_sha": head,
            "state": state,
            "pipeline": Pipeline.model_validate(
                {"status": pipeline, "reason": reason, "failed_checks": failed}
            ),
            "reviewed_sha": reviewed_sha,
        }
    )


def spec(path: str = "specs/a.md", sha: str = "b1") -> Spec:
    return Spec(path=path, blob_sha=sha)


def implementor_run(
    sid: str = "s1", wid: str = "1", *, status: str = "running", **fields: Any
) -> AgentRun:
    params = ImplementorStartParams(
        session_id=SessionId(sid), work_item_id=WorkItemId(wid), branch_name=f"cpe/{wid}-x"
    )
    return AgentRun.model_validate(
        {"session_id": sid, "params": params, "status": status, **fields}
    )


def reviewer_run(
    sid: str = "v1",
    wid: str = "1",
    rid: str = "r1",
    *,
    head: str = "h1",
    status: str = "running",
    **fields: Any,
) -> AgentRun:
    params = ReviewerStartParams(
        session_id=SessionId(sid), work_item_id=WorkItemId(wid), revision_id=RevisionId(rid)
    )
    return AgentRun.model_validate(
        {"session_id": sid, "params": params, "status": status, "subject_sha": head, **fields}
    )


def planner_run(
    sid: str = "p1", shas: dict[str, str] | None = None, *, status: str = "running", **fields: Any
) -> AgentRun:
    shas = shas if shas is not None else {"specs/a.md": "b1"}
    params = PlannerStartParams(session_id=SessionId(sid), spec_paths=tuple(shas))
    return AgentRun.model_validate(
        {"session_id": sid, "params": params, "status": status, "spec_shas": shas, **fields}
    )


def state(
    *items: WorkItem,
    revisions: Iterable[Revision] = (),
    runs: Iterable[AgentRun] = (),
    specs: Iterable[Spec] = (),
    last_planned: dict[str, str] | None = None,
    attempts: dict[str, int] | None = None,
) -> EngineState:
    return EngineState.model_validate(
        {
            "work_items": {i.id: i for i in items},
            "revisions": {r.id: r for r in revisions},
            "agent_runs": {r.session_id: r for r in runs},
            "specs": {s.path: s for s in specs},
            "last_planned_shas": last_planned or {},
            "attempts": attempts or {},
        }
    )


def implemented(
    sid: str = "s1", outcome: str = "completed", patch: str | None = "diff --git a/x b/x\n"
) -> ImplementorCompleted:
    return ImplementorCompleted(
        session_id=SessionId(sid),
        result=ImplementorResult.model_validate(
            {"outcome": outcome, "summary": "did it", "patch": patch}
        ),
    )


def reviewed(sid: str = "v1", verdict: str = "approve") -> ReviewerCompleted:
    review = AgentReview.model_validate(
        {
            "verdict": verdict,
            "summary": "looks fine" if verdict == "approve" else "fix it",
            "comments": [AgentReviewComment(path="x.py", line=3, body="rename this")],
        }
    )
    return ReviewerCompleted(session_id=SessionId(sid), result=ReviewerResult(review=review))


def requested(params: Any, sid: str = "s9", **fields: Any) -> AgentRequested:
    params = params.model_copy(update={"session_id": sid})
    return AgentRequested(session_id=SessionId(sid), params=params, **fields)


def step(
    before: EngineState, event: EngineEvent, options: HandlerOptions | None = None
) -> tuple[EngineState, list[Any]]:
    """Apply ``event`` and run every handler on the new snapshot, as the engine does."""
    after = apply_event(before, event)
    return after, run_handlers(create_handlers(options), event, after)

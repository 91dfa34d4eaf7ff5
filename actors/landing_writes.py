"""The merge queue's writes as the executor makes them: bringing a revision up to date, landing
it on the base it was tested on, and a refused step as the event the queue acts on
(``LandingRefused``)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import structlog

from domain.commands import (
    CreateRevision,
    EngineCommand,
    MergeRevision,
    UpdateBranch,
    UpdateRevision,
)
from domain.errors import BaseMovedError, ConflictError, PatchError
from domain.events import BranchUpdated, LandingRefused, RevisionMerged
from domain.ports import RevisionLander

log = structlog.get_logger("cpe.executor")


def land(
    lander: RevisionLander, command: MergeRevision, base: str, head: str, at: datetime
) -> RevisionMerged:
    """Merge the tested head ``head``, only while the default branch is at ``base``."""
    sha = lander.land(command.revision_id, expected_base=base, head_sha=head)
    log.info(
        "merge queue: landed",
        revision_id=command.revision_id,
        work_item_id=command.work_item_id,
        merge_sha=sha,
        tested=head,
        base=base,
    )
    return RevisionMerged(revision_id=command.revision_id, merge_sha=sha, at=at)


def update_branch(
    lander: RevisionLander, command: UpdateBranch, key: str, at: datetime
) -> BranchUpdated:
    """Bring the revision up to date with the default branch: its test begins."""
    update = lander.update_branch(command.revision_id, idempotency_key=key)
    moved = update.revision.head_sha != command.head_sha
    log.info(
        "merge queue: testing" if moved else "merge queue: up to date",
        revision_id=command.revision_id,
        work_item_id=command.work_item_id,
        head=update.revision.head_sha,
        base=update.base_sha,
        pipeline=update.revision.pipeline.status,
    )
    return BranchUpdated(
        work_item_id=command.work_item_id,
        revision=update.revision,
        base_sha=update.base_sha,
        at=at,
    )


def refusal(command: EngineCommand, exc: ConflictError | PatchError) -> LandingRefused | None:
    """A refused write as the merge queue's event, when it is the queue's, or a run's patch
    that conflicts with the default branch (another landing moved it: a ``PatchError`` naming
    the files); None when it is a plain failure."""
    fields: dict[str, Any] = {"reason": str(exc), "files": exc.files, "detail": exc.detail}
    if isinstance(exc, PatchError) and not isinstance(command, CreateRevision | UpdateRevision):
        return None
    match command:
        case MergeRevision(expected_base=base) if base is not None:
            kind = "moved" if isinstance(exc, BaseMovedError) else "conflict"
            fields |= {
                "work_item_id": command.work_item_id,
                "revision_id": command.revision_id,
                "head_sha": command.head_sha,
            }
        case UpdateBranch():
            kind = "conflict"
            fields |= {
                "work_item_id": command.work_item_id,
                "revision_id": command.revision_id,
                "head_sha": command.head_sha,
            }
        case CreateRevision() | UpdateRevision() if isinstance(exc, PatchError) and exc.files:
            kind = "conflict"
            rid = getattr(command, "revision_id", None)
            fields |= {"work_item_id": command.work_item_id, "revision_id": rid,
                       "session_id": command.session_id}  # fmt: skip
        case _:
            return None
    return LandingRefused.model_validate({**fields, "kind": kind, "at": datetime.now(UTC)})

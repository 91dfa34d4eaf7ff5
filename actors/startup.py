"""What a start does about the engine before it, around the journal's restore: the state the
journal holds (its unprocessed events applied too), the leftovers of crashed runs reaped by
their runtimes, and the runs that a crash or a stop interrupted failed as interrupted."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import UTC, datetime

import structlog

from actors.journal import Restored
from actors.queue import Inbox
from domain.decisions import INTERRUPTED
from domain.events import AgentFailed
from domain.models import AgentRole, EngineState
from domain.ports import RevisionProviderReader, RuntimeAdapter, RuntimeReaper
from domain.state import apply_event

log = structlog.get_logger("cpe.engine")


def journaled_state(restored: Restored) -> EngineState:
    """Everything the journal holds, processed or not: a run whose ``AgentRequested`` was
    queued but never processed was interrupted too."""
    state = restored.state
    for entry in restored.unprocessed:
        state = apply_event(state, entry.event)
    return state


def reap_runtime_leftovers(
    revision_reader: RevisionProviderReader, adapters: Mapping[AgentRole, RuntimeAdapter]
) -> None:
    """Let each runtime remove what a crashed run left (processes, worktrees, branches),
    keeping the branches of open revisions (the local provider's share their names)."""
    try:
        revisions = revision_reader.list_revisions()
        keep = frozenset(r.branch for r in revisions if r.state == "open")
    except Exception as exc:
        log.error("cannot list revisions before reaping; keeping every branch", error=repr(exc))
        return
    for adapter in _each_once(adapters.values()):
        if not isinstance(adapter, RuntimeReaper):  # a seed adapter: nothing to reap
            continue
        try:
            adapter.reap(keep)
        except Exception:
            log.exception("runtime reaper failed", runtime=type(adapter).__name__)


def fail_interrupted_runs(inbox: Inbox, state: EngineState) -> None:
    """Queue the failure of every run ``state`` shows active: it was interrupted."""
    for run in state.agent_runs.values():
        if run.is_active:
            inbox.put(
                AgentFailed(
                    session_id=run.session_id,
                    role=run.role,
                    kind="failed",
                    reason=INTERRUPTED,
                    at=datetime.now(UTC),
                )
            )


def _each_once(adapters: Iterable[RuntimeAdapter]) -> list[RuntimeAdapter]:
    """One role's adapter may serve others too: reaped once."""
    return list({id(a): a for a in adapters}.values())

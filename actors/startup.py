"""What a start does about the engine before it, around the journal's restore: the state the
journal holds (its unprocessed events applied too), the leftovers of crashed runs reaped by
their runtimes, and the runs that a crash or a stop interrupted failed as interrupted."""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

import pykka
import structlog

from actors.journal import Restored
from actors.pollers import Poll
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


START_SLICE = 0.2  # seconds: how often a wait of the start looks whether a stop was asked


class StartWaits:
    """What ``Engine.start`` waits for (the first poll of each poller, then its events), each
    up to ``timeout`` seconds a slice at a time: a stop asked meanwhile (``interrupted``, set
    from a signal handler) ends them at once, so a Ctrl-C does not first wait out a slow or
    failing provider."""

    def __init__(self, timeout: float) -> None:
        self.timeout = timeout
        self.interrupted = threading.Event()

    def until(self, wait: Callable[[float], bool], what: str | None = None) -> bool:
        """``wait`` (given a slice of seconds; True once done) until done (True), the timeout
        or an interruption (False; logged, naming ``what`` was waited for, when given)."""
        deadline = time.monotonic() + self.timeout
        while not self.interrupted.is_set():
            left = deadline - time.monotonic()
            if left <= 0:
                if what is not None:
                    log.error(f"{what} were not processed in time; started anyway")
                return False
            if wait(min(left, START_SLICE)):
                return True
        if what is not None:
            log.info(f"start interrupted by a stop: {what} not awaited")
        return False

    def first_polls(self, pollers: Mapping[str, pykka.ActorRef[Any] | None]) -> None:
        """Each poller's first cycle (``Poll(full=True)``), one after the other, awaited."""
        for name, ref in pollers.items():
            if ref is None:
                continue
            try:
                answer = ref.ask(Poll(full=True), block=False)
                self.until(functools.partial(_answered, answer))
            except Exception as exc:
                log.error("first poll failed", poller=name, error=repr(exc))


def _answered(answer: pykka.Future[Any], seconds: float) -> bool:
    """Whether an actor's answer came within ``seconds`` (its error raised, as ``ask`` does)."""
    try:
        answer.get(timeout=seconds)
    except pykka.Timeout:
        return False
    return True

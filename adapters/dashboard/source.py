"""What the dashboard shows and acts on: one running (or stopped) engine and its configuration.

A ``Source`` reads the engine's state, its live run output and its queue, keeps the last
decisions in words (``domain.narration``, from ``Engine.watch``), and carries the ``Control``
that actions go through, or None when the dashboard only shows (the finished demo). What it
reads of the engine is ``Seen``: a running ``Engine``, or a stopped engine's journal (the
terminal console's, ``adapters.tui.journal_feed``, whose decisions are told with ``tell``).
``moment`` gives the state and the decisions together, as of the same event, so that no panel
of a page is ahead of another (the runs table "running" beside a decision "completed"). An engine
that has stopped keeps its last state: the source then shows it, and actions are refused.
Dispatch's pauses and the model accounts' holds are judged as the engine judges them
(``domain.admission.dispatch_pauses``, ``quota_hold``), with the configuration's settings.
"""

from __future__ import annotations

import itertools
import threading
from collections import deque
from collections.abc import Callable, Mapping, Sized
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Protocol

import structlog

from actors.observer import Watcher
from actors.settings import BreakerSettings, QuotaSettings
from actors.store import Listener, Unsubscribe
from actors.streams import AgentStream, OutputBuffer
from adapters.describe.items import IssuePages
from adapters.describe.landing import Workflow
from adapters.host.control import Control
from adapters.host.metering import ProviderMeter
from adapters.runtime.artifacts.run_review import run_review
from adapters.runtime.remote.placement import read_placement
from domain.admission import BreakerPaused, PersonPaused, dispatch_pauses
from domain.decisions import QuotaHold, quota_hold
from domain.events import EngineEvent
from domain.models import AgentRole, AgentRun, EngineState, SessionId, WorkItem, WorkItemId
from domain.narration import Narrator
from domain.results import AgentReview

DECISIONS_KEPT = 200


@dataclass(frozen=True)
class DashboardSettings:
    """What the dashboard reads of the configuration, given by the composition root:
    ``[workflow]``, ``[breaker]``, ``[runtime.quota]``, each role's runtime kind
    (``[runtime.roles]``) and model account, and where the tracker shows its items (None: the
    local tracker, whose bodies are read)."""

    workflow: Workflow
    breaker: BreakerSettings
    quota: QuotaSettings
    runtimes: Mapping[str, str]
    accounts: Mapping[AgentRole, str]
    issue_pages: IssuePages | None


log = structlog.get_logger("cpe.dashboard")


class Buffers(Protocol):
    def buffer(self, session_id: SessionId) -> OutputBuffer | None:
        """The output so far of a run that has started and not ended."""
        ...


class Seen(Protocol):
    """What a ``Source`` reads of an engine (``actors.engine.Engine`` is one)."""

    @property
    def stopped(self) -> bool: ...

    @property
    def supervisor(self) -> object | None:
        """None until the engine has started."""
        ...

    @property
    def inbox(self) -> Sized:
        """The events queued, not yet processed."""
        ...

    @property
    def streams(self) -> Buffers: ...

    def get_state(self) -> EngineState: ...

    def subscribe(self, listener: Listener) -> Unsubscribe: ...

    def watch(self, watcher: Watcher) -> Unsubscribe: ...

    def queued(self) -> tuple[EngineEvent, ...]: ...

    def get_agent_stream(self, session_id: SessionId) -> AgentStream | None: ...

    def get_work_item_body(self, work_item_id: WorkItemId) -> str: ...


@dataclass(frozen=True)
class Decision:
    at: datetime
    text: str


@dataclass(frozen=True)
class Pause:
    """Why dispatch is paused: ``by`` a person (``reason`` what they said, if anything, and
    ``since`` when; ``text`` the line ``cpe status`` prints), the breaker (``failures`` runs in
    a row failed under the agent, the last for ``reason``) or an ``outage`` (live runs retried
    the model API ``failures`` times with no answer, the last for ``reason``); the breaker's and
    the outage's pause last ``until`` (then a probe decides)."""

    by: str  # "person", "breaker" or "outage"
    reason: str
    until: datetime | None = None
    failures: int | None = None
    since: datetime | None = None
    text: str | None = None


class Source:
    def __init__(
        self,
        engine: Seen,
        settings: DashboardSettings,
        state_dir: Path,
        *,
        control: Control | None,
        meter: ProviderMeter | None = None,
        title: str = "",
    ):
        self.engine = engine
        self.settings = settings
        self.state_dir = state_dir
        self.control = control
        self.meter = meter or ProviderMeter()
        self.title = title
        self._decisions: deque[Decision] = deque(maxlen=DECISIONS_KEPT)
        self._lock = threading.Lock()
        self._placements: dict[SessionId, dict[str, str] | None] = {}
        self._reviews: dict[SessionId, AgentReview | None] = {}
        self._told: EngineState | None = None  # the state the decisions are told up to
        self._listeners: dict[int, Callable[[EngineState], None]] = {}
        self._keys = itertools.count()
        self._narrate = Narrator(engine.queued)
        self._unwatch = engine.watch(self._decided)

    def close(self) -> None:
        self._unwatch()

    # ------------------------------------------------------------------ reads

    def state(self) -> EngineState:
        return self.engine.get_state()

    def moment(self) -> tuple[EngineState, list[Decision]]:
        """The state and the decisions told up to it, as of the same event: the state after
        the last event the engine processed and told (its store may be a few instructions
        ahead, mid-event); the store's own before any was told (a state set at start)."""
        with self._lock:
            told, decisions = self._told, list(self._decisions)
        return (told if told is not None else self.state()), decisions

    def subscribe(self, listener: Callable[[EngineState], None]) -> Callable[[], None]:
        """``listener`` on every change of the store, and again once each processed event is
        told (so a page redrawn at the store's change, before the event's decisions were
        told, is redrawn with them)."""
        unsubscribe = self.engine.subscribe(listener)
        with self._lock:
            key = next(self._keys)
            self._listeners[key] = listener

        def both() -> None:
            unsubscribe()
            with self._lock:
                self._listeners.pop(key, None)

        return both

    def stream(self, session_id: SessionId) -> AgentStream | None:
        return self.engine.get_agent_stream(session_id)

    def queue_depth(self) -> int:
        return len(self.engine.inbox)

    def runtime(self, role: str) -> str:
        return self.settings.runtimes.get(role, "")

    def placement(self, run: AgentRun) -> dict[str, str] | None:
        """Where a remote run ran (its ``remote.json``: node id, address, host); None for a
        local run. Written once when the run is placed: kept once found, and a local run's
        absence once it has ended."""
        with self._lock:
            if run.session_id in self._placements:
                return self._placements[run.session_id]
        where = read_placement(self.state_dir, run.session_id)
        if where is not None or run.is_terminal:
            with self._lock:
                self._placements[run.session_id] = where
        return where

    def review(self, run: AgentRun) -> AgentReview | None:
        """A reviewer run's review (summary, inline comments) from its record; kept once its
        run has ended (its record no longer changes)."""
        with self._lock:
            if run.session_id in self._reviews:
                return self._reviews[run.session_id]
        review = run_review(self.state_dir / "runs" / run.session_id)
        if run.is_terminal:
            with self._lock:
                self._reviews[run.session_id] = review
        return review

    def body(self, item: WorkItem) -> str:
        """The item's body as ``cpe work show`` gives it: the tracker's (read through the
        engine's own reader, which the runtimes share); on GitHub or GitLab, where it is (not
        read: a page view spends no API call)."""
        if self.settings.issue_pages is not None:
            return self.settings.issue_pages.body(item)
        try:
            return self.engine.get_work_item_body(item.id)
        except Exception as exc:  # a tracker that cannot answer: the page says so
            return f"(the tracker did not give the body: {exc})"

    def pause(self, state: EngineState, now: datetime | None = None) -> Pause | None:
        """The pause that holds dispatch: a person's before the breaker's; None when none."""
        pauses = self.pauses(state, now)
        return pauses[0] if pauses else None

    def pauses(self, state: EngineState, now: datetime | None = None) -> list[Pause]:
        """Every pause that holds dispatch now, as ``cpe status`` lists them: a person's, then
        the breaker's while it lasts (``domain.admission.dispatch_pauses``, as the executor
        judges them: runs failing under the agent, or the model API down as live runs report
        it)."""
        now = now or datetime.now(UTC)
        found = []
        for paused in dispatch_pauses(state, now, self.settings.breaker.rule()):
            match paused:
                case PersonPaused():  # words: "dispatch paused by a person since …: why"
                    found.append(
                        Pause("person", paused.reason, since=paused.since, text=paused.words)
                    )
                case BreakerPaused(pause=pause):
                    by = "outage" if pause.outage else "breaker"
                    found.append(Pause(by, pause.reason, pause.until, pause.failures))
        return found

    def accounts(self, state: EngineState) -> dict[str, list[str]]:
        """Each model account, with the roles whose runtime uses it (``[runtime.roles]``): the
        configured ones and any the state has a report of, by name."""
        roles: dict[str, list[str]] = {account: [] for account in state.quota}
        for role, account in self.settings.accounts.items():
            roles.setdefault(account, []).append(role)
        return dict(sorted(roles.items()))

    def holds(self, state: EngineState, now: datetime | None = None) -> dict[str, QuotaHold]:
        """The model accounts on which no run starts now (``quota_hold``: a spent usage window
        until its reset, or ``[runtime.quota] pause_at`` reached), by account."""
        now = now or datetime.now(UTC)
        quota = self.settings.quota
        held = {}
        for account in sorted(state.quota):
            hold = quota_hold(state, account, now, margin=quota.margin, pause_at=quota.pause_at)
            if hold is not None:
                held[account] = hold
        return held

    def decisions(self) -> list[Decision]:
        with self._lock:
            return list(self._decisions)

    @property
    def running(self) -> bool:
        return not self.engine.stopped and self.engine.supervisor is not None

    def _decided(self, event: EngineEvent, before: EngineState, after: EngineState) -> None:
        self.tell(event, before, after)

    def tell(
        self,
        event: EngineEvent,
        before: EngineState,
        after: EngineState,
        at: datetime | None = None,
    ) -> None:
        """``event``, processed from ``before`` to ``after`` (``at``: when; now by default),
        told as decisions, and every listener rung."""
        lines = self._narrate(event, before, after)
        now = at or datetime.now(UTC)
        with self._lock:
            self._decisions.extend(Decision(now, line) for line in lines)
            self._told = after
            listeners = list(self._listeners.values())
        for listener in listeners:  # on the engine's thread: they only ring their page
            try:
                listener(after)
            except Exception:  # a watcher must not raise into the engine
                log.exception("dashboard listener failed", listener=repr(listener))

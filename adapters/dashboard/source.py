"""What the dashboard shows and acts on: one running (or stopped) engine and its configuration.

A ``Source`` reads the engine's state, its live run output and its queue, keeps the last
decisions in words (``domain.narration``, from ``Engine.watch``), and carries the ``Control``
that actions go through, or None when the dashboard only shows (the finished demo). An engine
that has stopped keeps its last state: the source then shows it, and actions are refused.
Dispatch's pauses and the model accounts' holds are judged as the engine judges them
(``breaker_pause``, ``quota_hold``), with the configuration's settings.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from actors.engine import Engine
from actors.streams import AgentStream
from adapters.cli.settings import CpeConfig
from adapters.control import Control
from adapters.metering import ProviderMeter
from adapters.runtime.remote.placement import read_placement
from domain.decisions import QuotaHold, quota_hold
from domain.events import EngineEvent
from domain.models import AgentRun, EngineState, SessionId
from domain.narration import Narrator
from domain.requests import describe_pause

DECISIONS_KEPT = 200


@dataclass(frozen=True)
class Decision:
    at: datetime
    text: str


@dataclass(frozen=True)
class Pause:
    """Why dispatch is paused: ``by`` a person (``reason`` is ``describe_pause``'s words), the
    breaker (``failures`` runs in a row failed under the agent, the last for ``reason``) or an
    ``outage`` (live runs retried the model API ``failures`` times with no answer, the last for
    ``reason``); the breaker's and the outage's pause last ``until`` (then a probe decides)."""

    by: str  # "person", "breaker" or "outage"
    reason: str
    until: datetime | None = None
    failures: int | None = None


class Source:
    def __init__(
        self,
        engine: Engine,
        config: CpeConfig,
        state_dir: Path,
        *,
        control: Control | None,
        meter: ProviderMeter | None = None,
        title: str = "",
    ):
        self.engine = engine
        self.config = config
        self.state_dir = state_dir
        self.control = control
        self.meter = meter or ProviderMeter()
        self.title = title
        self._decisions: deque[Decision] = deque(maxlen=DECISIONS_KEPT)
        self._lock = threading.Lock()
        self._placements: dict[SessionId, dict[str, str] | None] = {}
        self._narrate = Narrator(engine.queued)
        self._unwatch = engine.watch(self._decided)

    def close(self) -> None:
        self._unwatch()

    # ------------------------------------------------------------------ reads

    def state(self) -> EngineState:
        return self.engine.get_state()

    def subscribe(self, listener: Callable[[EngineState], None]) -> Callable[[], None]:
        return self.engine.subscribe(listener)

    def stream(self, session_id: SessionId) -> AgentStream | None:
        return self.engine.get_agent_stream(session_id)

    def queue_depth(self) -> int:
        return len(self.engine.inbox)

    def runtime(self, role: str) -> str:
        kind: str = self.config.runtime.roles.model_dump().get(role, "")
        return kind

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

    def pause(self, state: EngineState, now: datetime | None = None) -> Pause | None:
        """The pause that holds dispatch: a person's before the breaker's; None when none."""
        pauses = self.pauses(state, now)
        return pauses[0] if pauses else None

    def pauses(self, state: EngineState, now: datetime | None = None) -> list[Pause]:
        """Every pause that holds dispatch now, as ``cpe status`` lists them: a person's, then
        the breaker's while it lasts (``BreakerSettings.pause``: runs failing under the agent,
        or the model API down as live runs report it)."""
        now = now or datetime.now(UTC)
        found = []
        if state.manual_pause is not None:
            found.append(Pause("person", describe_pause(state)))
        pause = self.config.breaker.pause(state)
        if pause is not None and now < pause.until:
            by = "outage" if pause.outage else "breaker"
            found.append(Pause(by, pause.reason, pause.until, pause.failures))
        return found

    def accounts(self, state: EngineState) -> dict[str, list[str]]:
        """Each model account, with the roles whose runtime uses it (``[runtime.roles]``): the
        configured ones and any the state has a report of, by name."""
        roles: dict[str, list[str]] = {account: [] for account in state.quota}
        for role, account in self.config.accounts().items():
            roles.setdefault(account, []).append(role)
        return dict(sorted(roles.items()))

    def holds(self, state: EngineState, now: datetime | None = None) -> dict[str, QuotaHold]:
        """The model accounts on which no run starts now (``quota_hold``: a spent usage window
        until its reset, or ``[runtime.quota] pause_at`` reached), by account."""
        now = now or datetime.now(UTC)
        quota = self.config.runtime.quota
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
        lines = self._narrate(event, before, after)
        if lines:
            now = datetime.now(UTC)
            with self._lock:
                self._decisions.extend(Decision(now, line) for line in lines)

"""What the dashboard shows and acts on: one running (or stopped) engine and its configuration.

A ``Source`` reads the engine's state, its live run output and its queue, keeps the last
decisions in words (``domain.narration``, from ``Engine.watch``), and carries the ``Control``
that actions go through, or None when the dashboard only shows (the finished demo). An engine
that has stopped keeps its last state: the source then shows it, and actions are refused.
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
from adapters.control import Control, dispatch_paused
from adapters.metering import ProviderMeter
from adapters.runtime.remote.placement import read_placement
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
    by: str  # "person" or "breaker"
    reason: str


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
        if state.manual_pause is not None:
            return Pause("person", describe_pause(state))
        why = dispatch_paused(state, self.config.breaker, now or datetime.now(UTC))
        return Pause("breaker", why) if why else None

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

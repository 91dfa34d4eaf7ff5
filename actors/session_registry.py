"""The session registry: the runs the executor started, what the concurrency guards count
(``domain.admission``), and what shutdown cancels and waits for.

It lives outside the executor actor, so a restarted executor still knows every running
session. A session calls ``ended`` *before* it queues its terminal event, so by the time the
engine processes that event (and perhaps starts a new run in the freed slot) the guards already
count the slot as free.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass

from domain.models import AgentRole, AgentStartParams, SessionId


@dataclass
class _Active:
    params: AgentStartParams
    cancel: Callable[[str | None, bool], None] | None = None
    cancel_requested: bool = False
    cancel_reason: str | None = None
    cancel_infrastructure: bool = False


class SessionManager:
    def __init__(self) -> None:
        self._lock = threading.Condition()
        self._active: dict[SessionId, _Active] = {}
        # Runs whose slot is free but whose terminal event is not in the queue yet: a stop's
        # drain must not begin before it is (else the event waits for the next start).
        self._delivering: set[SessionId] = set()
        self._closed = False

    # -- what the concurrency guards count (``domain.admission.concurrency_full``)
    def running(self) -> list[AgentStartParams]:
        """The start parameters of every run under way, in the order they were added."""
        with self._lock:
            return [a.params for a in self._active.values()]

    # -- lifecycle
    def add(self, session_id: SessionId, params: AgentStartParams) -> bool:
        """Register a run about to start; False once ``close()`` was called (shutdown)."""
        with self._lock:
            if self._closed:
                return False
            self._active[session_id] = _Active(params)
            return True

    def close(self) -> None:
        """No new run from now on (shutdown step 1)."""
        with self._lock:
            self._closed = True

    def attach(self, session_id: SessionId, cancel: Callable[[str | None, bool], None]) -> None:
        """The session's canceller; a cancel asked for before it existed is delivered now."""
        with self._lock:
            active = self._active.get(session_id)
            if active is None:
                return
            active.cancel = cancel
            deliver, reason = active.cancel_requested, active.cancel_reason
            infrastructure = active.cancel_infrastructure
        if deliver:
            cancel(reason, infrastructure)

    def ended(self, session_id: SessionId) -> None:
        """The run's slot is free (a new run of its item may start); ``delivered`` follows
        once its terminal event is in the queue."""
        with self._lock:
            if self._active.pop(session_id, None) is not None:
                self._delivering.add(session_id)
            self._lock.notify_all()

    def delivered(self, session_id: SessionId) -> None:
        """The run's terminal event is in the queue."""
        with self._lock:
            self._delivering.discard(session_id)
            self._lock.notify_all()

    def cancel(
        self, session_id: SessionId, reason: str | None = None, *, infrastructure: bool = False
    ) -> bool:
        """Cancel a run; ``reason`` becomes its failure reason (None: the canceller's own);
        ``infrastructure``: it ends as an infrastructure failure (the model API is down)."""
        with self._lock:
            active = self._active.get(session_id)
            if active is None:
                return False
            cancel = active.cancel
            if cancel is None:  # registered, session not started yet: deliver on attach
                active.cancel_requested = True
                active.cancel_reason = reason
                active.cancel_infrastructure = infrastructure
                return True
        cancel(reason, infrastructure)
        return True

    def cancel_all(self) -> int:
        with self._lock:
            ids = list(self._active)
        return sum(1 for sid in ids if self.cancel(sid))

    def wait_all_ended(self, timeout: float) -> bool:
        """Wait until every run has ended and its terminal event is in the queue."""
        with self._lock:
            return self._lock.wait_for(
                lambda: not self._active and not self._delivering, timeout=timeout
            )

    def roles(self) -> dict[SessionId, AgentRole]:
        """Every active run's role, by session."""
        with self._lock:
            return {sid: a.params.role for sid, a in self._active.items()}

    def active(self, role: AgentRole | None = None) -> list[SessionId]:
        with self._lock:
            return [sid for sid, a in self._active.items() if role is None or a.params.role == role]

    def __len__(self) -> int:
        with self._lock:
            return len(self._active)

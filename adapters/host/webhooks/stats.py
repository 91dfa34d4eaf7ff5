"""What the receiver counts for ``/metrics``: deliveries by vendor and outcome, refusals by
vendor and reason, the polls deliveries asked for by poller, and the dispatch delay.

The dispatch delay is from a delivery's receipt to the first event the engine processes from
the poll it triggered (a ``*Changed`` or ``*Removed`` of that poller): ``polled`` notes the
earliest delivery a poll was asked for and the poller's cycle then; ``processed`` (an engine
watcher) observes the delay at the poller's first event after it. A poll that found nothing to
report observes nothing: once the poller began a second cycle after the one asked for, the note
is dropped, and a later event is no longer taken for that delivery's.
"""

from __future__ import annotations

import threading
import time
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

KEPT = 1000  # the last delays kept for the quantiles

# The poller whose cycle queues each event type (actors/pollers.py's watches).
POLLER_OF = {
    "WorkItemChanged": "work_items",
    "WorkItemRemoved": "work_items",
    "WorkItemIgnored": "ignored_items",
    "WorkItemIgnoredRemoved": "ignored_items",
    "RevisionChanged": "revisions",
    "RevisionRemoved": "revisions",
    "SpecChanged": "specs",
    "SpecRemoved": "specs",
    "BaselineChanged": "baseline",
    "BaselineRemoved": "baseline",
}


@dataclass
class Snapshot:
    deliveries: Counter[tuple[str, str]]  # (vendor, outcome)
    refusals: Counter[tuple[str, str]]  # (vendor, reason)
    polls: Counter[str]  # poller
    delays: list[float]  # the last KEPT, oldest first
    delay_sum: float
    delay_count: int


@dataclass
class WebhookStats:
    clock: Callable[[], float] = time.monotonic  # the refresher's clock
    cycles: Callable[[str], int | None] = lambda name: None  # a poller's cycles so far
    _deliveries: Counter[tuple[str, str]] = field(default_factory=Counter)
    _refusals: Counter[tuple[str, str]] = field(default_factory=Counter)
    _polls: Counter[str] = field(default_factory=Counter)
    _delays: deque[float] = field(default_factory=lambda: deque(maxlen=KEPT))
    _delay_sum: float = 0.0
    _delay_count: int = 0
    _pending: dict[str, tuple[float, int | None]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def delivered(self, vendor: str, outcome: str, reason: str | None = None) -> None:
        with self._lock:
            self._deliveries[(vendor, outcome)] += 1
            if reason is not None:
                self._refusals[(vendor, reason)] += 1

    def polled(self, name: str, wanted: float | None) -> None:
        """The refresher asked the engine to poll ``name`` for a delivery received at
        ``wanted`` (``clock`` time; None: a follow-up poll, no delivery's own)."""
        cycle = self.cycles(name)
        with self._lock:
            self._polls[name] += 1
            if wanted is not None and name not in self._pending:
                self._pending[name] = (wanted, cycle)

    def processed(self, event: Any, before: Any = None, after: Any = None) -> None:
        """An engine watcher: the engine processed ``event``."""
        name = POLLER_OF.get(getattr(event, "type", ""))
        if name is None:
            return
        now = self.clock()
        cycle = self.cycles(name)
        with self._lock:
            pending = self._pending.pop(name, None)
            if pending is None:
                return
            wanted, then = pending
            if then is not None and cycle is not None and cycle > then + 2:
                return  # a poll after the one asked for: not that delivery's event
            delay = max(0.0, now - wanted)
            self._delays.append(delay)
            self._delay_sum += delay
            self._delay_count += 1

    def snapshot(self) -> Snapshot:
        with self._lock:
            return Snapshot(
                Counter(self._deliveries),
                Counter(self._refusals),
                Counter(self._polls),
                list(self._delays),
                self._delay_sum,
                self._delay_count,
            )

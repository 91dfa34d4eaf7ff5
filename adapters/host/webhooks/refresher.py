"""The polls deliveries ask for, coalesced per poller: the first at once, then at most one
trailing poll per ``min_gap`` seconds, however many deliveries come meanwhile, and one
follow-up poll ``min_gap`` after the last poll a delivery asked for, so that a vendor whose API
shows a change a moment after its delivery said so (GitHub's read-after-webhook lag) is read
again then, not at the next interval. A lone delivery costs two polls; a burst of N deliveries
over D seconds at most D / min_gap + 3, not N. ``min_gap`` 0: every delivery polls at once, no
follow-up.

Its own thread makes the calls: ``request`` only records what is wanted and wakes it, so an HTTP
handler never waits on the engine. ``close`` stops the thread (with the service it serves).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import structlog

log = structlog.get_logger("cpe.webhooks")

Refresh = Callable[[list[str]], None]


@dataclass
class _Poller:
    last: float | None = None  # when a poll was last asked of the engine (``clock`` time)
    wanted: float | None = None  # when a poll was first asked for since (``clock`` time)
    follow_up: bool = False  # a poll is owed ``min_gap`` after ``last`` (the API's lag)


class Refresher:
    def __init__(
        self,
        refresh: Refresh,
        min_gap: float,
        *,
        clock: Callable[[], float] = time.monotonic,
        on_poll: Callable[[str, float | None], None] | None = None,
    ):
        """``refresh(names)``: the engine's refresh; ``on_poll(name, wanted)``: told of each
        poll asked of the engine with the ``clock`` time the earliest delivery wanted it (None:
        a follow-up, which no delivery waits on)."""
        self.refresh = refresh
        self.min_gap = min_gap
        self.clock = clock
        self.on_poll = on_poll
        self._pollers: dict[str, _Poller] = {}
        self._cond = threading.Condition()
        self._closed = False
        self._thread: threading.Thread | None = None

    def start(self) -> Refresher:
        with self._cond:
            if self._thread is None and not self._closed:
                self._thread = threading.Thread(
                    target=self._run, name="cpe-webhook-refresher", daemon=True
                )
                self._thread.start()
        return self

    def request(self, names: Iterable[str]) -> None:
        """Poll ``names`` soon (never blocks on the engine)."""
        now = self.clock()
        with self._cond:
            for name in names:
                poller = self._pollers.setdefault(name, _Poller())
                if poller.wanted is None:
                    poller.wanted = now
            self._cond.notify()

    def pending(self) -> set[str]:
        """The pollers a delivery asked for whose poll is not asked of the engine yet."""
        with self._cond:
            return {name for name, poller in self._pollers.items() if poller.wanted is not None}

    def owed(self) -> set[str]:
        """The pollers with a poll still to come: a delivery's, or a follow-up."""
        with self._cond:
            return {
                name
                for name, poller in self._pollers.items()
                if poller.wanted is not None or poller.follow_up
            }

    def close(self, timeout: float = 5.0) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify()
            thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)

    def _run(self) -> None:
        while True:
            with self._cond:
                due, wait = self._due(self.clock())
                while not due and not self._closed:
                    self._cond.wait(wait)
                    due, wait = self._due(self.clock())
                if self._closed:
                    return
            self._poll(due)

    def _due(self, now: float) -> tuple[dict[str, float | None], float | None]:
        """The pollers to poll now (with when a delivery first wanted it; None: a follow-up),
        and how long until the next one is due (None: none is owed). Under the lock."""
        due: dict[str, float | None] = {}
        wait: float | None = None
        for name, poller in self._pollers.items():
            if poller.wanted is None and not poller.follow_up:
                continue
            if poller.last is None:
                at = poller.wanted if poller.wanted is not None else now
            elif poller.wanted is None:
                at = poller.last + self.min_gap
            else:
                at = max(poller.wanted, poller.last + self.min_gap)
            if at <= now:
                due[name] = poller.wanted
                # a delivery's poll owes a follow-up (the API may not show the change yet)
                poller.follow_up = poller.wanted is not None and self.min_gap > 0
                poller.last, poller.wanted = now, None
            else:
                wait = at - now if wait is None else min(wait, at - now)
        return due, wait

    def _poll(self, due: dict[str, float | None]) -> None:
        names = sorted(due)
        try:
            self.refresh(names)
        except Exception:  # the engine stopping, say: the interval poll is the fallback
            log.exception("webhook refresh failed", pollers=names)
            return
        if self.on_poll is not None:
            for name in names:
                self.on_poll(name, due[name])

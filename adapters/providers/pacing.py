"""Pacing writes under a tracker's or forge's limits on content creation (shared by the GitHub
and GitLab providers: it knows nothing of either).

GitHub's secondary rate limits allow about 80 content-creating requests (POST, PATCH, PUT,
DELETE) a minute and 500 an hour, per installation or user; past them it refuses everything for
a while and warns that continuing can get an integration banned. GitLab.com allows 60 notes and
200 issues a minute per user, and answers 429 past them. Opening a pull or merge request is a
burst (GitHub: blobs, a tree, a commit, a ref, the pull request), and so is a plan of many
issues.

``WritePacer`` holds two token buckets, one per window: a write takes a token from each, and
when either is empty it waits until both have one. A bucket of capacity ``c`` refilled at ``r``
per second lets at most ``c + r·T`` writes through in any ``T`` seconds, so the defaults stay
under the provider's figures in any minute and in any hour, not only on average. Tokens are
reserved in order, so writes from several threads queue up instead of racing. ``WriteTurns`` is
how a transport waits for a write's turn (every provider's transport shares it).
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass

PACE_LOG_WAIT = 5.0  # a pacing wait this long is worth a line in the log


@dataclass
class TokenBucket:
    capacity: float
    rate: float  # tokens per second
    tokens: float
    updated: float  # when ``tokens`` was true: the last take (may be ahead of now)

    def ready_at(self, now: float) -> float:
        """The first moment from ``now`` at which a token is there, given earlier takes."""
        start = max(now, self.updated)
        have = min(self.capacity, self.tokens + (start - self.updated) * self.rate)
        return start if have >= 1 else start + (1 - have) / self.rate

    def take(self, at: float) -> None:
        """Take a token at ``at`` (no earlier than ``ready_at``)."""
        have = min(self.capacity, self.tokens + (at - self.updated) * self.rate)
        self.tokens, self.updated = have - 1, at


class WritePacer:
    """``reserve()`` returns how long the caller must wait before its write may go out."""

    def __init__(
        self,
        *,
        per_minute: float,
        per_hour: float,
        burst: int,
        clock: Callable[[], float],
    ) -> None:
        now = clock()
        hour_burst = 4 * burst
        self._buckets = [
            TokenBucket(burst, per_minute / 60, burst, now),
            TokenBucket(hour_burst, per_hour / 3600, hour_burst, now),
        ]
        self._clock = clock
        self._lock = threading.Lock()

    @property
    def limits(self) -> tuple[int, int]:
        """The most writes it lets through in any minute, and in any hour."""
        minute, hour = self._buckets
        return (
            int(minute.capacity + minute.rate * 60),
            int(hour.capacity + hour.rate * 3600),
        )

    def reserve(self) -> float:
        with self._lock:
            now = self._clock()
            at = max(bucket.ready_at(now) for bucket in self._buckets)
            for bucket in self._buckets:
                bucket.take(at)
            return at - now


class WriteTurns:
    """A transport's writes, each waiting for its turn in ``pacer`` (None: no pacing).

    ``write_turn()`` takes the turn ahead, for a write that depends on a read: the read inside
    the block is then as fresh as it can be when the write goes out, and the first write the
    thread sends in the block does not wait again."""

    def __init__(
        self, pacer: WritePacer | None, sleep: Callable[[float], None], log: logging.Logger
    ) -> None:
        self._pacer = pacer
        self._sleep = sleep
        self._log = log
        self._taken = threading.local()  # .taken: this thread's next write waited its turn

    @contextlib.contextmanager
    def write_turn(self) -> Iterator[None]:
        self._wait()
        self._taken.taken = True
        try:
            yield
        finally:
            self._taken.taken = False

    def pace(self) -> None:
        """Before a write: wait for its turn, unless ``write_turn`` took it already."""
        if getattr(self._taken, "taken", False):
            self._taken.taken = False
            return
        self._wait()

    def _wait(self) -> None:
        if self._pacer is None:
            return
        wait = self._pacer.reserve()
        if wait <= 0:
            return
        if wait >= PACE_LOG_WAIT:
            minute, hour = self._pacer.limits
            self._log.info(
                "pacing writes: %.0f s before the next (at most %d a minute, %d an hour)",
                wait,
                minute,
                hour,
            )
        self._sleep(wait)

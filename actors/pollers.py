"""Pollers: one provider reader each, an interval timer, change detection.

A poll takes a state snapshot *before* it reads the provider, then queues a ``*Changed`` event
for every entity whose observation would change that snapshot (compared with the reducer's own
merge rule) and a ``*Removed`` event for every known entity the provider no longer lists. Taking
the snapshot first means an observation older than one of the engine's own writes can never
revert it. An entity the state marks as due (a revision whose merge waits for branch protection)
is reported every cycle, changed or not, so what waits on it is tried again. A provider error is
logged and the cycle skipped; one that asks for a wait (a rate limit's ``retry_after``) skips
every cycle until the wait is over, so a limited poller does not keep asking. Anything else is a
crash, and the supervisor restarts the poller.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

import structlog

from actors.base import SupervisedActor, tell
from domain.errors import ProviderError
from domain.events import (
    BaselineChanged,
    BaselineRemoved,
    EngineEvent,
    RevisionChanged,
    RevisionRemoved,
    SpecChanged,
    SpecRemoved,
    WorkItemChanged,
    WorkItemIgnored,
    WorkItemIgnoredRemoved,
    WorkItemRemoved,
)
from domain.models import (
    Baseline,
    EngineState,
    IgnoredWorkItem,
    Revision,
    RevisionId,
    Spec,
    WorkItem,
    WorkItemId,
)
from domain.ports import (
    BaselineReader,
)
from domain.state.observed import merge_observed_revision, merge_observed_work_item

T = TypeVar("T", WorkItem, Revision, Spec, Baseline, IgnoredWorkItem)
Enqueue = Callable[[EngineEvent], object]

log = structlog.get_logger("cpe.poller")


@dataclass
class Poller(Generic[T]):
    """The logic of one poller; ``reader`` is the provider reader it was given."""

    name: str
    reader: object
    read: Callable[[], Sequence[T]]
    known: Callable[[EngineState], Mapping[Any, T]]
    key: Callable[[T], Any]
    merge: Callable[[T | None, T], T]
    changed: Callable[[T], EngineEvent]
    removed: Callable[[Any], EngineEvent]
    get_state: Callable[[], EngineState]
    enqueue: Enqueue
    interval: float
    due: Callable[[EngineState], Iterable[Any]] = lambda state: ()
    kept: Callable[[T], bool] = lambda entity: False
    clock: Callable[[], float] = time.monotonic
    cycles: int = 0
    resume_at: float | None = None  # a provider asked us to wait until then (``clock`` time)
    ticking: threading.Event = field(default_factory=threading.Event)
    queued: threading.Event = field(default_factory=threading.Event)  # a Poll waits in the mailbox

    def poll(self, *, full: bool = False) -> int:
        """One cycle; the number of events queued. A ``full`` cycle (the first after a start)
        reports every entity it observes, changed or not, so every handler sees each of them
        once against the state the journal restored. While the provider's last error asked for
        a wait, a cycle is skipped (0)."""
        self.cycles += 1
        if self.resume_at is not None:
            if self.clock() < self.resume_at:
                log.debug("poller cycle skipped: waiting for the provider", poller=self.name)
                return 0
            log.info("poller resumes after the provider's wait", poller=self.name)
            self.resume_at = None
        log.debug("poller cycle start", poller=self.name, cycle=self.cycles)
        state = self.get_state()
        snapshot = self.known(state)
        due = set(self.due(state))
        try:
            observed = list(self.read())
        except ProviderError as exc:
            log.error("provider API error", poller=self.name, method=exc.method, error=str(exc))
            if exc.retry_after:
                self.resume_at = self.clock() + exc.retry_after
                log.warning(
                    "poller waits as the provider asked",
                    poller=self.name,
                    wait_s=round(exc.retry_after, 1),
                )
            return 0
        events: list[EngineEvent] = []
        seen = set()
        for entity in observed:
            key = self.key(entity)
            seen.add(key)
            before = snapshot.get(key)
            if full or key in due or self.merge(before, entity) != before:
                events.append(self.changed(entity))
                log.info("change detected", poller=self.name, change="changed", id=str(key))
        for key, known in snapshot.items():
            if key not in seen and not self.kept(known):
                events.append(self.removed(key))
                log.info("change detected", poller=self.name, change="removed", id=str(key))
        if not events:
            log.debug("no changes detected", poller=self.name, cycle=self.cycles)
        for event in events:
            self.enqueue(event)
        return len(events)


def _keep(known: T | None, observed: T) -> T:
    return observed


@dataclass(frozen=True)
class Watch(Generic[T]):
    """What a poller watches: where the state keeps it, how an entity is keyed and merged (the
    reducer's own rule), the events that report it, and which entities are due every cycle."""

    name: str
    known: Callable[[EngineState], Mapping[Any, T]]
    key: Callable[[T], Any]
    changed: Callable[[T], EngineEvent]
    removed: Callable[[Any], EngineEvent]
    merge: Callable[[T | None, T], T] = _keep
    due: Callable[[EngineState], Iterable[Any]] = lambda state: ()
    kept: Callable[[T], bool] = lambda entity: False
    """A known entity a listing leaves out that is not gone for that (see ``WORK_ITEMS``)."""


WORK_ITEMS: Watch[WorkItem] = Watch(
    name="work_items",
    known=lambda s: s.work_items,
    key=lambda item: item.id,
    merge=merge_observed_work_item,
    changed=lambda item: WorkItemChanged(work_item=item),
    removed=lambda key: WorkItemRemoved(work_item_id=WorkItemId(key)),
    # A tracker lists its open issues (GitHub's and GitLab's first listing after a start): a
    # done item it leaves out is closed, not removed, and stays known as done.
    kept=lambda item: item.status == "done",
)
REVISIONS: Watch[Revision] = Watch(
    name="revisions",
    known=lambda s: s.revisions,
    key=lambda revision: revision.id,
    merge=merge_observed_revision,
    changed=lambda revision: RevisionChanged(revision=revision),
    removed=lambda key: RevisionRemoved(revision_id=RevisionId(key)),
    # A merge the provider holds, or a queue step whose write failed: asked again each cycle.
    due=lambda state: state.merge_waits.keys() | state.landing_failures.keys(),
)
SPECS: Watch[Spec] = Watch(
    name="specs",
    known=lambda s: s.specs,
    key=lambda spec: spec.path,
    changed=lambda spec: SpecChanged(spec=spec),
    removed=lambda key: SpecRemoved(path=str(key)),
)
# The default branch's pipeline: one entity at most, reported when its head or state changes.
BASELINE: Watch[Baseline] = Watch(
    name="baseline",
    known=lambda s: {"baseline": s.baseline} if s.baseline is not None else {},
    key=lambda baseline: "baseline",
    changed=lambda baseline: BaselineChanged(baseline=baseline),
    removed=lambda key: BaselineRemoved(),
)


# Tracker items the work item reader left out (not trusted), from its last listing.
IGNORED: Watch[IgnoredWorkItem] = Watch(
    name="ignored_items",
    known=lambda s: s.ignored,
    key=lambda item: item.id,
    changed=lambda item: WorkItemIgnored(item=item),
    removed=lambda key: WorkItemIgnoredRemoved(work_item_id=WorkItemId(key)),
)


def make_poller(
    watch: Watch[T],
    reader: object,
    read: Callable[[], Sequence[T]],
    *,
    get_state: Callable[[], EngineState],
    enqueue: Enqueue,
    interval: float,
) -> Poller[T]:
    """A poller of ``watch`` that lists the entities with ``read`` (a method of ``reader``)."""
    return Poller(
        name=watch.name,
        reader=reader,
        read=read,
        known=watch.known,
        key=watch.key,
        merge=watch.merge,
        changed=watch.changed,
        removed=watch.removed,
        due=watch.due,
        kept=watch.kept,
        get_state=get_state,
        enqueue=enqueue,
        interval=interval,
    )


def read_baseline(reader: BaselineReader) -> Callable[[], list[Baseline]]:
    """The baseline as a list of at most one entity, as a poller reads."""

    def read() -> list[Baseline]:
        found = reader.baseline()
        return [found] if found is not None else []

    return read


@dataclass(frozen=True)
class Poll:
    """Poll now (``ask`` it to wait for the cycle: the first poll of ``start()``, refresh)."""

    full: bool = False  # report every entity observed (``Poller.poll``)


@dataclass(frozen=True)
class StartTicking:
    pass


class PollerActor(SupervisedActor):
    def __init__(self, poller: Poller[Any], **base: Any) -> None:
        super().__init__(**base)
        self.poller = poller
        self._stop_ticker = threading.Event()
        self._ticker: threading.Thread | None = None

    def on_start(self) -> None:
        self.poller.queued.clear()  # a Poll queued to a crashed actor is gone with it
        if self.poller.ticking.is_set():  # restarted after a crash: keep polling
            self._start_ticker()

    def on_receive(self, message: Any) -> Any:
        if isinstance(message, Poll):
            self.poller.queued.clear()
            return self.poller.poll(full=message.full)
        if isinstance(message, StartTicking):
            self.poller.ticking.set()
            self._start_ticker()
        return None

    def release(self) -> None:
        self._stop_ticker.set()

    def _start_ticker(self) -> None:
        if self._ticker is not None or self.poller.interval <= 0:
            return
        ref, stop, poller = self.actor_ref, self._stop_ticker, self.poller
        queued = self.poller.queued

        def tick() -> None:
            # The interval is read at each wait: a configuration reload may change it.
            while not stop.wait(poller.interval if poller.interval > 0 else 3600):
                if poller.interval <= 0 or queued.is_set():
                    continue  # off, or the last tick's poll has not run yet (a slow read)
                queued.set()
                if not tell(ref, Poll()):
                    return

        self._ticker = threading.Thread(target=tick, name=f"cpe-tick-{self.child_id}", daemon=True)
        self._ticker.start()

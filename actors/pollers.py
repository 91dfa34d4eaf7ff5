"""Pollers: one provider reader each, an interval timer, change detection.

A poll takes a state snapshot *before* it reads the provider, then queues a ``*Changed`` event
for every entity whose observation would change that snapshot (compared with the reducer's own
merge rule) and a ``*Removed`` event for every known entity the provider no longer lists. Taking
the snapshot first means an observation older than one of the engine's own writes can never
revert it. A provider error is logged and the cycle skipped; anything else is a crash, and the
supervisor restarts the poller.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
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
    WorkItemRemoved,
)
from domain.models import (
    Baseline,
    EngineState,
    Revision,
    RevisionId,
    Spec,
    WorkItem,
    WorkItemId,
)
from domain.ports import (
    BaselineReader,
    RevisionProviderReader,
    SpecProviderReader,
    WorkProviderReader,
)
from domain.state import merge_observed_revision, merge_observed_work_item

T = TypeVar("T", WorkItem, Revision, Spec, Baseline)
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
    cycles: int = 0
    ticking: threading.Event = field(default_factory=threading.Event)

    def poll(self, *, full: bool = False) -> int:
        """One cycle; the number of events queued. A ``full`` cycle (the first after a start)
        reports every entity it observes, changed or not, so every handler sees each of them
        once against the state the journal restored."""
        self.cycles += 1
        log.debug("poller cycle start", poller=self.name, cycle=self.cycles)
        snapshot = self.known(self.get_state())
        try:
            observed = list(self.read())
        except ProviderError as exc:
            log.error("provider API error", poller=self.name, method=exc.method, error=str(exc))
            return 0
        events: list[EngineEvent] = []
        seen = set()
        for entity in observed:
            key = self.key(entity)
            seen.add(key)
            before = snapshot.get(key)
            if full or self.merge(before, entity) != before:
                events.append(self.changed(entity))
                log.info("change detected", poller=self.name, change="changed", id=str(key))
        for key in snapshot:
            if key not in seen:
                events.append(self.removed(key))
                log.info("change detected", poller=self.name, change="removed", id=str(key))
        if not events:
            log.debug("no changes detected", poller=self.name, cycle=self.cycles)
        for event in events:
            self.enqueue(event)
        return len(events)


def _keep(known: T | None, observed: T) -> T:
    return observed


def work_item_poller(
    reader: WorkProviderReader,
    get_state: Callable[[], EngineState],
    enqueue: Enqueue,
    interval: float,
) -> Poller[WorkItem]:
    return Poller(
        name="work_items",
        reader=reader,
        read=reader.list_work_items,
        known=lambda s: s.work_items,
        key=lambda item: item.id,
        merge=merge_observed_work_item,
        changed=lambda item: WorkItemChanged(work_item=item),
        removed=lambda key: WorkItemRemoved(work_item_id=WorkItemId(key)),
        get_state=get_state,
        enqueue=enqueue,
        interval=interval,
    )


def revision_poller(
    reader: RevisionProviderReader,
    get_state: Callable[[], EngineState],
    enqueue: Enqueue,
    interval: float,
) -> Poller[Revision]:
    return Poller(
        name="revisions",
        reader=reader,
        read=reader.list_revisions,
        known=lambda s: s.revisions,
        key=lambda revision: revision.id,
        merge=merge_observed_revision,
        changed=lambda revision: RevisionChanged(revision=revision),
        removed=lambda key: RevisionRemoved(revision_id=RevisionId(key)),
        get_state=get_state,
        enqueue=enqueue,
        interval=interval,
    )


def spec_poller(
    reader: SpecProviderReader,
    get_state: Callable[[], EngineState],
    enqueue: Enqueue,
    interval: float,
) -> Poller[Spec]:
    return Poller(
        name="specs",
        reader=reader,
        read=reader.list_specs,
        known=lambda s: s.specs,
        key=lambda spec: spec.path,
        merge=_keep,
        changed=lambda spec: SpecChanged(spec=spec),
        removed=lambda key: SpecRemoved(path=str(key)),
        get_state=get_state,
        enqueue=enqueue,
        interval=interval,
    )


def baseline_poller(
    reader: BaselineReader,
    get_state: Callable[[], EngineState],
    enqueue: Enqueue,
    interval: float,
) -> Poller[Baseline]:
    """The default branch's pipeline: one entity at most, reported when its head or state
    changes."""

    def read() -> list[Baseline]:
        found = reader.baseline()
        return [found] if found is not None else []

    return Poller(
        name="baseline",
        reader=reader,
        read=read,
        known=lambda s: {"baseline": s.baseline} if s.baseline is not None else {},
        key=lambda baseline: "baseline",
        merge=_keep,
        changed=lambda baseline: BaselineChanged(baseline=baseline),
        removed=lambda key: BaselineRemoved(),
        get_state=get_state,
        enqueue=enqueue,
        interval=interval,
    )


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
        if self.poller.ticking.is_set():  # restarted after a crash: keep polling
            self._start_ticker()

    def on_receive(self, message: Any) -> Any:
        if isinstance(message, Poll):
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

        def tick() -> None:
            # The interval is read at each wait: a configuration reload may change it.
            while not stop.wait(poller.interval if poller.interval > 0 else 3600):
                if poller.interval > 0 and not tell(ref, Poll()):
                    return

        self._ticker = threading.Thread(target=tick, name=f"cpe-tick-{self.child_id}", daemon=True)
        self._ticker.start()

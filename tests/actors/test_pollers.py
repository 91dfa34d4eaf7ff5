"""The poller's logic, without its actor: a provider that asks for a wait is not asked again
until the wait is over, and an entity the state marks as due is reported every cycle."""

from __future__ import annotations

from collections.abc import Sequence

from actors.pollers import BASELINE, WORK_ITEMS, make_poller, read_baseline
from domain.errors import ProviderError
from domain.events import (
    BaselineChanged,
    EngineEvent,
    RevisionChanged,
    RevisionRemoved,
    WorkItemRemoved,
)
from domain.models import (
    Baseline,
    EngineState,
    LandingFailure,
    MergeWait,
    Pipeline,
    Revision,
    RevisionId,
    WorkItem,
    WorkItemId,
)
from domain.state import apply_event
from tests.support.pollers import revision_poller

REVISION = Revision(
    id=RevisionId("7"), title="t", work_item_id=WorkItemId("3"), branch="b", head_sha="a" * 40
)


class Reader:
    """A revision reader that fails as told, then lists ``REVISION``."""

    def __init__(self, *failures: ProviderError) -> None:
        self.failures = list(failures)
        self.calls = 0

    def list_revisions(self) -> Sequence[Revision]:
        self.calls += 1
        if self.failures:
            raise self.failures.pop(0)
        return [REVISION]


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_provider_asking_for_a_wait_is_not_asked_again_until_it_is_over() -> None:
    reader, clock, events = (
        Reader(ProviderError("limited", status=403, retry_after=90)),
        Clock(),
        [],
    )
    poller = revision_poller(reader, EngineState, events.append, interval=30)
    poller.clock = clock
    assert poller.poll() == 0
    for _ in range(3):
        clock.now += 29
        assert poller.poll() == 0
    assert reader.calls == 1
    clock.now += 4  # 91 s after the refusal
    assert poller.poll() == 1
    assert reader.calls == 2


def test_an_error_without_a_wait_skips_only_its_own_cycle() -> None:
    reader, events = Reader(ProviderError("bad gateway", status=502)), []
    poller = revision_poller(reader, EngineState, events.append, interval=30)
    assert poller.poll() == 0
    assert poller.poll() == 1
    assert reader.calls == 2


def test_a_revision_whose_merge_waits_is_reported_every_cycle_unchanged() -> None:
    wait = MergeWait(work_item_id=WorkItemId("3"), head_sha="a" * 40, reason="checks")
    state = EngineState(revisions={REVISION.id: REVISION}, merge_waits={REVISION.id: wait})
    events: list[EngineEvent] = []
    poller = revision_poller(Reader(), lambda: state, events.append, interval=30)
    assert poller.poll() == 1
    assert poller.poll() == 1
    assert events == [RevisionChanged(revision=REVISION)] * 2
    quiet = revision_poller(
        Reader(), lambda: state.model_copy(update={"merge_waits": {}}), events.append, 30
    )
    assert quiet.poll() == 0


def test_a_revision_whose_queue_step_failed_is_reported_every_cycle_unchanged() -> None:
    failure = LandingFailure(
        work_item_id=WorkItemId("3"), head_sha="a" * 40, step="update", reason="502"
    )
    state = EngineState(revisions={REVISION.id: REVISION}, landing_failures={REVISION.id: failure})
    events: list[EngineEvent] = []
    poller = revision_poller(Reader(), lambda: state, events.append, interval=30)
    assert poller.poll() == 1
    assert poller.poll() == 1
    assert events == [RevisionChanged(revision=REVISION)] * 2


def test_the_baseline_is_polled_as_one_entity_and_reported_when_it_changes() -> None:
    """The default branch's pipeline, read through ``read_baseline``: reported once when seen,
    again when it changes, and not at all while the provider has none."""
    green = Baseline(sha="b" * 40, pipeline=Pipeline(status="success"))
    red = Baseline(sha="b" * 40, pipeline=Pipeline(status="failure", failed_checks=("tests",)))

    class BaselineReader:
        def __init__(self) -> None:
            self.found: Baseline | None = None

        def baseline(self) -> Baseline | None:
            return self.found

    reader, state, events = BaselineReader(), [EngineState()], []

    def enqueue(event: EngineEvent) -> None:
        events.append(event)
        state[0] = apply_event(state[0], event)

    poller = make_poller(
        BASELINE,
        reader,
        read_baseline(reader),
        get_state=lambda: state[0],
        enqueue=enqueue,
        interval=30,
    )
    assert poller.poll() == 0  # none yet
    reader.found = green
    assert poller.poll() == 1
    assert poller.poll() == 0  # unchanged
    reader.found = red
    assert poller.poll() == 1
    assert events == [BaselineChanged(baseline=green), BaselineChanged(baseline=red)]


def test_a_revision_gone_from_the_provider_is_reported_removed_once() -> None:
    class Listing:
        def __init__(self) -> None:
            self.listed = [REVISION]

        def list_revisions(self) -> Sequence[Revision]:
            return self.listed

    reader, state, events = Listing(), [EngineState()], []

    def enqueue(event: EngineEvent) -> None:
        events.append(event)
        state[0] = apply_event(state[0], event)

    poller = revision_poller(reader, lambda: state[0], enqueue, interval=30)
    assert poller.poll() == 1
    reader.listed = []
    assert poller.poll() == 1
    assert poller.poll() == 0
    assert events == [RevisionChanged(revision=REVISION), RevisionRemoved(revision_id=REVISION.id)]


def test_a_done_item_a_tracker_no_longer_lists_stays_known_and_an_open_one_is_removed() -> None:
    """GitHub's and GitLab's trackers list their open issues after a start: the done items the
    journal restored are closed there, not removed (no '#1 removed from the tracker' for each
    at every start); an open item that is gone is removed."""
    done = WorkItem(id=WorkItemId("1"), title="Done", status="done")
    pending = WorkItem(id=WorkItemId("2"), title="Pending", status="pending")
    listed: list[WorkItem] = []

    class Tracker:
        def list_work_items(self) -> Sequence[WorkItem]:
            return listed

    state, events = [EngineState(work_items={done.id: done, pending.id: pending})], []

    def enqueue(event: EngineEvent) -> None:
        events.append(event)
        state[0] = apply_event(state[0], event)

    tracker = Tracker()
    poller = make_poller(
        WORK_ITEMS,
        tracker,
        tracker.list_work_items,
        get_state=lambda: state[0],
        enqueue=enqueue,
        interval=30,
    )
    assert poller.poll() == 1
    assert events == [WorkItemRemoved(work_item_id=pending.id)]
    assert list(state[0].work_items) == [done.id]
    assert poller.poll() == 0

"""The poller's logic, without its actor: a provider that asks for a wait is not asked again
until the wait is over, and an entity the state marks as due is reported every cycle."""

from __future__ import annotations

from collections.abc import Sequence

from actors.pollers import revision_poller
from domain.errors import ProviderError
from domain.events import EngineEvent, RevisionChanged
from domain.models import EngineState, MergeWait, Revision, RevisionId, WorkItemId

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

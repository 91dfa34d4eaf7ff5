"""The dispatch delay: from the earliest delivery a poll was asked for to the engine's first
event of that poller; a poll that found nothing observes nothing, and a later poll's event is
not taken for the delivery's; another poller's event is not either."""

from __future__ import annotations

from adapters.host.webhooks.stats import WebhookStats
from domain.events import RevisionRemoved, UserPausedDispatch, WorkItemChanged
from domain.models import RevisionId, WorkItem


class Engine:
    """What the stats read of the engine: a clock and each poller's cycles so far."""

    def __init__(self) -> None:
        self.now = 100.0
        self.cycles = {"work_items": 5, "revisions": 2}

    def clock(self) -> float:
        return self.now


def changed() -> WorkItemChanged:
    return WorkItemChanged(work_item=WorkItem(id="1", title="t", status="pending"))


def made() -> tuple[WebhookStats, Engine]:
    engine = Engine()
    return WebhookStats(clock=engine.clock, cycles=engine.cycles.get), engine


def test_the_delay_runs_from_the_earliest_delivery_to_the_pollers_first_event() -> None:
    stats, engine = made()
    stats.polled("work_items", 99.0)
    stats.polled("work_items", 99.5)  # a trailing poll: the earliest delivery is kept
    engine.now, engine.cycles["work_items"] = 101.25, 6
    stats.processed(changed())
    stats.processed(changed())  # the same poll's second event: observed once
    snapshot = stats.snapshot()
    assert snapshot.delays == [2.25]
    assert (snapshot.delay_sum, snapshot.delay_count) == (2.25, 1)
    assert snapshot.polls["work_items"] == 2


def test_another_pollers_event_or_another_event_is_not_the_deliverys() -> None:
    stats, engine = made()
    stats.polled("work_items", 99.0)
    stats.processed(RevisionRemoved(revision_id=RevisionId("r")))
    stats.processed(UserPausedDispatch(reason="x"))
    assert stats.snapshot().delay_count == 0
    engine.now = 100.5
    stats.processed(changed())
    assert stats.snapshot().delays == [1.5]


def test_a_poll_that_found_nothing_observes_nothing_later() -> None:
    stats, engine = made()
    stats.polled("work_items", 99.0)  # at cycle 5: the poll asked for is cycle 6 (or 7)
    engine.now, engine.cycles["work_items"] = 160.0, 8  # two interval polls later
    stats.processed(changed())
    assert stats.snapshot().delay_count == 0
    stats.processed(changed())  # the note is gone: nothing either
    assert stats.snapshot().delay_count == 0


def test_deliveries_and_refusals_are_counted_by_vendor() -> None:
    stats, _ = made()
    stats.delivered("github", "accepted")
    stats.delivered("github", "refused", "signature")
    stats.delivered("linear", "refused", "stale")
    snapshot = stats.snapshot()
    assert snapshot.deliveries == {
        ("github", "accepted"): 1,
        ("github", "refused"): 1,
        ("linear", "refused"): 1,
    }
    assert snapshot.refusals == {("github", "signature"): 1, ("linear", "stale"): 1}

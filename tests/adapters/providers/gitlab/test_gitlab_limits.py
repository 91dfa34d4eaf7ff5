"""GitLab's rate limit as it states it (a 429 with Retry-After, RateLimit-* on every answer),
and writes paced under GitLab.com's limits on creating issues and notes.

A 429 holds every request until its wait is over: a read that may wait that long waits, a write
is refused at once without being sent (``retry_after`` says how long is left). Time is a clock
the provider's waits advance and the fake judges its window by, so nothing here sleeps.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from adapters.providers import ProviderRoles
from adapters.providers.gitlab import GitLabProvider
from domain.errors import ProviderError
from tests.fakes.gitlab import FakeGitLab
from tests.support.gitlab import TOKEN_ENV, running_gitlab
from tests.support.gitlab_provider import settings_for

TRACKER = ProviderRoles(revisions=False)


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


class Waits:
    """The provider's ``sleep``: records each wait and moves the clock on by it."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.waits: list[float] = []

    def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)
        self.clock.now += seconds


@pytest.fixture
def clock() -> Clock:
    return Clock(2_000_000_000.0)


@pytest.fixture
def waits(clock: Clock) -> Waits:
    return Waits(clock)


@pytest.fixture
def fake_gitlab(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, clock: Clock
) -> Iterator[FakeGitLab]:
    with running_gitlab(tmp_path, monkeypatch, now=clock) as gl:
        yield gl


def provider_on(
    fake_gitlab: FakeGitLab, clock: Clock, waits: Waits, **settings: object
) -> GitLabProvider:
    return GitLabProvider(
        settings_for(fake_gitlab, **settings),
        environ={TOKEN_ENV: "test-token"},
        sleep=waits,
        clock=clock,
        roles=TRACKER,
    )


def sent_writes(fake_gitlab: FakeGitLab) -> int:
    return sum(1 for r in fake_gitlab.requests if r.method != "GET")


def test_a_burst_of_writes_is_paced_under_the_limits(
    fake_gitlab: FakeGitLab, clock: Clock, waits: Waits
) -> None:
    start = clock.now
    with provider_on(
        fake_gitlab, clock, waits, write_burst=2, writes_per_minute=30, writes_per_hour=3600
    ) as provider:
        assert provider.work_item_writer is not None
        for n in range(6):
            provider.work_item_writer.create_work_item(f"Item {n}", "b")
    writes = sent_writes(fake_gitlab)
    assert writes >= 6 + 7  # the issues and, at start, the six status labels and cpe:admit
    # At most ``burst`` go at once; every other one waited for a token (2 s apart at 30/min).
    assert clock.now - start >= (writes - 2) * 2.0 - 1e-6
    assert all(w <= 2.0 + 1e-6 for w in waits.waits)


def test_reads_are_never_paced(fake_gitlab: FakeGitLab, clock: Clock, waits: Waits) -> None:
    for n in range(5):
        fake_gitlab.open_issue(f"Issue {n}", "b")
    with provider_on(fake_gitlab, clock, waits, write_burst=1, writes_per_minute=1) as provider:
        waits.waits.clear()
        assert provider.work_item_reader is not None
        for _ in range(5):
            assert len(provider.work_item_reader.list_work_items()) == 5
    assert waits.waits == []


def test_a_spent_rate_limit_is_waited_out_by_a_read_and_the_read_answered(
    fake_gitlab: FakeGitLab, clock: Clock, waits: Waits
) -> None:
    fake_gitlab.open_issue("Wanted", "b")
    with provider_on(fake_gitlab, clock, waits) as provider:
        used = provider.stats.requests
        fake_gitlab.rate_limit(used)  # the window's budget is spent already
        assert provider.work_item_reader is not None
        assert [i.title for i in provider.work_item_reader.list_work_items()] == ["Wanted"]
        assert provider.stats.rate_limited == 1
        assert len(waits.waits) == 1
        assert 0 < waits.waits[0] <= 61


def test_while_a_limit_holds_a_write_is_refused_without_being_sent(
    fake_gitlab: FakeGitLab, clock: Clock, waits: Waits
) -> None:
    with provider_on(fake_gitlab, clock, waits, max_retry_wait=5) as provider:
        fake_gitlab.rate_limit(provider.stats.requests)
        assert provider.work_item_reader is not None
        with pytest.raises(ProviderError) as read:
            provider.work_item_reader.list_work_items()
        assert read.value.status == 429
        assert read.value.retry_after is not None
        assert read.value.retry_after > 5
        fake_gitlab.clear_requests()
        assert provider.work_item_writer is not None
        with pytest.raises(ProviderError) as write:
            provider.work_item_writer.transition_status("1", "in-progress")  # type: ignore[arg-type]
        assert write.value.transient
        assert write.value.retry_after is not None
        assert fake_gitlab.requests == []  # nothing went out while GitLab asked to wait
        clock.now += 61
        made = provider.work_item_writer.create_work_item("After the wait", "b")
        assert fake_gitlab.issues[int(made)].title == "After the wait"


def test_the_rate_limit_figures_gitlab_sends_are_kept(
    fake_gitlab: FakeGitLab, clock: Clock, waits: Waits
) -> None:
    fake_gitlab.rate_limit(500)
    with provider_on(fake_gitlab, clock, waits) as provider:
        assert provider.work_item_reader is not None
        provider.work_item_reader.list_work_items()
        stats = provider.stats
        assert stats.rate_limit == 500
        assert stats.rate_remaining == 500 - stats.requests
        assert stats.rate_reset is not None

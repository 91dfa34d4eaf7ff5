"""Linear's refusals as the provider lives with them: RATELIMITED waited out as its headers say
(reads) or handed back with the wait (writes, and waits too long to sleep), 5xx and dropped
connections retried for reads only, a write's lost answer resolved by looking for what it
made, and the figures ``cpe status`` shows."""

from __future__ import annotations

import pytest

from domain.errors import ProviderError
from tests.fakes.linear.fake import FakeLinear
from tests.support.linear import ManualClock
from tests.support.linear_provider import Sleeps, linear_provider, with_cpe_states


@pytest.fixture
def linear(fake_linear: FakeLinear) -> FakeLinear:
    return with_cpe_states(fake_linear)


def test_a_rate_limited_read_waits_as_the_headers_say_then_succeeds(linear: FakeLinear) -> None:
    sleeps = Sleeps()
    linear.open_issue("One")
    with linear_provider(linear, sleeps) as provider:
        linear.ratelimit_next()
        assert provider.work_item_reader is not None
        assert [i.id for i in provider.work_item_reader.list_work_items()] == ["ENG-1"]
        assert len(sleeps.waits) == 1
        # The few requests made so far come back in a few seconds (5,000 an hour), plus 1 s.
        assert 1 < sleeps.waits[0] <= 5
        assert provider.stats.rate_limited == 1
        assert provider.stats.retries == 1
        assert provider.stats.rate_remaining is not None


def test_a_rate_limited_write_is_not_resent_and_says_how_long_to_wait(
    linear: FakeLinear,
) -> None:
    with linear_provider(linear) as provider:
        writer = provider.work_item_writer
        assert writer is not None
        linear.ratelimit_next()
        linear.clear_requests()
        with pytest.raises(ProviderError) as caught:
            writer.create_work_item("Once", "b")
        assert caught.value.status == 429
        assert caught.value.transient
        assert caught.value.retry_after is not None
        assert len(linear.requests) == 1
        assert linear.identifiers() == []


def test_a_spent_budget_holds_every_request_until_its_reset(linear: FakeLinear) -> None:
    clock = ManualClock()
    with FakeLinear(now=clock) as fresh:
        with_cpe_states(fresh)
        with linear_provider(fresh, clock=clock, max_retry_wait=60) as provider:
            reader = provider.work_item_reader
            assert reader is not None
            fresh.rate_limit(requests=1)  # one an hour, from now
            reader.list_work_items()  # the open issues (none): spent
            with pytest.raises(ProviderError, match="RATELIMITED") as caught:
                reader.list_work_items()
            # One request back takes an hour: too long to sleep, said instead.
            assert caught.value.retry_after is not None
            assert caught.value.retry_after > 60
            sent = len(fresh.requests)
            with pytest.raises(ProviderError, match="holds its requests"):
                reader.list_work_items()
            assert len(fresh.requests) == sent  # nothing sent meanwhile
            clock.now += caught.value.retry_after
            reader.list_work_items()


def test_a_failing_or_dropped_read_is_retried_with_backoff(linear: FakeLinear) -> None:
    sleeps = Sleeps()
    with linear_provider(linear, sleeps, backoff_initial=1.0) as provider:
        linear.fail_operation("CpeIssues", 502)
        linear.fail_operation("CpeIssues", drop=True)
        assert provider.work_item_reader is not None
        provider.work_item_reader.list_work_items()
        assert len(sleeps.waits) == 2
        assert 1.0 <= sleeps.waits[0] < 1.3
        assert 2.0 <= sleeps.waits[1] < 2.6
        linear.fail_operation("CpeChanged", 503, times=4)
        with pytest.raises(ProviderError) as caught:
            provider.work_item_reader.list_work_items()
        assert caught.value.transient


def test_a_write_whose_answer_is_lost_is_found_by_its_key_not_made_twice(
    linear: FakeLinear,
) -> None:
    with linear_provider(linear) as provider:
        writer = provider.work_item_writer
        assert writer is not None
        linear.fail_operation("CpeIssueCreate", 502, apply_first=True)
        made = writer.create_work_item("Once", "b", idempotency_key="plan:1:a")
        assert linear.identifiers() == [made]
        assert writer.create_work_item("Once", "b", idempotency_key="plan:1:a") == made
        assert linear.operations().count("CpeIssueCreate") == 1
        linear.fail_operation("CpeIssueCreate", 502, apply_first=True)
        with pytest.raises(ProviderError, match="502"):
            writer.create_work_item("Keyless", "b")  # no key: cannot tell, says so


def test_writes_are_paced(linear: FakeLinear) -> None:
    sleeps = Sleeps()
    with linear_provider(linear, sleeps, write_burst=2, writes_per_minute=6) as provider:
        writer = provider.work_item_writer
        assert writer is not None
        for n in range(3):
            writer.create_work_item(f"Item {n}", "b")
        assert len([w for w in sleeps.waits if w > 0]) >= 1

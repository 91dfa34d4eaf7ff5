"""The price table: codex's tokens and a stopped Claude run's streamed tokens turned into a cost;
an unknown model's cost is unknown, never $0."""

from __future__ import annotations

import pytest

from adapters.runtime.pricing import (
    DEFAULT_PRICES,
    LiveUsage,
    ModelPrice,
    claude_token_cost,
    price_of,
    token_cost,
)
from domain.models import RunUsage


def test_a_model_is_priced_by_its_own_entry_else_by_its_family() -> None:
    prices = {
        **DEFAULT_PRICES,
        "claude-opus-4-1": ModelPrice(input=15, cached_input=1.5, output=75),
    }
    assert price_of("claude-sonnet-5-5", prices) == DEFAULT_PRICES["claude-sonnet-"]
    assert price_of("claude-opus-4-1", prices) == prices["claude-opus-4-1"]
    assert price_of("claude-opus-5", prices) == DEFAULT_PRICES["claude-opus-"]
    # only keys ending in "-" are families: an unknown codex model is not priced as gpt-5
    assert price_of("gpt-5.1-codex", prices) is None
    assert price_of(None, prices) is None


def test_codex_usage_counts_cached_input_inside_input() -> None:
    usage = {"input_tokens": 1_000_000, "cached_input_tokens": 400_000, "output_tokens": 100_000}
    # 600k fresh at 1.25, 400k cached at 0.125, 100k out at 10
    assert token_cost("gpt-5-codex", usage, DEFAULT_PRICES) == pytest.approx(0.75 + 0.05 + 1.0)
    assert token_cost("no-such-model", usage, DEFAULT_PRICES) is None


def test_claude_usage_counts_the_cache_apart_from_input() -> None:
    usage = {
        "input_tokens": 100_000,
        "cache_read_input_tokens": 1_000_000,
        "cache_creation_input_tokens": 200_000,
        "output_tokens": 10_000,
    }
    expected = 0.1 * 3 + 1.0 * 0.3 + 0.2 * 3.75 + 0.01 * 15
    assert claude_token_cost("claude-sonnet-5", usage, DEFAULT_PRICES) == pytest.approx(expected)
    plain = {"x-": ModelPrice(input=2, cached_input=0.2, output=8)}  # cache writes: 1.25 x input
    assert claude_token_cost("x-1", {"cache_creation_input_tokens": 10**6}, plain) == 2.5
    assert claude_token_cost("gpt-9", usage, DEFAULT_PRICES) is None


def test_live_usage_counts_each_message_once_at_its_largest() -> None:
    """The CLI repeats a message once per content block (the same id), its output growing."""
    live = LiveUsage()
    live.add("m1", "claude-sonnet-5", {"input_tokens": 1000, "output_tokens": 1})
    live.add("m1", "claude-sonnet-5", {"input_tokens": 1000, "output_tokens": 40})
    live.add("m2", "claude-sonnet-5", {"input_tokens": 1200, "output_tokens": 10})
    live.add(None, "claude-sonnet-5", {"input_tokens": 10**9})  # no id: not counted
    assert live.totals() == {"input_tokens": 2200, "output_tokens": 50}
    cost = live.cost(DEFAULT_PRICES)
    assert cost == pytest.approx((2200 * 3 + 50 * 15) / 1e6)
    priced = live.priced(DEFAULT_PRICES, RunUsage(turns=2))
    assert priced == RunUsage(
        cost_usd=cost, turns=2, input_tokens=2200, output_tokens=50, model="claude-sonnet-5"
    )
    assert LiveUsage().cost(DEFAULT_PRICES) is None
    assert LiveUsage().priced(DEFAULT_PRICES, RunUsage()) == RunUsage()


def test_an_overrun_is_a_message_started_after_the_earlier_ones_reached_the_budget() -> None:
    """The CLI checks its budget after each message: within a message it is not late yet."""
    live = LiveUsage()
    live.add("m1", "claude-sonnet-5", {"input_tokens": 1_000_000})  # $3
    assert live.overrun(DEFAULT_PRICES, 2.0) is None  # over, but the first message only
    live.add("m1", "claude-sonnet-5", {"input_tokens": 1_000_000, "output_tokens": 5})
    assert live.overrun(DEFAULT_PRICES, 2.0) is None  # the same message, repeated
    live.add("m2", "claude-sonnet-5", {"input_tokens": 10})
    assert live.overrun(DEFAULT_PRICES, 2.0) == pytest.approx(3.0 + 5 * 15 / 1e6)
    assert live.overrun(DEFAULT_PRICES, 4.0) is None

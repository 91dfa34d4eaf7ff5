"""What a run cost when its runtime reports only tokens (``codex exec``): a price table per
model, in USD per million tokens.

The shipped prices are the vendor's published list prices as of ``PRICES_AS_OF``; a
``[pricing.models.NAME]`` table in ``supervisor.toml`` overrides or adds one. A model missing
from the table gives no cost (``None``, shown as unknown, never 0), with one warning per model.
The Claude CLIs report their own cost, which is taken as it is.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping

import structlog
from pydantic import BaseModel, ConfigDict, Field

log = structlog.get_logger("cpe.runtime.pricing")

PRICES_AS_OF = "2026-11-01"


class ModelPrice(BaseModel):
    """USD per million tokens: fresh input, input read from the provider's cache, output."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    input: float = Field(ge=0, le=10_000)
    cached_input: float = Field(ge=0, le=10_000)
    output: float = Field(ge=0, le=10_000)


DEFAULT_PRICES: Mapping[str, ModelPrice] = {
    "gpt-5-codex": ModelPrice(input=1.25, cached_input=0.125, output=10.0),
    "gpt-5": ModelPrice(input=1.25, cached_input=0.125, output=10.0),
    "gpt-5-mini": ModelPrice(input=0.25, cached_input=0.025, output=2.0),
}

_warned: set[str] = set()
_warned_lock = threading.Lock()


def token_cost(
    model: str | None, usage: Mapping[str, int], prices: Mapping[str, ModelPrice]
) -> float | None:
    """The cost of ``usage`` (codex's ``input_tokens``, ``cached_input_tokens``,
    ``output_tokens``) on ``model``; None when the model or its price is unknown."""
    price = prices.get(model) if model else None
    if price is None:
        key = model or "(codex's default)"
        with _warned_lock:
            first = key not in _warned
            _warned.add(key)
        if first:
            log.warning(
                "no price for this model: its runs' cost is unknown",
                model=key,
                fix="set [runtime.codex_cli] model, or add [pricing.models.NAME]",
            )
        return None
    cached = usage.get("cached_input_tokens", 0)
    fresh = max(0, usage.get("input_tokens", 0) - cached)
    output = usage.get("output_tokens", 0)
    return (fresh * price.input + cached * price.cached_input + output * price.output) / 1e6

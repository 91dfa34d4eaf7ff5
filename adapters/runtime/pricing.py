"""What a run cost when its runtime reports only tokens: a price table per model, in USD per
million tokens.

Two kinds of run need it: every ``codex exec`` run (codex reports tokens, never a cost), and a
Claude run stopped before the CLI reported its cost (a timeout, a breaker, a cancel): its
tokens are summed from the assistant messages it streamed (``LiveUsage``). A Claude run that
ended with its result keeps the cost the CLI reported.

The shipped prices are the vendors' published list prices as of ``PRICES_AS_OF``; a key is a
model name or a family (a key ending in ``-``: ``claude-sonnet-`` prices every Sonnet the CLI
may name). A
``[pricing.models.NAME]`` table in ``supervisor.toml`` overrides or adds one. A model missing
from the table gives no cost (``None``, shown as unknown, never 0), with one warning per model.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping

import structlog
from pydantic import BaseModel, ConfigDict, Field

from domain.models import RunUsage

log = structlog.get_logger("cpe.runtime.pricing")

PRICES_AS_OF = "2026-11-01"


class ModelPrice(BaseModel):
    """USD per million tokens: fresh input, input read from the provider's cache, output."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    input: float = Field(ge=0, le=10_000)
    cached_input: float = Field(ge=0, le=10_000)
    output: float = Field(ge=0, le=10_000)
    cache_write: float | None = Field(default=None, ge=0, le=10_000)  # None: 1.25 times input


DEFAULT_PRICES: Mapping[str, ModelPrice] = {
    "gpt-5-codex": ModelPrice(input=1.25, cached_input=0.125, output=10.0),
    "gpt-5": ModelPrice(input=1.25, cached_input=0.125, output=10.0),
    "gpt-5-mini": ModelPrice(input=0.25, cached_input=0.025, output=2.0),
    "claude-opus-": ModelPrice(input=5.0, cached_input=0.5, output=25.0, cache_write=6.25),
    "claude-sonnet-": ModelPrice(input=3.0, cached_input=0.3, output=15.0, cache_write=3.75),
    "claude-haiku-": ModelPrice(input=1.0, cached_input=0.1, output=5.0, cache_write=1.25),
}

_warned: set[str] = set()
_warned_lock = threading.Lock()


def token_cost(
    model: str | None, usage: Mapping[str, int], prices: Mapping[str, ModelPrice]
) -> float | None:
    """The cost of ``usage`` (codex's ``input_tokens``, ``cached_input_tokens``,
    ``output_tokens``) on ``model``; None when the model or its price is unknown."""
    price = price_of(model, prices)
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


def main_model(model_usage: object) -> str | None:
    """The model that cost most in a Claude result's ``modelUsage`` (model name to usage)."""
    if not isinstance(model_usage, Mapping) or not model_usage:
        return None

    def cost(name: str) -> float:
        entry = model_usage.get(name)
        value = entry.get("costUSD") if isinstance(entry, Mapping) else None
        return float(value) if isinstance(value, (int, float)) else 0.0

    names = [name for name in model_usage if isinstance(name, str)]
    return max(names, key=cost, default=None)


def price_of(model: str | None, prices: Mapping[str, ModelPrice]) -> ModelPrice | None:
    """The price of ``model``: its own entry, else the longest family key (one that ends in
    ``-``, such as ``claude-sonnet-``) it starts with."""
    if not model:
        return None
    if model in prices:
        return prices[model]
    families = (key for key in prices if key.endswith("-") and model.startswith(key))
    family = max(families, key=len, default=None)
    return prices[family] if family is not None else None


def claude_token_cost(
    model: str | None, usage: Mapping[str, int], prices: Mapping[str, ModelPrice]
) -> float | None:
    """The cost of a Claude ``usage`` (``input_tokens`` not counting the cache, which
    ``cache_read_input_tokens`` and ``cache_creation_input_tokens`` count) on ``model``."""
    price = price_of(model, prices)
    if price is None:
        return token_cost(model, {}, {})  # the warning, once; None
    write = price.cache_write if price.cache_write is not None else price.input * 1.25
    return (
        usage.get("input_tokens", 0) * price.input
        + usage.get("cache_read_input_tokens", 0) * price.cached_input
        + usage.get("cache_creation_input_tokens", 0) * write
        + usage.get("output_tokens", 0) * price.output
    ) / 1e6


class LiveUsage:
    """The tokens of a Claude run so far, from the assistant messages it streamed: the CLI
    repeats a message once per content block, so each message counts once, at its largest."""

    _KEYS = (
        "input_tokens",
        "output_tokens",
        "cache_read_input_tokens",
        "cache_creation_input_tokens",
    )

    def __init__(self) -> None:
        self.messages: dict[str, dict[str, int]] = {}
        self.model: str | None = None

    def add(self, message_id: object, model: object, usage: object) -> None:
        if not isinstance(message_id, str) or not isinstance(usage, Mapping):
            return
        if isinstance(model, str) and model:
            self.model = model
        seen = self.messages.setdefault(message_id, {})
        for key in self._KEYS:
            value = usage.get(key)
            if isinstance(value, int) and not isinstance(value, bool):
                seen[key] = max(seen.get(key, 0), value)

    def overrun(self, prices: Mapping[str, ModelPrice], budget: float) -> float | None:
        """What the messages before the newest cost, when that reaches ``budget``: the CLI
        started another message although the run had spent its budget (it checks after each
        message, so within one message it is not late yet). None otherwise."""
        if len(self.messages) < 2:
            return None
        *before, _newest = self.messages
        spent = claude_token_cost(self.model, self.totals(before), prices)
        return spent if spent is not None and spent >= budget else None

    def totals(self, ids: list[str] | None = None) -> dict[str, int]:
        total: dict[str, int] = {}
        chosen = self.messages.values() if ids is None else [self.messages[i] for i in ids]
        for usage in chosen:
            for key, value in usage.items():
                total[key] = total.get(key, 0) + value
        return total

    def priced(self, prices: Mapping[str, ModelPrice], usage: RunUsage) -> RunUsage:
        """``usage`` of a run whose CLI reported no cost: what its messages show it spent."""
        if not self.messages:
            return usage
        totals = self.totals()
        return usage.model_copy(
            update={
                "cost_usd": self.cost(prices),
                "input_tokens": totals.get("input_tokens"),
                "output_tokens": totals.get("output_tokens"),
                "model": usage.model or self.model,
            }
        )

    def cost(self, prices: Mapping[str, ModelPrice]) -> float | None:
        """None when nothing was streamed or the model has no price."""
        if not self.messages:
            return None
        return claude_token_cost(self.model, self.totals(), prices)

"""The engine's settings models that ``supervisor.toml``'s schema embeds: the supervisor's
restart intensity, the provider writes' retries, the breaker, the daily budget and the quota.

They live apart from the actors that use them (``actors/supervisor.py``,
``actors/executor.py``) so that reading the configuration, which every ``cpe`` command does,
imports pydantic and nothing of the engine (pykka, the executor, its sessions).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, ConfigDict, Field

if TYPE_CHECKING:
    from domain.admission import BreakerRule
    from domain.decisions import DispatchPause
    from domain.models import EngineState

Strategy = Literal["one_for_one", "one_for_all", "rest_for_one"]


class SupervisorSettings(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    strategy: Strategy = "one_for_one"
    max_restarts: int = Field(default=5, ge=0)
    within_seconds: float = Field(default=60, gt=0)
    backoff_initial: float = Field(default=0.5, ge=0)
    backoff_max: float = Field(default=30, ge=0)
    jitter: float = Field(default=0.2, ge=0, le=1)
    child_shutdown_timeout: float = Field(default=10, gt=0)


class RetrySettings(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    attempts: int = Field(default=4, ge=1, description="tries per write, the first included")
    initial_delay: float = Field(default=1.0, ge=0)
    max_delay: float = Field(default=60.0, ge=0)


class BreakerSettings(BaseModel):
    """``[breaker]``: when runs keep failing under the agent (no credential, the model API
    down), dispatch pauses instead of spending the items' attempts (``dispatch_pause``)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    failures: int = Field(
        default=3, ge=1, le=100, description="infrastructure failures in a row that pause"
    )
    pause_initial: float = Field(default=30, gt=0, le=86_400, allow_inf_nan=False)
    pause_max: float = Field(default=900, gt=0, le=86_400, allow_inf_nan=False)
    outage_after: float = Field(
        default=15,
        gt=0,
        le=3600,
        allow_inf_nan=False,
        description="seconds live runs retry the model API (unreachable, overloaded, server "
        "errors, a refused credential) with no answer before dispatch pauses",
    )
    cancel_retrying: bool = Field(
        default=True,
        description="then cancel the runs retrying it (no attempt spent), freeing their slots",
    )

    def rule(self) -> BreakerRule:
        """These settings as the admission rule takes them (``domain.admission``)."""
        # Imported here: the decisions (and the commands they read) are the engine's and the
        # status views', not the configuration's.
        from domain.admission import BreakerRule  # noqa: PLC0415

        return BreakerRule(
            failures=self.failures,
            initial=self.pause_initial,
            maximum=self.pause_max,
            outage_after=self.outage_after,
        )

    def pause(self, state: EngineState) -> DispatchPause | None:
        """The breaker's pause for ``state`` (``domain.decisions.breaker_pause``)."""
        return self.rule().pause(state)


class QuotaSettings(BaseModel):
    """``[runtime.quota]``: a model account whose usage window is spent waits for its reset
    (plus ``margin`` seconds); with ``pause_at``, no run starts on an account one of whose
    windows is used that much (0..1), until it resets."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    pause_at: float | None = Field(default=None, gt=0, le=1, allow_inf_nan=False)
    margin: float = Field(default=60, ge=0, le=3600, allow_inf_nan=False)


class DailyBudget(BaseModel):
    """``[budget] per_day_usd`` and the day it counts (a time zone's day): once the runs that
    ended today cost that much, dispatch pauses until the next day."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    per_day_usd: float = Field(default=0, ge=0, description="0: no limit")
    timezone: str = "UTC"

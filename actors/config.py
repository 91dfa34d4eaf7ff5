"""The engine's own settings: ``EngineConfig``, what ``create_engine`` is built from.

It holds the injected provider interfaces and runtime adapter factory, plus the settings the
actors use. ``supervisor.toml`` and its schema belong to the composition root
(adapters/cli/settings.py), which maps the file onto this (``CpeConfig.engine_config``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SkipValidation

from actors.settings import (
    BreakerSettings,
    DailyBudget,
    QuotaSettings,
    RetrySettings,
    SupervisorSettings,
)
from domain.handlers.options import HandlerOptions
from domain.models import AgentRole
from domain.policy import Policy
from domain.ports import ProviderInterfaces, RuntimeAdapterFactory

LogLevel = Literal["debug", "info", "error"]


class PollerSettings(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    poll_interval: float = Field(default=30, ge=0, description="seconds; 0 disables the timer")


class EngineConfig(BaseModel):
    """What ``create_engine`` takes: injected components plus engine-owned settings."""

    model_config = ConfigDict(frozen=True, extra="forbid", arbitrary_types_allowed=True)

    # Injected components. Typed loosely here because create_engine checks them itself and
    # names what is missing or wrong (a ConfigError), which pydantic's messages would not.
    provider: SkipValidation[ProviderInterfaces | Mapping[str, Any] | None] = None
    create_runtime_adapters: SkipValidation[RuntimeAdapterFactory | None] = None
    policy: SkipValidation[Policy | None] = None

    log_level: LogLevel = "info"
    shutdown_timeout: float = Field(default=300, gt=0)
    work_item_poller: PollerSettings = PollerSettings(poll_interval=30)
    revision_poller: PollerSettings = PollerSettings(poll_interval=30)
    spec_poller: PollerSettings = PollerSettings(poll_interval=60)

    handlers: HandlerOptions = HandlerOptions()
    journal_path: str = ":memory:"
    max_agent_duration: float = Field(default=1800, gt=0)
    cancel_grace: float = Field(default=30, gt=0)
    supervisor: SupervisorSettings = SupervisorSettings()
    write_retry: RetrySettings = RetrySettings()
    breaker: BreakerSettings = BreakerSettings()
    daily_budget: DailyBudget = DailyBudget()
    quota: QuotaSettings = QuotaSettings()
    # The model account of each role's runtime (quota is per account); none named: "model".
    accounts: dict[AgentRole, str] = Field(default_factory=dict)

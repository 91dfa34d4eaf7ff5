"""The handlers' options: ``[workflow]`` in ``supervisor.toml``."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from pydantic import Field

from domain.models import AgentRole, Frozen
from domain.revisions import Required

_DEFAULT_CONCURRENCY: Mapping[AgentRole, int] = MappingProxyType(
    {"planner": 1, "implementor": 2, "reviewer": 2}
)


class HandlerOptions(Frozen):
    """Workflow options from ``supervisor.toml`` (``[workflow]``)."""

    max_attempts: int = Field(
        default=3, ge=1, description="implementor runs per work item; planner runs per spec version"
    )
    auto_merge: bool = Field(default=False, description="merge a revision once approved")
    merge_queue: bool = Field(
        default=True,
        description="land approved revisions through the merge queue (each tested on top of "
        "the default branch first) where the provider supports it; else merge them as they are",
    )
    max_landing_rounds: int = Field(
        default=3,
        ge=1,
        le=100,
        description="times the merge queue may send an item back (a conflict, a failure once "
        "merged) before it is blocked; such rounds spend no attempt",
    )
    charge_baseline_failures: bool = Field(
        default=False,
        description="a red check the default branch fails too sends the revision back anyway",
    )
    outage_after: float = Field(
        default=15,
        gt=0,
        le=3600,
        description="seconds live runs retry the model API for an outage cause before dispatch "
        "pauses ([breaker])",
    )
    cancel_retrying: bool = Field(
        default=True,
        description="during an outage, cancel the runs retrying the model API (no attempt "
        "spent) instead of leaving them to retry ([breaker])",
    )
    pipeline_required: Required = Field(
        default="auto",
        description="a head with no checks lands: never (true), always (false), or only while "
        "no pipeline has ever reported on the repository (auto)",
    )
    retry_backoff_initial: float = Field(
        default=30, gt=0, le=86_400, allow_inf_nan=False, description="seconds, first retry"
    )
    retry_backoff_max: float = Field(
        default=900, gt=0, le=86_400, allow_inf_nan=False, description="seconds, the cap"
    )
    item_budget_usd: float | None = Field(
        default=None, gt=0, description="what all of an item's runs may cost; None: no limit"
    )
    spec_budget_usd: float | None = Field(
        default=None, gt=0, description="what planning one spec version may cost; None: no limit"
    )
    block_on_item_budget: bool = Field(
        default=True, description="an item over its budget is blocked (else it waits)"
    )
    branch_prefix: str = Field(default="cpe/", pattern=r"^[A-Za-z0-9._-]+/$")
    max_concurrent: Mapping[AgentRole, int] = Field(
        default_factory=lambda: dict(_DEFAULT_CONCURRENCY)
    )

"""A run's one line as ``cpe status``, ``cpe runs``, ``cpe work show``, the demo and the
dashboard's item page print it: ``describe_run``, with where it ran (``run_where``: its
runtime from its metadata and, for a remote run, its node)."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

from adapters.runtime.remote.placement import describe_node, read_placement
from domain.models import ACTIVE_RUN_STATUSES, AgentRun


def describe_run(
    run: AgentRun,
    runtime: str = "",
    *,
    now: datetime | None = None,
    stopped_at: datetime | None = None,
) -> str:
    """One line: session, role, runtime, subject, status, duration, cost, outcome. A run that
    has not ended shows its duration so far (until ``now``) when ``now`` is given; one the
    engine left active when it stopped (at ``stopped_at``) says so, with its duration up to
    then, which no longer grows."""
    duration, status = "", str(run.status)
    active = run.status in ACTIVE_RUN_STATUSES
    end = run.ended_at or ((stopped_at or now) if active else None)
    if run.started_at and end:
        duration = _duration(max(0.0, (end - run.started_at).total_seconds()))
    if active and stopped_at is not None:
        status = f"{run.status} when the engine stopped" + (f" ({duration})" if duration else "")
        duration = ""
    cost = f"${run.cost_usd:.4f}" if run.cost_usd is not None else ""
    outcome = run.outcome or run.failure_reason or ""
    return (
        f"{run.session_id:<26} {run.role:<12} {runtime:<10} {run.subject:<12} {status:<10} "
        f"{duration:>7} {cost:>9}  {outcome[:60]}"
    )


def _duration(seconds: float) -> str:
    """``12.5s`` under a minute, ``3m05s`` under an hour, ``26h04m`` beyond."""
    if seconds < 60:
        return f"{seconds:.1f}s"
    minutes, secs = divmod(int(seconds), 60)
    if minutes < 60:
        return f"{minutes}m{secs:02d}s"
    return f"{minutes // 60}h{minutes % 60:02d}m"


def run_runtime(state_dir: Path, session_id: str) -> str:
    """The runtime a run ran on (``claude-sdk``, ``claude-cli``, ``codex-cli``), from its
    metadata; empty when it has none (never started, or its files are gone)."""
    try:
        metadata = json.loads(
            (state_dir / "runs" / session_id / "runner_metadata.json").read_text()
        )
    except (OSError, ValueError):
        return ""
    family = metadata.get("agent_family") if isinstance(metadata, dict) else None
    return family.replace("_", "-") if isinstance(family, str) else ""


def run_where(state_dir: Path, session_id: str) -> str:
    """The runtime a run ran on and, for a remote run, its node (``claude-sdk@ADDRESS/NODE``,
    from its ``remote.json``), as a run's line shows it."""
    runtime = run_runtime(state_dir, session_id)
    node = describe_node(read_placement(state_dir, session_id))
    return f"{runtime}@{node}" if node else runtime

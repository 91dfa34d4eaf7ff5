"""``cpe costs``: what the agent runs cost, from the journal, grouped."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from adapters.cli.common import fail, journal_state
from adapters.cli.repository import resolve_config
from adapters.describe.runs import run_runtime
from domain.errors import ConfigError
from domain.models import item_ref
from domain.selectors import natural_key

COST_GROUPS = ("item", "role", "runtime", "model", "day")


def costs(by: str, since: str | None, config_path: Path | None, repo: Path | None) -> int:
    """What the agent runs cost, from the journal: a table grouped ``by`` item, role, runtime,
    model or day (UTC), of the runs that ended on or after ``since`` (YYYY-MM-DD). A run that
    reported no cost is counted apart (``unknown``), never as 0."""
    try:
        config, root = resolve_config(config_path, repo)
    except ConfigError as exc:
        return fail(f"configuration error: {exc}")
    start: datetime | None = None
    if since is not None:
        try:
            start = datetime.strptime(since, "%Y-%m-%d").replace(tzinfo=UTC)
        except ValueError:
            return fail(f"--since {since!r}: not a date; expected YYYY-MM-DD", 2)
    state_dir = root / config.engine.state_dir
    state = journal_state(state_dir)
    groups: dict[str, list[float | None]] = {}
    for run in state.agent_runs.values():
        if run.ended_at is None or (start is not None and run.ended_at < start):
            continue
        key = {
            "item": f"{item_ref(run.work_item_id)}" if run.work_item_id else "planning",
            "role": run.role,
            "runtime": run_runtime(state_dir, run.session_id) or "unknown",
            "model": run.model or "unknown",
            "day": run.ended_at.astimezone(UTC).strftime("%Y-%m-%d"),
        }[by]
        groups.setdefault(key, []).append(run.cost_usd)
    import math  # noqa: PLC0415

    print(f"{by:<24} {'runs':>6} {'cost (USD)':>12} {'unknown':>8}")
    # Exact sums (fsum), the total over the runs rather than the rounded groups: the same total
    # whichever grouping is asked for.
    every = [cost for costs_ in groups.values() for cost in costs_]
    for key in sorted(groups, key=natural_key if by == "item" else str):
        known = [cost for cost in groups[key] if cost is not None]
        missing = len(groups[key]) - len(known)
        print(f"{key:<24} {len(groups[key]):>6} {math.fsum(known):>12.4f} {missing:>8}")
    total = math.fsum(sorted(cost for cost in every if cost is not None))
    unknown = sum(1 for cost in every if cost is None)
    print(f"{'total':<24} {len(every):>6} {total:>12.4f} {unknown:>8}")
    return 0

"""The dashboard's data, as JSON-ready dicts: ``GET /api/state`` and ``GET /api/runs/{session}``
return them, and the page is rendered from them (``adapters.dashboard.page``).

Text that came from agents or the tracker (run output, failure reasons, titles, what the merge
queue and the provider said) passes through the log redaction, so a token an agent printed never
reaches a page.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from actors.logs import redact_value
from adapters.dashboard.source import Pause, Source
from adapters.runtime.remote.placement import describe_node
from domain.decisions import QuotaHold
from domain.landing import QueueEntry, describe_queue
from domain.models import (
    STATUSES,
    AccountQuota,
    AgentRun,
    EngineState,
    LandingTest,
    MergeWait,
    Revision,
    RevisionId,
    SentBack,
    WorkItem,
)
from domain.requests import RETRYABLE
from domain.signals import clock, describe_signal, describe_windows, window_name
from domain.state import natural_key, ordered, revision_for, runs_for_work_item

RECENT_RUNS = 30
RECENT_FAILURES = 10
OUTPUT_TAIL = 200_000  # characters of a transcript an ended run's view carries at most
REASON_CHARS = 2000  # of a held merge's or a send-back's reason, flattened to one line
SHORT_SHA = 12  # characters of a commit id, as the queue's steps give them
PAUSE_REASON_CHARS = 500  # of the breaker's reason, flattened to one line (as cpe status does)


def state_view(source: Source, now: datetime | None = None) -> dict[str, Any]:
    now = now or datetime.now(UTC)
    state = source.state()
    runs = list(state.agent_runs.values())
    active = [run for run in runs if run.is_active]
    ended = [run for run in runs if not run.is_active]
    failures = [run for run in ended if run.failure_reason][-RECENT_FAILURES:]
    pauses = source.pauses(state, now)
    limit = source.config.workflow.max_attempts
    rounds = source.config.workflow.max_landing_rounds
    view: dict[str, Any] = _clean(
        {
            "title": source.title,
            "generated_at": now.isoformat(timespec="seconds"),
            "engine": "running" if source.running else "stopped",
            "actions": source.control is not None and source.running,
            "paused": pause_view(pauses[0]) if pauses else None,
            "pauses": [pause_view(pause) for pause in pauses],
            "accounts": accounts_view(source, state, now),
            "totals": _totals(state, runs, active, source, now),
            "statuses": list(STATUSES),
            "work_items": [
                item_view(state, state.work_items[wid], limit, now, max_rounds=rounds)
                for wid in ordered(state.work_items)
            ],
            "merge_queue": merge_queue_view(source, state),
            "revisions": [revision_view(r) for r in state.revisions.values()],
            "runs": {
                "active": [run_view(run, source, now) for run in active],
                "recent": [run_view(run, source, now) for run in ended[-RECENT_RUNS:]][::-1],
            },
            "failures": [run_view(run, source, now) for run in failures][::-1],
            "decisions": [
                {"at": d.at.isoformat(timespec="seconds"), "text": d.text}
                for d in source.decisions()[-50:]
            ][::-1],
        }
    )
    return view


def pause_view(pause: Pause) -> dict[str, Any]:
    """A pause of dispatch, and in words as ``cpe status`` gives it: ``text`` the banner's line,
    ``detail`` what goes with it (None for a person's pause)."""
    return {
        "by": pause.by,
        "reason": pause.reason,
        "until": _iso(pause.until),
        "failures": pause.failures,
        "text": describe_dispatch_pause(pause),
        "detail": _pause_detail(pause),
    }


def describe_dispatch_pause(pause: Pause) -> str:
    """``dispatch paused: the model API is unreachable (…); probing at …``
    for an outage; the runs that failed in a row and the last reason for the breaker's; a
    person's pause as ``describe_pause`` says it."""
    if pause.by == "person":  # "by a person since …: why", as cpe status says it
        return f"dispatch paused {pause.reason}"
    reason = " ".join(pause.reason.split())[:PAUSE_REASON_CHARS]
    probing = f"; probing at {_stamp(pause.until)}" if pause.until is not None else ""
    if pause.by == "outage":  # the reason: "the model API is unreachable (…)"
        return f"dispatch paused: {reason}{probing}"
    return (
        f"dispatch paused: {pause.failures} agent runs in a row failed under the agent "
        f"(last reason: {reason}){probing}"
    )


def _pause_detail(pause: Pause) -> str | None:
    if pause.by == "outage":
        return (
            f"{pause.failures} retries by live runs with no answer in between; no attempt is "
            "spent meanwhile"
        )
    if pause.by == "breaker":
        return "no attempt is spent meanwhile; then one probe run decides"
    return None


def accounts_view(source: Source, state: EngineState, now: datetime) -> list[dict[str, Any]]:
    """The model accounts whose runs reported their usage, as ``cpe status`` lists them: each
    window's utilization and reset, in words too (``usage``), and the account's hold if any
    (no run on it starts until ``hold.until``)."""
    roles = source.accounts(state)
    holds = source.holds(state, now)
    return [
        _account_view(account, state.quota[account], roles.get(account, []), holds.get(account))
        for account in sorted(state.quota)
    ]


def _account_view(
    account: str, quota: AccountQuota, roles: list[str], hold: QuotaHold | None
) -> dict[str, Any]:
    return {
        "account": account,
        "roles": roles,
        "usage": describe_windows(quota.windows),
        "windows": [
            {
                "name": window.name,
                "label": window_name(window.name),
                "utilization": window.utilization,
                "resets_at": _iso(window.resets_at),
                "status": window.status,
            }
            for window in quota.windows
        ],
        "reported_at": _iso(quota.reported_at),
        "hold": (
            {
                "until": _iso(hold.until),
                "reason": hold.reason,
                "text": f"dispatch paused for {account}: {hold.reason}; resumes at "
                f"{clock(hold.until)}",
            }
            if hold is not None
            else None
        ),
    }


def item_view(
    state: EngineState, item: WorkItem, limit: int, now: datetime, *, max_rounds: int
) -> dict[str, Any]:
    runs = runs_for_work_item(state, item.id)
    revision = revision_for(state, item)
    costs = [run.cost_usd for run in runs if run.cost_usd is not None]
    failed = [run for run in runs if run.failure_reason]
    active = [run for run in runs if run.is_active]
    return {
        "id": item.id,
        "title": item.title,
        "status": item.status,
        "blocked_by": [
            {
                "id": b,
                "status": state.work_items[b].status if b in state.work_items else "unknown",
            }
            for b in item.blocked_by
        ],
        "attempts": state.attempts.get(item.id, 0),
        "max_attempts": limit,
        "revision": revision_view(revision) if revision else None,
        "reviews": [
            {"session_id": run.session_id, "verdict": run.outcome, "head": run.subject_sha}
            for run in runs
            if run.role == "reviewer" and run.outcome
        ],
        "runs": [run.session_id for run in runs],
        "active_runs": [run.session_id for run in active],
        "cost_usd": round(sum(costs), 6) if costs else None,
        "last_failure": (
            {
                "session_id": failed[-1].session_id,
                "reason": failed[-1].failure_reason,
                "class": failed[-1].failure_class,
            }
            if failed
            else None
        ),
        "can_retry": item.status in RETRYABLE and not any(run.in_flight for run in runs),
        "can_cancel": bool(active),
        "sent_back": (
            sent_back_view(state.sent_back[item.id], max_rounds)
            if item.id in state.sent_back and item.status != "done"
            else None
        ),
    }


def sent_back_view(report: SentBack, max_rounds: int) -> dict[str, Any]:
    """The merge queue's last send-back of an item: what went wrong on top of the default
    branch, in which files, and which round of ``max_rounds`` it was."""
    return {
        "problem": report.problem,
        "reason": _flat(report.reason),
        "files": list(report.files),
        "rounds": report.rounds,
        "max_rounds": max_rounds,
        "revision_id": report.revision_id,
        "moved_by": report.moved_by,
        "at": _iso(report.at),
        "answered_by": report.answered_by,
    }


def queue_active(source: Source) -> bool:
    """Approved revisions land through the merge queue (else they are merged as they are, or
    by a person)."""
    workflow = source.config.workflow
    return bool(workflow.auto_merge and workflow.merge_queue)


def queue_entries(source: Source, state: EngineState) -> list[QueueEntry]:
    """The merge queue in order (``domain.landing.describe_queue``), as ``cpe status`` gives it:
    none unless approved revisions land through the queue."""
    if not queue_active(source):
        return []
    workflow = source.config.workflow
    return describe_queue(
        state,
        charge_baseline=workflow.charge_baseline_failures,
        required=workflow.pipeline_required,
    )


def merge_queue_view(source: Source, state: EngineState) -> dict[str, Any]:
    """The queue's entries in order, each with its step in words and its last test (short
    commit ids); the merges the provider holds for now, with its reason; landings so far."""
    return {
        "active": queue_active(source),
        "entries": [_entry_view(entry) for entry in queue_entries(source, state)],
        "held": [
            _held_view(state, rid, state.merge_waits[rid])
            for rid in sorted(state.merge_waits, key=natural_key)
        ],
        "landings_total": state.landings_total,
    }


def _entry_view(entry: QueueEntry) -> dict[str, Any]:
    return {
        "position": entry.position,
        "item": {"id": entry.item.id, "title": entry.item.title},
        "revision_id": entry.revision.id,
        "step": entry.step,
        "test": _test_view(entry.test) if entry.test is not None else None,
    }


def _test_view(test: LandingTest) -> dict[str, Any]:
    return {
        "tested_sha": test.tested_sha[:SHORT_SHA],
        "base_sha": test.base_sha[:SHORT_SHA],
        "tests": test.tests,
        "stale": test.stale,
        "at": _iso(test.at),
    }


def _held_view(state: EngineState, revision_id: RevisionId, wait: MergeWait) -> dict[str, Any]:
    item = state.work_items.get(wait.work_item_id)
    return {
        "revision_id": revision_id,
        "item": {"id": wait.work_item_id, "title": item.title if item is not None else None},
        "head_sha": wait.head_sha[:SHORT_SHA],
        "reason": _flat(wait.reason),
        "tries": wait.tries,
        "since": _iso(wait.since),
        "last_at": _iso(wait.last_at),
    }


def _flat(text: str) -> str:
    return " ".join(text.split())[:REASON_CHARS]


def revision_view(revision: Revision) -> dict[str, Any]:
    pipeline = revision.pipeline
    return {
        "id": revision.id,
        "work_item_id": revision.work_item_id,
        "title": revision.title,
        "state": revision.state,
        "branch": revision.branch,
        "head_sha": revision.head_sha,
        "reviewed_sha": revision.reviewed_sha,
        "pipeline": {
            "status": pipeline.status,
            "failed_checks": list(pipeline.failed_checks),
            "reason": (pipeline.reason or "")[-2000:] or None,
        },
    }


def run_view(run: AgentRun, source: Source, now: datetime) -> dict[str, Any]:
    end = run.ended_at or (now if run.is_active else None)
    duration = (end - run.started_at).total_seconds() if run.started_at and end else None
    where = source.placement(run)
    return {
        "session_id": run.session_id,
        "role": run.role,
        "runtime": (where or {}).get("runtime") or source.runtime(run.role),
        "node": _node(where),
        "subject": run.subject,
        "work_item_id": run.work_item_id,
        "status": run.status,
        "requested_at": _iso(run.requested_at),
        "started_at": _iso(run.started_at),
        "ended_at": _iso(run.ended_at),
        "duration_s": round(duration, 1) if duration is not None else None,
        "cost_usd": run.cost_usd,
        "turns": run.turns,
        "outcome": run.outcome,
        "failure_reason": run.failure_reason,
        "failure_class": run.failure_class,
        "signal": (
            {
                "kind": run.signal.kind,
                "cause": run.signal.cause,
                "text": describe_signal(run.signal),
            }
            if run.signal is not None and run.is_active
            else None
        ),
    }


def _node(where: dict[str, str] | None) -> dict[str, str] | None:
    """A remote run's node, as ``cpe status`` shows it and in full; None for a local run."""
    if where is None:
        return None
    return {
        "id": where.get("node_id", ""),
        "address": where.get("node_address", ""),
        "hostname": where.get("hostname", ""),
        "label": describe_node(where),
    }


def run_detail(source: Source, run: AgentRun) -> dict[str, Any]:
    """One run, with its output so far (live) or its transcript (ended)."""
    now = datetime.now(UTC)
    view = run_view(run, source, now)
    buffer = source.engine.streams.buffer(run.session_id)
    if buffer is not None:
        view["live"], view["output"] = True, buffer.text()[-OUTPUT_TAIL:]
    else:
        view["live"], view["output"] = False, _transcript(source.state_dir, run)
    cleaned: dict[str, Any] = _clean(view)
    return cleaned


def _transcript(state_dir: Path, run: AgentRun) -> str | None:
    path = state_dir / "runs" / run.session_id / "transcript.log"
    try:
        with path.open("rb") as f:
            size = f.seek(0, 2)
            f.seek(max(0, size - OUTPUT_TAIL))
            return f.read().decode("utf-8", errors="replace")
    except OSError:
        return None


def _totals(
    state: EngineState, runs: list[AgentRun], active: list[AgentRun], source: Source, now: datetime
) -> dict[str, Any]:
    today = now.date()
    cost = [run.cost_usd or 0.0 for run in runs]
    cost_today = [
        run.cost_usd or 0.0
        for run in runs
        if (run.ended_at or run.requested_at or now).astimezone(UTC).date() == today
    ]
    by_status = dict.fromkeys(STATUSES, 0)
    for item in state.work_items.values():
        by_status[item.status] += 1
    return {
        "runs": len(runs),
        "active_runs": len(active),
        "runs_today": sum(
            1 for run in runs if (run.requested_at or now).astimezone(UTC).date() == today
        ),
        "cost_usd": round(sum(cost), 4),
        "cost_today_usd": round(sum(cost_today), 4),
        "queue_depth": source.queue_depth(),
        "work_items": by_status,
    }


def _stamp(value: datetime) -> str:
    """A time as ``cpe status`` gives a pause's: ``2026-11-29 12:10:00 UTC``."""
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _iso(value: datetime | None) -> str | None:
    return value.isoformat(timespec="seconds") if value else None


def _clean(value: Any) -> Any:
    """Every string redacted (a token an agent or a tracker holds is not shown)."""
    if isinstance(value, str):
        return redact_value(value)
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_clean(v) for v in value]
    return value

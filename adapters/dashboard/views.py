"""The dashboard's data, as JSON-ready dicts: ``GET /api/state`` returns them, and the board is
rendered from them (``adapters.dashboard.page``); a run's and an item's page build on them
(``adapters.dashboard.pages``).

Text that came from agents or the tracker (run output, failure reasons, titles, what the merge
queue and the provider said) passes through the log redaction, so a token an agent printed never
reaches a page.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from adapters.dashboard.source import Pause, Source
from adapters.describe import landing as landing_view
from adapters.describe.landing import not_merged
from adapters.runtime.artifacts.run_review import comment_where
from adapters.runtime.remote.placement import describe_node
from adapters.support.redaction import redact_value
from domain.decisions import QuotaHold
from domain.landing import QueueEntry, describe_baseline
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
from domain.results import AgentReview
from domain.runs import FAILED_ENDINGS, attempt_number, run_attempt, run_ending
from domain.selectors import natural_key, ordered, revision_for, runs_for_work_item
from domain.signals import clock, describe_signal, describe_windows, window_name

RECENT_RUNS = 30
RECENT_FAILURES = 10
REASON_CHARS = 2000  # of a held merge's or a send-back's reason, flattened to one line
SHORT_SHA = 12  # characters of a commit id, as the queue's steps give them
PAUSE_REASON_CHARS = 500  # of the breaker's reason, flattened to one line (as cpe status does)


def state_view(source: Source, now: datetime | None = None) -> dict[str, Any]:
    """Every panel of the board from one state and the decisions told up to it
    (``Source.moment``): the runs table, the cards and the decisions never disagree."""
    now = now or datetime.now(UTC)
    state, decisions = source.moment()
    runs = list(state.agent_runs.values())
    by_item: dict[str, list[AgentRun]] = {}  # once: an item's runs read from every run is O(n²)
    for run in runs:
        if run.work_item_id is not None:
            by_item.setdefault(run.work_item_id, []).append(run)
    active = [run for run in runs if run.is_active]
    ended = [run for run in runs if not run.is_active]
    # A run cpe itself ended (its stop, a crash) or a person cancelled is no failure.
    failures = [run for run in ended if run_ending(run) in FAILED_ENDINGS][-RECENT_FAILURES:]
    pauses = source.pauses(state, now)
    workflow = source.settings.workflow
    limit = workflow.max_attempts
    rounds = workflow.max_landing_rounds
    view: dict[str, Any] = clean(
        {
            "title": source.title,
            "generated_at": now.isoformat(timespec="seconds"),
            "engine": "running" if source.running else "stopped",
            "actions": source.control is not None and source.running,
            "paused": pause_view(pauses[0]) if pauses else None,
            "pauses": [pause_view(pause) for pause in pauses],
            "baseline": baseline_view(state, charge=workflow.charge_baseline_failures),
            "accounts": accounts_view(source, state, now),
            "totals": _totals(state, runs, active, source, now),
            "statuses": list(STATUSES),
            "work_items": [
                item_view(
                    state,
                    state.work_items[wid],
                    limit,
                    now,
                    max_rounds=rounds,
                    review_of=source.review,
                    landing=lambda item: not_merged(item, state, source.settings.workflow),
                    runs=by_item.get(wid, []),
                )
                for wid in ordered(state.work_items)
            ],
            "merge_queue": merge_queue_view(source, state),
            "revisions": [revision_view(r) for r in state.revisions.values()],
            "runs": {
                "active": [run_view(run, source, now, state) for run in active],
                "recent": [run_view(run, source, now, state) for run in ended[-RECENT_RUNS:]][::-1],
            },
            "failures": [run_view(run, source, now, state) for run in failures][::-1],
            "decisions": [
                {"at": d.at.isoformat(timespec="seconds"), "text": d.text} for d in decisions[-50:]
            ][::-1],
        }
    )
    return view


def pause_view(pause: Pause) -> dict[str, Any]:
    """A pause of dispatch, and in words as ``cpe status`` gives it: ``text`` the banner's line,
    ``detail`` what goes with it (None for a person's pause). ``reason``: a person's own words
    (empty when they gave none), or the breaker's last failure, or the outage's."""
    return {
        "by": pause.by,
        "reason": pause.reason,
        "since": _iso(pause.since),
        "until": _iso(pause.until),
        "failures": pause.failures,
        "text": describe_dispatch_pause(pause),
        "detail": _pause_detail(pause),
    }


def describe_dispatch_pause(pause: Pause) -> str:
    """``dispatch paused: the model API is unreachable (…); probing at …``
    for an outage; the runs that failed in a row and the last reason for the breaker's; a
    person's pause as ``describe_pause`` says it."""
    if pause.text is not None:  # a person's: "by a person since …: why", as cpe status says it
        return pause.text
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


def baseline_view(state: EngineState, *, charge: bool) -> dict[str, Any] | None:
    """The red default branch as ``cpe status`` says it (``describe_baseline``); None while
    it is not red."""
    red = describe_baseline(state, charge_baseline=charge)
    if red is None:
        return None
    return {
        "headline": red.headline,
        "failure": list(red.failure),
        "url": red.url,
        "means": list(red.means),
    }


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
    state: EngineState,
    item: WorkItem,
    limit: int,
    now: datetime,
    *,
    max_rounds: int,
    review_of: Callable[[AgentRun], AgentReview | None] = lambda run: None,
    landing: Callable[[WorkItem], str | None] = lambda item: None,
    runs: list[AgentRun] | None = None,
) -> dict[str, Any]:
    """One card: ``attempts`` as the decisions count them (``attempt_number``: the one under
    way included); ``last_end`` how its current run ended when it did not complete (a previous
    run's end is history, not the card's), ``last_failure`` the same when that was a failure;
    ``not_merged`` why an approved item has not merged, in ``cpe status``'s words. ``runs``:
    the item's runs, oldest first, when the caller has them (``runs_for_work_item``)."""
    runs = runs_for_work_item(state, item.id) if runs is None else runs
    revision = revision_for(state, item)
    costs = [run.cost_usd for run in runs if run.cost_usd is not None]
    active = [run for run in runs if run.is_active]
    end = _last_end(runs[-1]) if runs else None
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
        "attempts": attempt_number(state, item.id, runs),
        "max_attempts": limit,
        "revision": revision_view(revision) if revision else None,
        "reviews": [
            review_view(run, review_of(run))
            for run in runs
            if run.role == "reviewer" and run.outcome
        ],
        "runs": [run.session_id for run in runs],
        "active_runs": [run.session_id for run in active],
        "cost_usd": round(sum(costs), 6) if costs else None,
        "last_end": end,
        "last_failure": end if end is not None and end["ending"] in FAILED_ENDINGS else None,
        "not_merged": landing(item),
        "can_retry": item.status in RETRYABLE and not any(run.in_flight for run in runs),
        "can_cancel": bool(active),
        "sent_back": (
            sent_back_view(state.sent_back[item.id], max_rounds)
            if item.id in state.sent_back and item.status != "done"
            else None
        ),
    }


def ended_words(ending: str, reason: str | None) -> str:
    """A run's end in one phrase, its word said once: ``interrupted: the engine is shutting
    down``, ``cancelled by a person`` (not ``cancelled: cancelled by a person``)."""
    reason = (reason or "").removeprefix(f"{ending}: ")
    if not reason:
        return ending
    return reason if reason.startswith(ending) else f"{ending}: {reason}"


def _last_end(run: AgentRun) -> dict[str, Any] | None:
    """How the item's latest run ended, when it ended without completing."""
    ending = run_ending(run)
    if run.is_active or ending == "completed":
        return None
    return {
        "session_id": run.session_id,
        "ending": ending,
        "reason": run.failure_reason,
        "class": run.failure_class,
        "text": ended_words(ending, run.failure_reason),
    }


def review_view(run: AgentRun, review: AgentReview | None) -> dict[str, Any]:
    """A reviewer run's verdict, with its summary and inline comments when its record has
    them (``where``: ``path:line``, or the path for the whole file)."""
    return {
        "session_id": run.session_id,
        "verdict": run.outcome,
        "head": run.subject_sha,
        "summary": review.summary if review is not None else None,
        "comments": [
            {"path": c.path, "line": c.line, "where": comment_where(c), "body": c.body}
            for c in (review.comments if review is not None else ())
        ],
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


def queue_entries(source: Source, state: EngineState) -> list[QueueEntry]:
    """The merge queue in order (``domain.landing.describe_queue``), as ``cpe status`` gives it:
    none unless approved revisions land through the queue."""
    return landing_view.queue_entries(state, source.settings.workflow)


def merge_queue_view(source: Source, state: EngineState) -> dict[str, Any]:
    """The queue's entries in order, each with its step in words and its last test (short
    commit ids); the merges the provider holds for now, with its reason; landings so far."""
    return {
        "active": landing_view.queue_active(source.settings.workflow),
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


def run_view(run: AgentRun, source: Source, now: datetime, state: EngineState) -> dict[str, Any]:
    """One run's row: ``ending`` its status with a cancellation told apart (``run_ending``:
    ``interrupted`` by cpe's own stop, ``cancelled`` by a person), ``attempt`` which of its
    item's attempts it was (``run_attempt``; None for a reviewer or a planner)."""
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
        "ending": run_ending(run),
        "attempt": run_attempt(state, run.session_id),
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


def clean(value: Any) -> Any:
    """Every string redacted (a token an agent or a tracker holds is not shown)."""
    if isinstance(value, str):
        return redact_value(value)
    if isinstance(value, dict):
        return {k: clean(v) for k, v in value.items()}
    if isinstance(value, list):
        return [clean(v) for v in value]
    return value

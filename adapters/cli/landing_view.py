"""The merge queue as ``cpe status``, ``cpe work list`` and ``cpe work show`` print it: each
entry's place and step (``domain.landing.describe_queue``), merges the provider holds, and what
the queue said when it sent an item back."""

from __future__ import annotations

from typing import Any

from domain.landing import QueueEntry, describe_queue
from domain.models import EngineState, SentBack, WorkItem


def queue_active(config: Any) -> bool:
    return bool(config.workflow.auto_merge and config.workflow.merge_queue)


def queue_entries(state: EngineState, config: Any) -> list[QueueEntry]:
    if not queue_active(config):
        return []
    workflow = config.workflow
    return describe_queue(
        state,
        charge_baseline=workflow.charge_baseline_failures,
        required=workflow.pipeline_required,
    )


def print_queue(state: EngineState, config: Any) -> None:
    """``cpe status``: the queue in order, then the items it sent back and have not landed."""
    entries = queue_entries(state, config)
    if entries:
        print("\nmerge queue (one revision at a time is tested on top of the default branch)")
        for entry in entries:
            print(
                f"  {entry.position}. #{entry.item.id} revision {entry.revision.id}: {entry.step}"
            )
    rounds = config.workflow.max_landing_rounds
    back = [
        (wid, report)
        for wid, report in sorted(state.sent_back.items())
        if wid in state.work_items and state.work_items[wid].status != "done"
    ]
    if back:
        print("\nsent back by the merge queue (no attempt spent; blocked past the last round)")
        for wid, report in back:
            print(f"  #{wid} {describe_sent_back(report, rounds)}")


def describe_sent_back(report: SentBack, max_rounds: int) -> str:
    what = (
        "conflicts with the default branch"
        if report.problem == "conflict"
        else ("failed merged with the default branch")
    )
    files = f" in {', '.join(report.files)}" if report.files else ""
    when = report.at.strftime("%Y-%m-%d %H:%M:%S UTC") if report.at else "?"
    return (
        f"{what}{files} (round {report.rounds} of {max_rounds}, {when}); moved by "
        f"{report.moved_by or '?'}"
    )


def list_note(item: WorkItem, state: EngineState, config: Any) -> str:
    """``cpe work list``: the queue's word on an item, or ''."""
    for entry in queue_entries(state, config):
        if entry.item.id == item.id:
            return f"  (merge queue {entry.position}: {entry.step})"
    report = state.sent_back.get(item.id)
    if report is not None and item.status in ("needs-refinement", "in-progress", "blocked"):
        files = f" in {', '.join(report.files)}" if report.files else ""
        return f"  (sent back by the merge queue: {report.problem}{files})"
    return ""


def show_lines(item: WorkItem, state: EngineState, config: Any) -> list[str]:
    """``cpe work show``: the item's place in the queue, a held merge, its last send-back."""
    lines = []
    for entry in queue_entries(state, config):
        if entry.item.id == item.id:
            lines.append(f"  merge queue  position {entry.position}: {entry.step}")
            if entry.test is not None:
                lines.append(
                    f"               tested head {entry.test.tested_sha[:12]} on "
                    f"{entry.test.base_sha[:12]}, {entry.test.tests} queue pipeline run(s)"
                )
    for rid, wait in state.merge_waits.items():
        if wait.work_item_id == item.id:
            lines.append(f"  merge held   revision {rid}: {' '.join(wait.reason.split())[:300]}")
    report = state.sent_back.get(item.id)
    if report is not None and item.status != "done":
        rounds = config.workflow.max_landing_rounds
        lines.append(f"  sent back    {describe_sent_back(report, rounds)}")
        lines.append(f"               {' '.join(report.reason.split())[:300]}")
    return lines

"""The merge queue as ``cpe status``, ``cpe work list`` and ``cpe work show`` print it: each
entry's place and step (``domain.landing.describe_queue``), why an approved item outside it has
not merged (``why_not_merged``), merges the provider holds, and what the queue said when it
sent an item back. The dashboard says the same with the same functions."""

from __future__ import annotations

from typing import TYPE_CHECKING

from domain.landing import QueueEntry, describe_queue, why_not_merged
from domain.models import EngineState, SentBack, WorkItem
from domain.selectors import ordered

if TYPE_CHECKING:
    from adapters.cli.settings import CpeConfig


def queue_active(config: CpeConfig) -> bool:
    return bool(config.workflow.auto_merge and config.workflow.merge_queue)


def queue_entries(state: EngineState, config: CpeConfig) -> list[QueueEntry]:
    if not queue_active(config):
        return []
    workflow = config.workflow
    return describe_queue(
        state,
        charge_baseline=workflow.charge_baseline_failures,
        required=workflow.pipeline_required,
    )


def print_queue(state: EngineState, config: CpeConfig) -> None:
    """``cpe status``: the queue in order, the approved items outside it and why they have not
    merged, then the items it sent back and have not landed."""
    entries = queue_entries(state, config)
    if entries:
        print("\nmerge queue (one revision at a time is tested on top of the default branch)")
        for entry in entries:
            print(
                f"  {entry.position}. #{entry.item.id} revision {entry.revision.id}: {entry.step}"
            )
    queued = {entry.item.id for entry in entries}
    waiting = [
        (wid, why)
        for wid in ordered(state.work_items)
        if wid not in queued and (why := not_merged(state.work_items[wid], state, config))
    ]
    if waiting:
        print("\napproved, not merged")
        for wid, why in waiting:
            print(f"  #{wid} {why}")
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


def not_merged(item: WorkItem, state: EngineState, config: CpeConfig) -> str | None:
    """Why an approved item has not merged (``domain.landing.why_not_merged``): ``cpe
    status``, ``cpe work show`` and the dashboard's card say it alike."""
    workflow = config.workflow
    return why_not_merged(
        state,
        item,
        auto_merge=workflow.auto_merge,
        merge_queue=queue_active(config),
        charge_baseline=workflow.charge_baseline_failures,
        required=workflow.pipeline_required,
    )


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


def list_note(item: WorkItem, state: EngineState, config: CpeConfig) -> str:
    """``cpe work list``: the queue's word on an item, or ''."""
    for entry in queue_entries(state, config):
        if entry.item.id == item.id:
            return f"  (merge queue {entry.position}: {entry.step})"
    report = state.sent_back.get(item.id)
    if report is not None and item.status in ("needs-refinement", "in-progress", "blocked"):
        files = f" in {', '.join(report.files)}" if report.files else ""
        return f"  (sent back by the merge queue: {report.problem}{files})"
    return ""


def show_lines(item: WorkItem, state: EngineState, config: CpeConfig) -> list[str]:
    """``cpe work show``: the item's place in the queue, a held merge, its last send-back."""
    lines = []
    entries = queue_entries(state, config)
    for entry in entries:
        if entry.item.id == item.id:
            lines.append(f"  merge queue  position {entry.position}: {entry.step}")
            if entry.test is not None:
                lines.append(
                    f"               tested head {entry.test.tested_sha[:12]} on "
                    f"{entry.test.base_sha[:12]}, {entry.test.tests} queue pipeline run(s)"
                )
    queued = any(entry.item.id == item.id for entry in entries)
    why = None if queued else not_merged(item, state, config)
    if why is not None:
        lines.append(f"  not merged   {why}")
    for rid, wait in state.merge_waits.items():
        if wait.work_item_id == item.id:
            lines.append(f"  merge held   revision {rid}: {' '.join(wait.reason.split())[:300]}")
    report = state.sent_back.get(item.id)
    if report is not None and item.status != "done":
        rounds = config.workflow.max_landing_rounds
        lines.append(f"  sent back    {describe_sent_back(report, rounds)}")
        lines.append(f"               {' '.join(report.reason.split())[:300]}")
    return lines

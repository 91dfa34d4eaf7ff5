"""The merge queue as ``cpe status``, ``cpe work list`` and ``cpe work show`` print it: each
entry's place and step (``domain.landing.describe_queue``), why an approved item outside it has
not merged (``why_not_merged``), merges the provider holds, and what the queue said when it
sent an item back. The dashboard says the same with the same functions."""

from __future__ import annotations

from typing import Literal, Protocol

from domain.landing import QueueEntry, describe_queue, why_not_merged
from domain.models import EngineState, SentBack, WorkItem, item_ref
from domain.selectors import ordered


class Workflow(Protocol):
    """What these views read of ``supervisor.toml``'s ``[workflow]`` (its section's model in
    ``adapters/cli/settings.py`` is one)."""

    @property
    def max_attempts(self) -> int: ...
    @property
    def auto_merge(self) -> bool: ...
    @property
    def merge_queue(self) -> bool: ...
    @property
    def max_landing_rounds(self) -> int: ...
    @property
    def charge_baseline_failures(self) -> bool: ...
    @property
    def pipeline_required(self) -> bool | Literal["auto"]: ...


def queue_active(workflow: Workflow) -> bool:
    return bool(workflow.auto_merge and workflow.merge_queue)


def queue_entries(state: EngineState, workflow: Workflow) -> list[QueueEntry]:
    if not queue_active(workflow):
        return []
    return describe_queue(
        state,
        charge_baseline=workflow.charge_baseline_failures,
        required=workflow.pipeline_required,
    )


def print_queue(state: EngineState, workflow: Workflow) -> None:
    """``cpe status``: the queue in order, the approved items outside it and why they have not
    merged, then the items it sent back and have not landed."""
    entries = queue_entries(state, workflow)
    if entries:
        print("\nmerge queue (one revision at a time is tested on top of the default branch)")
        for entry in entries:
            print(
                f"  {entry.position}. {item_ref(entry.item.id)} revision {entry.revision.id}: "
                f"{entry.step}"
            )
    queued = {entry.item.id for entry in entries}
    waiting = [
        (wid, why)
        for wid in ordered(state.work_items)
        if wid not in queued and (why := not_merged(state.work_items[wid], state, workflow))
    ]
    if waiting:
        print("\napproved, not merged")
        for wid, why in waiting:
            print(f"  {item_ref(wid)} {why}")
    rounds = workflow.max_landing_rounds
    back = [
        (wid, report)
        for wid, report in sorted(state.sent_back.items())
        if wid in state.work_items and state.work_items[wid].status != "done"
    ]
    if back:
        print("\nsent back by the merge queue (no attempt spent; blocked past the last round)")
        for wid, report in back:
            print(f"  {item_ref(wid)} {describe_sent_back(report, rounds)}")


def not_merged(item: WorkItem, state: EngineState, workflow: Workflow) -> str | None:
    """Why an approved item has not merged (``domain.landing.why_not_merged``): ``cpe
    status``, ``cpe work show`` and the dashboard's card say it alike."""
    return why_not_merged(
        state,
        item,
        auto_merge=workflow.auto_merge,
        merge_queue=queue_active(workflow),
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


def list_note(item: WorkItem, state: EngineState, workflow: Workflow) -> str:
    """``cpe work list``: the queue's word on an item, or ''."""
    for entry in queue_entries(state, workflow):
        if entry.item.id == item.id:
            return f"  (merge queue {entry.position}: {entry.step})"
    report = state.sent_back.get(item.id)
    if report is not None and item.status in ("needs-refinement", "in-progress", "blocked"):
        files = f" in {', '.join(report.files)}" if report.files else ""
        return f"  (sent back by the merge queue: {report.problem}{files})"
    return ""


def show_lines(item: WorkItem, state: EngineState, workflow: Workflow) -> list[str]:
    """``cpe work show``: the item's place in the queue, a held merge, its last send-back."""
    lines = []
    entries = queue_entries(state, workflow)
    for entry in entries:
        if entry.item.id == item.id:
            lines.append(f"  merge queue  position {entry.position}: {entry.step}")
            if entry.test is not None:
                lines.append(
                    f"               tested head {entry.test.tested_sha[:12]} on "
                    f"{entry.test.base_sha[:12]}, {entry.test.tests} queue pipeline run(s)"
                )
    queued = any(entry.item.id == item.id for entry in entries)
    why = None if queued else not_merged(item, state, workflow)
    if why is not None:
        lines.append(f"  not merged   {why}")
    for rid, wait in state.merge_waits.items():
        if wait.work_item_id == item.id:
            lines.append(f"  merge held   revision {rid}: {' '.join(wait.reason.split())[:300]}")
    report = state.sent_back.get(item.id)
    if report is not None and item.status != "done":
        rounds = workflow.max_landing_rounds
        lines.append(f"  sent back    {describe_sent_back(report, rounds)}")
        lines.append(f"               {' '.join(report.reason.split())[:300]}")
    return lines

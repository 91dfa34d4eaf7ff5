"""The console's words, from the dashboard's views (plain dicts): the board's rows, its banner,
its runs and decisions, an item's sections and a run's header, as plain strings.

Nothing here draws: the screens put these strings into ``rich.text.Text`` (never parsed as
markup: a title or an agent's output is data), and a test asserts on them as a person reads
them.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from domain.models import item_ref

ELLIPSIS = "…"


def clip(text: str | None, width: int) -> str:
    """``text`` on one line (its whitespace flattened) in at most ``width`` characters, the
    cut marked with an ellipsis."""
    flat = " ".join((text or "").split())
    if width <= 0:
        return ""
    if len(flat) <= width:
        return flat
    return flat[: width - 1] + ELLIPSIS


def money(cost: float | None) -> str:
    return f"${cost:.4f}" if cost is not None else "—"


def clock(iso: str | None) -> str:
    """``HH:MM:SS`` (UTC) of an ISO time of the views; ``—`` for none."""
    if not iso:
        return "—"
    return datetime.fromisoformat(iso).astimezone(UTC).strftime("%H:%M:%S")


def stamp(iso: str | None) -> str:
    if not iso:
        return "—"
    return datetime.fromisoformat(iso).astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


@dataclass(frozen=True)
class Row:
    """One work item on the board: ``key`` its id; the cells in the columns' order."""

    key: str
    item: str
    title: str
    status: str
    attempts: str
    cost: str
    revision: str
    queue: str


COLUMNS = ("item", "title", "status", "tries", "cost", "revision", "q")


def board_rows(view: dict[str, Any], *, compact: bool = False) -> list[Row]:
    """The work items grouped by status in the workflow's order (the view's ``statuses``),
    in the tracker's order within a status: attempts as ``2/3``, the revision with its state
    and pipeline, the merge queue's position."""
    order = {status: n for n, status in enumerate(view.get("statuses", []))}
    queued = {
        entry["item"]["id"]: entry["position"]
        for entry in view.get("merge_queue", {}).get("entries", [])
    }
    items = sorted(
        enumerate(view.get("work_items", [])),
        key=lambda pair: (order.get(pair[1]["status"], len(order)), pair[0]),
    )
    return [
        Row(
            key=item["id"],
            item=item_ref(item["id"]),
            title=item["title"] or "",
            status=item["status"],
            attempts=f"{item['attempts']}/{item['max_attempts']}",
            cost=money(item["cost_usd"]),
            revision=revision_words(item["revision"], compact=compact),
            queue=str(queued[item["id"]]) if item["id"] in queued else "",
        )
        for _, item in items
    ]


def revision_words(revision: dict[str, Any] | None, *, compact: bool = False) -> str:
    """``r3 open passed``: the revision, its state and its pipeline's status (``compact``:
    the revision and its pipeline); empty for none."""
    if revision is None:
        return ""
    if compact:
        return f"{revision['id']} {revision['pipeline']['status']}"
    return f"{revision['id']} {revision['state']} {revision['pipeline']['status']}"


def headline(view: dict[str, Any]) -> str:
    """The board's first line: whether the engine runs, the items by status, the cost so far,
    the repository (last: the first cut on a narrow terminal)."""
    totals = view.get("totals", {})
    counts = totals.get("work_items", {})
    by_status = ", ".join(f"{n} {status}" for status, n in counts.items() if n)
    cost = totals.get("cost_usd")
    parts = [
        f"cpe · engine {view.get('engine', 'stopped')}",
        by_status or "no work items",
        money(cost) if cost is not None else "",
        view.get("title", ""),
    ]
    return " · ".join(part for part in parts if part)


def banner_lines(view: dict[str, Any]) -> list[str]:
    """What holds the work up, one line each: dispatch's pauses (a person's, the breaker's, an
    outage's), the red default branch, the model accounts on hold, merges the provider holds."""
    lines = [pause["text"] for pause in view.get("pauses", [])]
    baseline = view.get("baseline")
    if baseline is not None:
        lines.append(baseline["headline"])
    lines += [
        account["hold"]["text"] for account in view.get("accounts", []) if account.get("hold")
    ]
    for held in view.get("merge_queue", {}).get("held", []):
        item = item_ref(held["item"]["id"])
        lines.append(f"merge of {held['revision_id']} ({item}) held: {held['reason']}")
    return lines


def account_lines(view: dict[str, Any]) -> list[str]:
    """Each model account's headroom: its usage windows in words (``usage``)."""
    return [
        f"{account['account']}: {account['usage'] or 'no usage reported'}"
        for account in view.get("accounts", [])
    ]


RUN_COLUMNS = ("run", "role", "item", "state", "time", "cost")


@dataclass(frozen=True)
class RunRow:
    """One agent run on the board: ``key`` its session; ``item`` its work item's id (None for
    a planner's); the cells in ``RUN_COLUMNS``' order."""

    key: str
    item: str | None
    cells: tuple[str, ...]


def run_rows(view: dict[str, Any], now: datetime | None = None) -> list[RunRow]:
    """The active runs (their age as of ``now``), then the recent ones, newest first (how
    each ended, how long it took)."""
    runs = view.get("runs", {})
    rows = []
    for run in [*runs.get("active", []), *runs.get("recent", [])]:
        wid = run.get("work_item_id")
        active = not run.get("ended_at")
        state = run.get("status", "") if active else run.get("ending", "")
        rows.append(
            RunRow(
                key=run["session_id"],
                item=wid,
                cells=(
                    run["session_id"],
                    run["role"],
                    item_ref(wid) if wid else "",
                    state,
                    _age(run, now if active else None),
                    money(run.get("cost_usd")),
                ),
            )
        )
    return rows


def _age(run: dict[str, Any], now: datetime | None) -> str:
    seconds = run.get("duration_s")
    started = run.get("started_at")
    if now is not None and started:
        seconds = max(0.0, (now - datetime.fromisoformat(started)).total_seconds())
    return f"{seconds:.0f}s" if seconds is not None else ""


def signal_lines(view: dict[str, Any]) -> list[str]:
    """What the active runs' CLIs said of the model API (retrying, …), one line each."""
    return [
        f"{run['role']} {item_ref(run['work_item_id']) if run.get('work_item_id') else ''}: "
        f"{run['signal']['text']}"
        for run in view.get("runs", {}).get("active", [])
        if run.get("signal")
    ]


def queue_line(view: dict[str, Any]) -> str:
    """The merge queue in a line: ``merge queue: 1 #3 testing · 2 #5 waiting``; empty when
    nothing is queued."""
    entries = view.get("merge_queue", {}).get("entries", [])
    if not entries:
        return ""
    return "merge queue: " + " · ".join(
        f"{entry['position']} {item_ref(entry['item']['id'])} {entry['step']}" for entry in entries
    )


def decision_lines(view: dict[str, Any]) -> list[str]:
    """The recent decisions, newest first: ``HH:MM:SS what was decided``."""
    return [f"{clock(d['at'])} {d['text']}" for d in view.get("decisions", [])]


def run_header(detail: dict[str, Any], now: datetime | None = None) -> list[str]:
    """A run's facts, as its dashboard page gives them: role and session, its item, runtime,
    status, attempt, times, cost and turns, and how it ended; a live run's duration as of
    ``now`` (by its start)."""
    d = detail
    seconds = d.get("duration_s")
    if now is not None and d.get("live") and d.get("started_at"):
        seconds = max(0.0, (now - datetime.fromisoformat(d["started_at"])).total_seconds())
    item = d.get("item")
    subject = (
        f"{item_ref(item['id'])} {item['title']} ({item['status']})" if item else d.get("subject")
    )
    runtime = d.get("runtime") or ""
    if d.get("node"):
        runtime += f" @{d['node']['label']}"
    lines = [
        f"{d['role']} run {d['session_id']}",
        f"item {subject}",
        f"runtime {runtime or '—'} · status {d['ending']}"
        + (f" · attempt {d['attempt']} of {d['max_attempts']}" if d.get("attempt") else ""),
        f"started {stamp(d.get('started_at') or d.get('requested_at'))} · ended "
        f"{stamp(d.get('ended_at'))}",
        "duration "
        + (f"{seconds:.1f}s" if seconds is not None else "—")
        + f" · cost {money(d.get('cost_usd'))} · turns "
        + (str(d["turns"]) if d.get("turns") is not None else "—"),
    ]
    lines.append(result_line(d))
    return lines


def result_line(d: dict[str, Any]) -> str:
    """What the run came to: running, a verdict, an outcome, or why it did not complete."""
    if d.get("live"):
        signal = f" ({d['signal']['text']})" if d.get("signal") else ""
        return ("running" if d["ending"] == "running" else "starting") + signal
    if d["ending"] in ("failed", "timed-out", "cancelled", "interrupted"):
        return f"{d['ending']}: {d.get('failure_reason') or ''}".rstrip(": ")
    review = d.get("review")
    if review is not None:
        summary = f": {review['summary']}" if review.get("summary") else ""
        return f"verdict {review['verdict']}{summary}"
    revision = f" · revision {d['delivered_revision']}" if d.get("delivered_revision") else ""
    return f"outcome {d.get('outcome') or 'completed'}{revision}"


_CONTROL = {c: None for c in [*range(32), *range(0x7F, 0xA0)] if c not in (9, 10)}


def plain(text: str) -> str:
    """Text from agents or the tracker as the terminal may show it: its control characters
    (C0 and C1: an escape sequence's ESC or CSI, a carriage return, a bell) taken out, tabs
    and newlines kept. A title that carried ``ESC ] 0 ; … BEL`` would set the operator's
    terminal title; one that carried ``ESC [ 2 J`` would clear the screen."""
    return text.translate(_CONTROL)


def plain_view(value: Any) -> Any:
    """Every string of a view (``state_view``'s, ``item_detail``'s, ``run_detail``'s) made
    ``plain``, where it arrives: nothing from the engine reaches the terminal raw."""
    if isinstance(value, str):
        return plain(value)
    if isinstance(value, dict):
        return {key: plain_view(item) for key, item in value.items()}
    if isinstance(value, list):
        return [plain_view(item) for item in value]
    return value

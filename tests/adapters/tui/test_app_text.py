"""The console's words from a board view (``state_view``'s dict, as the socket sends it): the
items grouped by status in the workflow's order with their merge queue position and revision,
what holds the work up in one line each, the runs' rows with a ticking age, a title cut to the
width, an agent's control characters taken out."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from adapters.tui.text import (
    ELLIPSIS,
    banner_lines,
    board_rows,
    clip,
    headline,
    plain,
    queue_line,
    run_rows,
)
from domain.models import STATUSES


def item(wid: str, status: str, **more: Any) -> dict[str, Any]:
    card: dict[str, Any] = {
        "id": wid,
        "title": f"Item {wid}",
        "status": status,
        "attempts": 1,
        "max_attempts": 3,
        "cost_usd": None,
        "revision": None,
    }
    return card | more


def revision(rid: str, state: str, pipeline: str) -> dict[str, Any]:
    return {"id": rid, "state": state, "pipeline": {"status": pipeline}}


VIEW: dict[str, Any] = {
    "title": "/srv/repo",
    "engine": "running",
    "statuses": list(STATUSES),
    "totals": {"cost_usd": 0.25, "work_items": {"done": 1, "approved": 2, "pending": 1}},
    "work_items": [
        item("1", "done", cost_usd=0.125),
        item("2", "approved", revision=revision("r2", "open", "success")),
        item("3", "pending", attempts=0),
        item("4", "approved", revision=revision("r4", "open", "pending")),
    ],
    "merge_queue": {
        "entries": [
            {"position": 1, "item": {"id": "4", "title": "Item 4"}, "step": "testing"},
            {"position": 2, "item": {"id": "2", "title": "Item 2"}, "step": "waiting"},
        ],
        "held": [
            {"revision_id": "r9", "item": {"id": "9", "title": "x"}, "reason": "checks pending"}
        ],
    },
    "pauses": [{"text": "dispatch paused by a person since 12:00: deploy [b]freeze[/b]"}],
    "baseline": {"headline": "default branch pipeline: red at abc123 (failed: unit)"},
    "accounts": [
        {
            "account": "anthropic",
            "usage": "5h 97%",
            "hold": {"text": "dispatch paused for anthropic"},
        },
        {"account": "openai", "usage": "", "hold": None},
    ],
    "runs": {
        "active": [
            {
                "session_id": "implementor-a",
                "role": "implementor",
                "work_item_id": "3",
                "status": "running",
                "started_at": "2026-11-29T12:00:00+00:00",
                "ended_at": None,
                "duration_s": 1.0,
                "cost_usd": None,
            }
        ],
        "recent": [
            {
                "session_id": "planner-b",
                "role": "planner",
                "work_item_id": None,
                "status": "completed",
                "ending": "completed",
                "started_at": "2026-11-29T11:00:00+00:00",
                "ended_at": "2026-11-29T11:00:04+00:00",
                "duration_s": 4.2,
                "cost_usd": 0.0192,
            }
        ],
    },
}


def test_the_items_are_grouped_by_status_with_their_queue_place_and_revision() -> None:
    rows = board_rows(VIEW)
    assert [(r.item, r.status, r.queue) for r in rows] == [
        ("#3", "pending", ""),
        ("#2", "approved", "2"),
        ("#4", "approved", "1"),
        ("#1", "done", ""),
    ]
    assert rows[1].revision == "r2 open success"
    assert board_rows(VIEW, compact=True)[1].revision == "r2 success"
    assert (rows[0].attempts, rows[0].cost) == ("0/3", "—")
    assert rows[3].cost == "$0.1250"


def test_what_holds_the_work_up_is_a_line_each_as_written() -> None:
    assert banner_lines(VIEW) == [
        "dispatch paused by a person since 12:00: deploy [b]freeze[/b]",
        "default branch pipeline: red at abc123 (failed: unit)",
        "dispatch paused for anthropic",
        "merge of r9 (#9) held: checks pending",
    ]
    assert queue_line(VIEW) == "merge queue: 1 #4 testing · 2 #2 waiting"
    assert headline(VIEW) == (
        "cpe · engine running · 1 done, 2 approved, 1 pending · $0.2500 · /srv/repo"
    )


def test_the_runs_rows_give_an_active_run_its_age_now_and_an_ended_one_its_time() -> None:
    now = datetime(2026, 11, 29, 12, 0, 42, tzinfo=UTC)
    active, ended = run_rows(VIEW, now)
    assert active.cells == ("implementor-a", "implementor", "#3", "running", "42s", "—")
    assert active.item == "3"
    assert ended.cells == ("planner-b", "planner", "", "completed", "4s", "$0.0192")
    assert ended.item is None


def test_a_title_is_cut_to_its_width_and_an_agents_control_characters_are_taken_out() -> None:
    assert clip("Greet a person by name", 12) == "Greet a per" + ELLIPSIS
    assert clip("Greet\na   person", 40) == "Greet a person"  # one line, its spaces flattened
    assert clip("short", 12) == "short"
    assert plain("red \x1b[31mtext\x1b[0m\r\n\ttab\x07") == "red [31mtext[0m\n\ttab"

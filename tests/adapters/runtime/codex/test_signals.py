"""codex 0.169's events about the model API (its stdout ``error`` events while it retries, its
session log's rate limits), as cpe's ``RunSignal`` s."""

from __future__ import annotations

from datetime import UTC, datetime

from adapters.runtime.codex.signals import CodexSignals
from domain.models import RunSignal


def codex_signals_of(*events: dict[str, object]) -> list[RunSignal]:
    got: list[RunSignal] = []
    reader = CodexSignals(got.append)
    for event in events:
        reader.event(event)
    return got


def test_codex_reconnecting_lines_are_retries_with_their_cause() -> None:
    demand = "Reconnecting... 2/5 (We\u2019re currently experiencing high demand, which may cause "
    lines = [
        {"type": "error", "message": demand + "temporary errors.)"},
        {
            "type": "error",
            "message": "Reconnecting... 1/5 (exceeded retry limit, last status: "
            "429 Too Many Requests)",
        },
        {
            "type": "error",
            "message": "Reconnecting... waiting for network (Connection failed: "
            "error sending request)",
        },
        {"type": "error", "message": "Reconnecting... 3/5 (unexpected status 401 Unauthorized)"},
    ]
    server, limited, refused, unauthorized = codex_signals_of(*lines)
    assert (server.cause, server.attempt, server.max_attempts) == ("server_error", 2, 5)
    assert server.account == "openai"
    assert server.detail is not None
    assert server.detail.startswith("We\u2019re currently experiencing high demand")
    assert limited.cause == "rate_limit"
    assert (refused.cause, refused.attempt) == ("unreachable", None)
    assert refused.detail == "Connection failed: error sending request"
    assert unauthorized.cause == "authentication"


def test_codex_recovers_at_its_next_item_and_other_errors_are_not_retries() -> None:
    retry = {"type": "error", "message": "Reconnecting... 1/5 (stream disconnected)"}
    item = {"type": "item.started", "item": {"id": "i1", "type": "command_execution"}}
    failed = {"type": "error", "message": "Selected model is at capacity."}
    kinds = [s.kind for s in codex_signals_of(item, retry, item, item, failed)]
    assert kinds == ["retrying", "recovered"]


def test_codex_rate_limits_are_headroom_and_a_full_window_is_spent_once() -> None:
    reset = 1795938235
    reading = {"limit_id": "codex", "primary": {"used_percent": 42.0, "window_minutes": 300,
               "resets_at": reset}, "secondary": {"used_percent": 30.0,
               "window_minutes": 10080, "resets_at": reset + 600000}}  # fmt: skip
    full = {**reading, "primary": {"used_percent": 100.0, "window_minutes": 300,
            "resets_at": reset}}  # fmt: skip
    signals = codex_signals_of(
        {"type": "token_count", "rate_limits": reading},
        {"type": "token_count", "rate_limits": full},
        {"type": "token_count", "rate_limits": full},
    )
    assert [s.kind for s in signals] == ["quota", "quota", "rate_limited", "quota"]
    quota, spent = signals[0], signals[2]
    assert [(w.name, w.utilization) for w in quota.windows] == [
        ("five_hour", 0.42), ("seven_day", 0.3)
    ]  # fmt: skip
    assert (spent.window, spent.until) == ("five_hour", datetime.fromtimestamp(reset, UTC))
    assert spent.windows[0].status == "rejected"

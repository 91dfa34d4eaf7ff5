"""The claude CLI's stream-json events about the model API, as cpe's ``RunSignal`` s. The lines
are the CLI's own (2.1.332), recorded against a refused port and a scripted model answering
529, 429 and a spent usage window."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from adapters.runtime.signals import ClaudeSignals, CodexSignals
from domain.models import RunSignal

REFUSED = (
    '{"type":"system","subtype":"api_retry","attempt":4,"max_retries":10,"retry_delay_ms":4788,'
    '"error_status":null,"error":"unknown","session_id":"d9c0","uuid":"e6645634"}'
)
OVERLOADED = (
    '{"type":"system","subtype":"api_retry","attempt":2,"max_retries":10,"retry_delay_ms":1074,'
    '"error_status":529,"error":"overloaded","session_id":"0cca","uuid":"d91ac345"}'
)
RATE_LIMITED = (
    '{"type":"system","subtype":"api_retry","attempt":1,"max_retries":10,"retry_delay_ms":2434,'
    '"error_status":429,"error":"rate_limit","session_id":"e537","uuid":"353ea61b"}'
)
ASSISTANT = '{"type":"assistant","message":{"id":"m1","model":"x","content":[]}}'


def signals_of(*lines: str) -> list[RunSignal]:
    got: list[RunSignal] = []
    reader = ClaudeSignals(got.append)
    for line in lines:
        reader.event(json.loads(line))
    return got


def test_a_refused_connection_is_the_api_unreachable_with_the_retry_schedule() -> None:
    [signal] = signals_of(REFUSED)
    assert signal.kind == "retrying"
    assert signal.cause == "unreachable"
    assert signal.account == "anthropic"
    assert (signal.attempt, signal.max_attempts, signal.retry_in) == (4, 10, 4.788)


def test_overload_and_rate_limits_keep_their_causes() -> None:
    overloaded, limited = signals_of(OVERLOADED, RATE_LIMITED)
    assert (overloaded.cause, overloaded.detail) == ("overloaded", "HTTP 529 overloaded")
    assert (limited.cause, limited.detail) == ("rate_limit", "HTTP 429 rate_limit")


def test_the_first_answer_after_retries_says_recovered_and_later_ones_say_nothing() -> None:
    kinds = [s.kind for s in signals_of(ASSISTANT, REFUSED, REFUSED, ASSISTANT, ASSISTANT)]
    assert kinds == ["retrying", "retrying", "recovered"]


def test_a_rate_limit_event_is_headroom_and_a_rejected_one_spends_the_window() -> None:
    allowed = {"type": "rate_limit_event", "rate_limit_info": {
        "status": "allowed_warning", "resetsAt": 1795950000, "rateLimitType": "five_hour",
        "utilization": 0.83}}  # fmt: skip
    rejected = {"type": "rate_limit_event", "rate_limit_info": {
        "status": "rejected", "resetsAt": 1795950000, "rateLimitType": "five_hour"}}  # fmt: skip
    quota, spent = signals_of(json.dumps(allowed), json.dumps(rejected))
    reset = datetime.fromtimestamp(1795950000, UTC)
    assert quota.kind == "quota"
    [window] = quota.windows
    assert (window.name, window.utilization, window.resets_at) == ("five_hour", 0.83, reset)
    assert window.status == "allowed_warning"
    assert spent.kind == "rate_limited"
    assert (spent.until, spent.window) == (reset, "five_hour")


def test_a_result_saying_the_limit_was_hit_is_rate_limited() -> None:
    result = {"type": "result", "subtype": "success", "is_error": True,
              "result": "You've hit your 5-hour limit · resets 10:30pm (UTC)"}  # fmt: skip
    [signal] = signals_of(json.dumps(result))
    assert (signal.kind, signal.window) == ("rate_limited", "five_hour")
    ok = {"type": "result", "subtype": "success", "is_error": False, "result": "done"}
    assert signals_of(json.dumps(ok)) == []


def test_events_that_say_nothing_of_the_model_api_give_no_signal() -> None:
    init = '{"type":"system","subtype":"init","session_id":"s"}'
    weird = {"type": "rate_limit_event", "rate_limit_info": {"status": "odd", "utilization": 7}}
    assert signals_of(init, ASSISTANT) == []
    [odd] = signals_of(json.dumps(weird))
    assert odd.kind == "quota"
    assert (odd.windows[0].status, odd.windows[0].utilization) == (None, None)


# ---------------------------------------------------------------------------- codex 0.169


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

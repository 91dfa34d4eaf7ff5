"""The claude CLI's stream-json events about the model API, as cpe's ``RunSignal`` s. The lines
are the CLI's own (2.1.332), recorded against a refused port and a scripted model answering
529, 429 and a spent usage window."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from adapters.runtime.claude.signals import ClaudeSignals
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

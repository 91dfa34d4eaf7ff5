"""The scripted model's bad days over real HTTP: faults per wire, a refused address, headroom.

Then the real CLIs against two of them (facts in docs/scripted-model-wire.md): ``claude`` on a
subscription ends at once on a spent five-hour window; ``codex`` ends its turn on a ChatGPT
plan's ``usage_limit_reached``.
"""

from __future__ import annotations

import http.client
import json
import shutil
import socket
import subprocess
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from adapters.scripted_model import (
    Fault,
    Quota,
    ScriptedModelServer,
    Window,
    parse_scenario,
)
from adapters.scripted_model.responses_wire import codex_overrides
from tests.adapters.scripted_model.scripted_cli import (
    WAIT,
    claude_cli,
    cli_request,
    finish,
    git_repo,
)
from tests.real_clis import real_codex

BOOK = parse_scenario(
    {"name": "ok", "turns": [[{"tool": "Bash", "input": {"command": "ls"}}], [{"text": "hi"}]]}
)
RESETS = datetime(2031, 5, 6, 7, 8, 9, tzinfo=UTC)
WEEK_RESETS = datetime(2031, 5, 9, 0, 0, 0, tzinfo=UTC)

Serve = Callable[[], ScriptedModelServer]


@pytest.fixture
def serve() -> Iterator[Serve]:
    servers: list[ScriptedModelServer] = []

    def start() -> ScriptedModelServer:
        server = ScriptedModelServer(BOOK).start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.close()


@dataclass(frozen=True)
class Answer:
    status: int
    headers: dict[str, str]  # names lower-cased
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


def address(server: ScriptedModelServer) -> tuple[str, int]:
    host, port = server.base_url.removeprefix("http://").split(":")
    return host, int(port)


def post(server: ScriptedModelServer, path: str, body: object) -> Answer:
    connection = http.client.HTTPConnection(*address(server), timeout=WAIT)
    try:
        connection.request("POST", path, body=json.dumps(body).encode())
        response = connection.getresponse()
        headers = {name.lower(): value for name, value in response.getheaders()}
        return Answer(response.status, headers, response.read())
    finally:
        connection.close()


def responses_request(*, tools: bool = True, stream: bool = True) -> dict[str, Any]:
    """A ``/v1/responses`` body as codex sends one (the wire tests have the full shape)."""
    user = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "x"}]}
    shell = {"type": "function", "name": "exec_command", "parameters": {"type": "object"}}
    return {
        "model": "gpt-5-codex",
        "instructions": "You are codex.",
        "input": [user],
        "tools": [shell] if tools else [],
        "stream": stream,
    }


MESSAGES, COUNT, RESPONSES = "/v1/messages", "/v1/messages/count_tokens", "/v1/responses"

# -- faults, per wire


@pytest.mark.parametrize(
    ("fault", "status", "error_type", "message"),
    [
        (Fault.overloaded(), 529, "overloaded_error", "Overloaded"),
        (Fault.server_error(), 500, "api_error", "Internal server error"),
        (Fault.server_error(502), 502, "api_error", "Internal server error"),
        (Fault.unauthorized(), 401, "authentication_error", "invalid x-api-key"),
        (
            Fault.out_of_credits(),
            400,
            "invalid_request_error",
            "Your credit balance is too low to access the Anthropic API. Please go to Plans & "
            "Billing to upgrade or purchase credits.",
        ),
    ],
    ids=["overloaded", "server_error", "server_error_502", "unauthorized", "out_of_credits"],
)
def test_a_fault_answers_messages_in_the_anthropic_error_shape(
    serve: Serve, fault: Fault, status: int, error_type: str, message: str
) -> None:
    server = serve()
    server.fail(fault)
    answer = post(server, MESSAGES, cli_request())
    assert answer.status == status
    assert answer.headers["content-type"] == "application/json"
    assert answer.json() == {
        "type": "error",
        "error": {"type": error_type, "message": message},
        "request_id": answer.headers["request-id"],
    }
    (record,) = server.requests
    assert (record.kind, record.status, record.error, record.fault) == (
        "turn",
        status,
        message,
        fault,
    )
    assert record.conversation is not None
    assert record.turn == 0


@pytest.mark.parametrize(
    ("fault", "status", "error"),
    [
        (
            Fault.overloaded(),
            503,
            {
                "type": "service_unavailable_error",
                "code": "server_is_overloaded",
                "message": "Our servers are currently overloaded. Please try again later.",
            },
        ),
        (
            Fault.server_error(),
            500,
            {
                "type": "server_error",
                "code": None,
                "message": "The server had an error while processing your request. Sorry "
                "about that!",
            },
        ),
        (
            Fault.unauthorized(),
            401,
            {
                "type": "invalid_request_error",
                "code": "invalid_api_key",
                "message": "Incorrect API key provided: scripted-model. You can find your API "
                "key at https://platform.openai.com/account/api-keys.",
            },
        ),
        (
            Fault.out_of_credits(),
            429,
            {
                "type": "insufficient_quota",
                "code": "insufficient_quota",
                "message": "You exceeded your current quota, please check your plan and billing "
                "details. For more information on this error, read the docs: "
                "https://platform.openai.com/docs/guides/error-codes/api-errors.",
            },
        ),
    ],
    ids=["overloaded", "server_error", "unauthorized", "out_of_credits"],
)
def test_a_fault_answers_responses_in_the_openai_error_shape(
    serve: Serve, fault: Fault, status: int, error: dict[str, Any]
) -> None:
    server = serve()
    server.fail(fault)
    answer = post(server, RESPONSES, responses_request())
    assert answer.status == status
    assert answer.json() == {"error": {**error, "param": None}}
    (record,) = server.requests
    assert (record.kind, record.status, record.error, record.fault) == (
        "turn",
        status,
        error["message"],
        fault,
    )


def test_rate_limited_says_when_to_retry_on_both_wires(serve: Serve) -> None:
    server = serve()
    server.fail(Fault.rate_limited(retry_after=7))
    anthropic = post(server, MESSAGES, cli_request())
    openai = post(server, RESPONSES, responses_request())
    assert (anthropic.status, openai.status) == (429, 429)
    assert anthropic.json()["error"]["type"] == "rate_limit_error"
    assert {k: anthropic.headers[k] for k in ("retry-after", "x-should-retry")} == {
        "retry-after": "7",
        "x-should-retry": "true",
    }
    assert anthropic.headers["anthropic-ratelimit-requests-remaining"] == "0"
    error = openai.json()["error"]
    assert (error["type"], error["code"]) == ("requests", "rate_limit_exceeded")
    assert "Please try again in 7s." in error["message"]
    assert {k: v for k, v in openai.headers.items() if "ratelimit" in k or "retry" in k} == {
        "retry-after": "7",
        "x-ratelimit-limit-requests": "50",
        "x-ratelimit-remaining-requests": "0",
        "x-ratelimit-reset-requests": "7s",
    }


def _seconds_between(before: datetime, after: datetime, moment: datetime) -> range:
    """The ``SecondsUntil(moment)`` values an answer sent between the two can carry."""
    return range(int((moment - after).total_seconds()), int((moment - before).total_seconds()) + 2)


def test_usage_limit_sends_the_unified_headers_the_claude_cli_reads(serve: Serve) -> None:
    server = serve()
    resets = datetime.now(UTC) + timedelta(hours=2)
    weekly = Window(0.35, WEEK_RESETS)
    server.fail(Fault.usage_limit(resets, quota=Quota(seven_day=weekly)))
    before = datetime.now(UTC)
    answer = post(server, MESSAGES, cli_request())
    after = datetime.now(UTC)
    epoch = str(int(resets.timestamp()))
    assert answer.status == 429
    assert answer.json()["error"] == {
        "type": "rate_limit_error",
        "message": "This request would exceed your account's rate limit. Please try again later.",
    }
    unified = {k: v for k, v in answer.headers.items() if k.startswith("anthropic-ratelimit")}
    assert unified == {
        "anthropic-ratelimit-unified-status": "rejected",
        "anthropic-ratelimit-unified-reset": epoch,
        "anthropic-ratelimit-unified-representative-claim": "five_hour",
        "anthropic-ratelimit-unified-5h-status": "rejected",
        "anthropic-ratelimit-unified-5h-utilization": "1",
        "anthropic-ratelimit-unified-5h-reset": epoch,
        "anthropic-ratelimit-unified-7d-status": "allowed",
        "anthropic-ratelimit-unified-7d-utilization": "0.35",
        "anthropic-ratelimit-unified-7d-reset": str(int(WEEK_RESETS.timestamp())),
    }
    assert int(answer.headers["retry-after"]) in _seconds_between(before, after, resets)


def test_usage_limit_sends_what_codex_reads_for_a_chatgpt_plan(serve: Serve) -> None:
    server = serve()
    server.fail(Fault.usage_limit(WEEK_RESETS, "seven_day", quota=Quota.used(0.4, 0.9)))
    before = datetime.now(UTC)
    answer = post(server, RESPONSES, responses_request())
    after = datetime.now(UTC)
    week = str(int(WEEK_RESETS.timestamp()))
    assert answer.status == 429
    error = answer.json()["error"]
    assert error.pop("resets_in_seconds") in _seconds_between(before, after, WEEK_RESETS)
    assert error == {
        "type": "usage_limit_reached",
        "message": "The usage limit has been reached",
        "param": None,
        "code": None,
        "plan_type": "plus",
        "resets_at": int(week),
        "eligible_promo": None,
    }
    codex = {k: v for k, v in answer.headers.items() if k.startswith("x-codex-")}
    assert int(codex.pop("x-codex-secondary-reset-after-seconds")) in _seconds_between(
        before, after, WEEK_RESETS
    )
    assert int(codex.pop("x-codex-primary-reset-after-seconds")) > 4 * 3600
    assert codex.pop("x-codex-primary-reset-at").isdigit()
    assert codex == {
        "x-codex-active-limit": "codex",
        "x-codex-plan-type": "plus",
        "x-codex-primary-used-percent": "40",
        "x-codex-primary-window-minutes": "300",
        "x-codex-secondary-used-percent": "100",
        "x-codex-secondary-window-minutes": "10080",
        "x-codex-secondary-reset-at": week,
        "x-codex-primary-over-secondary-limit-percent": "0",
        "x-codex-credits-has-credits": "False",
        "x-codex-credits-unlimited": "False",
    }
    # The seven-day window is the claim on the Anthropic side of the same fault.
    anthropic = post(server, MESSAGES, cli_request())
    assert anthropic.headers["anthropic-ratelimit-unified-representative-claim"] == "seven_day"
    assert anthropic.headers["anthropic-ratelimit-unified-7d-status"] == "rejected"
    assert anthropic.headers["anthropic-ratelimit-unified-5h-status"] == "allowed"


def test_every_model_route_is_faulted_and_recorded_with_its_usual_kind(serve: Serve) -> None:
    server = serve()
    server.fail(Fault.overloaded())
    side = cli_request(stream=False)
    del side["tools"]
    answers = [
        post(server, COUNT, cli_request()).status,
        post(server, MESSAGES, side).status,
        post(server, RESPONSES, responses_request(tools=False)).status,
        post(server, RESPONSES, responses_request(stream=False)).status,
    ]
    assert answers == [529, 529, 503, 503]
    assert [(r.path, r.kind, r.status) for r in server.requests] == [
        (COUNT, "count_tokens", 529),
        (MESSAGES, "side", 529),
        (RESPONSES, "side", 503),
        (RESPONSES, "turn", 503),
    ]
    assert all(r.fault == Fault.overloaded() and r.error for r in server.requests)


def test_other_routes_answer_as_usual_while_a_fault_is_set(serve: Serve) -> None:
    server = serve()
    server.fail(Fault.overloaded())
    connection = http.client.HTTPConnection(*address(server), timeout=WAIT)
    connection.request("HEAD", "/api/hello")
    assert connection.getresponse().status == 200
    connection.close()
    assert post(server, "/v1/complete", {}).status == 404
    assert [r.fault for r in server.requests] == [None, None]
    assert server.fault == Fault.overloaded()  # not spent on them


def test_a_fault_with_times_heals_by_itself(serve: Serve) -> None:
    server = serve()
    server.fail(Fault.rate_limited(retry_after=1, times=2))
    statuses = [post(server, MESSAGES, cli_request()).status for _ in range(3)]
    assert statuses == [429, 429, 200]
    assert server.fault is None
    assert [r.fault is not None for r in server.requests] == [True, True, False]


def test_heal_and_a_new_fault_replace_the_last(serve: Serve) -> None:
    server = serve()
    server.fail(Fault.server_error(times=5))
    assert post(server, MESSAGES, cli_request()).status == 500
    server.fail(Fault.unauthorized())  # replaces it, with its own count (none)
    assert [post(server, RESPONSES, responses_request()).status for _ in range(2)] == [401, 401]
    server.heal()
    assert server.fault is None
    assert post(server, MESSAGES, cli_request()).status == 200


def test_waiting_for_a_self_healing_fault_needs_no_sleep(serve: Serve) -> None:
    server = serve()
    server.fail(Fault.overloaded(times=3))
    client = threading.Thread(
        target=lambda: [post(server, MESSAGES, cli_request()) for _ in range(4)]
    )
    client.start()
    assert server.wait_until(lambda s: s.fault is None and len(s.requests) == 4, WAIT)
    client.join(WAIT)
    assert [r.status for r in server.requests] == [529, 529, 529, 200]


@pytest.mark.parametrize(
    ("make", "problem"),
    [
        (lambda: Fault.overloaded(times=0), "at least one request"),
        (lambda: Fault.server_error(404), "5xx"),
        (lambda: Fault.rate_limited(retry_after=-1), "0 or more"),
        (lambda: Fault.usage_limit(datetime(2031, 1, 1)), "timezone-aware"),
        (lambda: Window(-0.1, RESETS), "0 or more"),
        (Quota, "at least one window"),
    ],
    ids=["times", "status", "retry_after", "naive", "used", "empty"],
)
def test_bad_faults_and_quotas_are_refused(make: Callable[[], object], problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        make()


# -- headroom on good answers


def test_set_quota_puts_the_unified_headers_on_every_good_messages_answer(serve: Serve) -> None:
    server = serve()
    server.set_quota(Quota(Window(0.42, RESETS), Window(0.3, WEEK_RESETS)))
    streamed = post(server, MESSAGES, cli_request())
    counted = post(server, COUNT, cli_request())
    side = cli_request(stream=False)
    del side["tools"]
    plain = post(server, MESSAGES, side)
    expected = {
        "anthropic-ratelimit-unified-status": "allowed",
        "anthropic-ratelimit-unified-reset": str(int(RESETS.timestamp())),
        "anthropic-ratelimit-unified-representative-claim": "five_hour",
        "anthropic-ratelimit-unified-5h-status": "allowed",
        "anthropic-ratelimit-unified-5h-utilization": "0.42",
        "anthropic-ratelimit-unified-5h-reset": str(int(RESETS.timestamp())),
        "anthropic-ratelimit-unified-7d-status": "allowed",
        "anthropic-ratelimit-unified-7d-utilization": "0.3",
        "anthropic-ratelimit-unified-7d-reset": str(int(WEEK_RESETS.timestamp())),
    }
    for answer in (streamed, counted, plain):
        assert answer.status == 200
        assert {k: v for k, v in answer.headers.items() if "ratelimit" in k} == expected
        assert not [k for k in answer.headers if k.startswith("x-codex-")]
    assert streamed.headers["content-type"] == "text/event-stream"


def test_a_window_past_warn_at_makes_the_status_a_warning_claimed_by_it(serve: Serve) -> None:
    server = serve()
    server.set_quota(Quota(Window(0.5, RESETS), Window(0.9, WEEK_RESETS)))
    headers = post(server, MESSAGES, cli_request()).headers
    week = str(int(WEEK_RESETS.timestamp()))
    assert headers["anthropic-ratelimit-unified-status"] == "allowed_warning"
    assert headers["anthropic-ratelimit-unified-representative-claim"] == "seven_day"
    assert headers["anthropic-ratelimit-unified-reset"] == week
    assert headers["anthropic-ratelimit-unified-7d-status"] == "allowed_warning"
    assert headers["anthropic-ratelimit-unified-7d-surpassed-threshold"] == "0.75"
    assert headers["anthropic-ratelimit-unified-5h-status"] == "allowed"
    assert "anthropic-ratelimit-unified-5h-surpassed-threshold" not in headers


def test_set_quota_puts_the_codex_headers_on_every_good_responses_answer(serve: Serve) -> None:
    server = serve()
    server.set_quota(Quota.used(five_hour=0.125))
    for body in (responses_request(), responses_request(stream=False)):
        answer = post(server, RESPONSES, body)
        codex = {k: v for k, v in answer.headers.items() if k.startswith("x-codex-")}
        assert answer.status == 200
        assert 5 * 3600 - WAIT <= int(codex.pop("x-codex-primary-reset-after-seconds")) <= 5 * 3600
        assert int(codex.pop("x-codex-primary-reset-at")) > datetime.now(UTC).timestamp()
        assert codex == {
            "x-codex-primary-used-percent": "12.5",
            "x-codex-primary-window-minutes": "300",
        }
        assert not [k for k in answer.headers if k.startswith("anthropic-ratelimit")]


def test_errors_carry_no_headroom_and_none_removes_it(serve: Serve) -> None:
    server = serve()
    server.set_quota(Quota.used(0.1, 0.1))
    server.fail(Fault.server_error(times=1))
    faulted = post(server, MESSAGES, cli_request())
    refused = post(server, MESSAGES, "not an object")  # the book's own 400
    assert (faulted.status, refused.status) == (500, 400)
    assert not [k for k in [*faulted.headers, *refused.headers] if "ratelimit" in k]
    server.set_quota(None)
    assert server.quota is None
    good = post(server, MESSAGES, cli_request())
    assert good.status == 200
    assert not [k for k in good.headers if "ratelimit" in k]


# -- a dead address


def connect(server: ScriptedModelServer) -> socket.socket:
    return socket.create_connection(address(server), timeout=WAIT)


def test_refused_connections_then_accepted_again_on_the_same_port(serve: Serve) -> None:
    server = serve()
    base_url = server.base_url
    server.refuse_connections()
    assert not server.listening
    with pytest.raises(ConnectionRefusedError):
        connect(server)
    server.refuse_connections()  # idempotent
    server.accept_connections()
    assert server.listening
    assert server.base_url == base_url
    assert post(server, MESSAGES, cli_request()).status == 200
    server.accept_connections()  # idempotent
    assert [r.status for r in server.requests] == [200]


def test_a_refusing_server_keeps_its_port_so_no_one_else_takes_it_meanwhile(
    serve: Serve,
) -> None:
    # Another test on the machine binding a free port must not get this one while it refuses:
    # the server would then not listen there again (and a client would reach the other).
    server = serve()
    host, port = address(server)
    server.refuse_connections()
    with socket.socket() as other, pytest.raises(OSError, match="in use"):
        other.bind((host, port))
    with pytest.raises(ConnectionRefusedError):
        connect(server)
    server.accept_connections()
    assert post(server, MESSAGES, cli_request()).status == 200
    server.close()
    with socket.socket() as again:  # once closed, the port is free (its TIME_WAITs aside)
        again.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        again.bind((host, port))


def probe(connection: http.client.HTTPConnection) -> int:
    connection.request("HEAD", "/api/hello")
    response = connection.getresponse()
    response.read()  # frees the connection for its next request
    return response.status


def test_refusing_hangs_up_open_connections_and_held_responses() -> None:
    hang = parse_scenario({"name": "hang", "turns": [[{"hang": True}]]})
    with ScriptedModelServer(hang) as server:
        idle = http.client.HTTPConnection(*address(server), timeout=WAIT)
        assert probe(idle) == 200  # a keep-alive connection, left open
        held = http.client.HTTPConnection(*address(server), timeout=WAIT)
        held.request("POST", MESSAGES, body=json.dumps(cli_request()))
        assert server.wait_until(lambda s: s.hanging == 1, WAIT)
        server.refuse_connections()
        assert server.wait_until(lambda s: s.hanging == 0, WAIT)
        with pytest.raises((http.client.RemoteDisconnected, ConnectionError)):
            held.getresponse()
        with pytest.raises((http.client.RemoteDisconnected, ConnectionError)):
            probe(idle)  # again on the keep-alive connection, now hung up
        idle.close()
        held.close()


def test_close_while_refusing_leaves_nothing_running(serve: Serve) -> None:
    server = serve()
    server.refuse_connections()
    server.close()
    assert not server.listening
    assert not [t for t in threading.enumerate() if t.name.startswith("scripted-model:")]
    server.close()  # idempotent
    with pytest.raises(RuntimeError, match="closed"):
        server.accept_connections()
    with pytest.raises(RuntimeError, match="closed"):
        server.refuse_connections()


def test_refusing_before_start_serves_once_started_and_accepting() -> None:
    server = ScriptedModelServer(BOOK)
    try:
        server.refuse_connections()
        server.start()  # started, but still refusing
        with pytest.raises(ConnectionRefusedError):
            connect(server)
        server.accept_connections()
        assert post(server, MESSAGES, cli_request()).status == 200
    finally:
        server.close()


# -- the real CLIs


def test_claude_on_a_subscription_ends_at_once_on_a_spent_window(tmp_path: Path) -> None:
    book = parse_scenario({"name": "t", "turns": [[{"text": "never sent"}]]})
    resets = datetime.now(UTC) + timedelta(hours=3)
    with ScriptedModelServer(book) as server:
        server.fail(Fault.usage_limit(resets, quota=Quota.used(0.4, 0.2)))
        home = tmp_path / "home"
        home.mkdir()
        env = {
            "PATH": "/usr/bin:/bin",
            "HOME": str(home),
            "IS_SANDBOX": "1",
            "TZ": "UTC",
            "ANTHROPIC_BASE_URL": server.base_url,
            "CLAUDE_CODE_OAUTH_TOKEN": "scripted-subscription",  # no API key: subscription mode
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        }
        process = subprocess.Popen(
            [str(claude_cli()), "-p", "Hi.", "--output-format", "stream-json", "--verbose"],
            cwd=git_repo(tmp_path / "repo"),
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        run = finish(process)
    assert run.returncode == 1
    assert [r.status for r in server.requests] == [429]  # no retry
    (event,) = [e for e in run.events if e["type"] == "rate_limit_event"]
    assert event["rate_limit_info"]["status"] == "rejected"
    assert event["rate_limit_info"]["rateLimitType"] == "five_hour"
    assert event["rate_limit_info"]["resetsAt"] == int(resets.timestamp())
    result = run.result
    assert (result["is_error"], result["api_error_status"], result["api_error"]) == (
        True,
        429,
        "usage_limit_reached",
    )
    assert result["result"].startswith("You've hit your 5-hour limit · resets ")


def test_codex_ends_its_turn_on_a_chatgpt_usage_limit(tmp_path: Path) -> None:
    book = parse_scenario({"name": "t", "turns": [[{"text": "never sent"}]]})
    node = shutil.which("node")
    assert node is not None, "the real codex needs node on PATH"
    codex_home = tmp_path / "codex-home"
    codex_home.mkdir()
    with ScriptedModelServer(book) as server:
        server.fail(Fault.usage_limit(datetime.now(UTC) + timedelta(hours=3)))
        argv = [str(real_codex()), "exec", "--json", "--skip-git-repo-check", "-m", "gpt-5-codex"]
        for override in codex_overrides(server.base_url):
            argv += ["-c", override]
        done = subprocess.run(
            [*argv, "Hi."],
            cwd=git_repo(tmp_path / "repo"),
            env={
                "PATH": f"/usr/bin:/bin:{Path(node).parent}",
                "HOME": str(tmp_path),
                "CODEX_HOME": str(codex_home),
            },
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=90,
            check=False,
        )
    events = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    assert done.returncode == 1, done.stderr[-2000:]
    assert [r.status for r in server.requests] == [429]  # no retry
    failed = [e for e in events if e["type"] == "turn.failed"]
    assert len(failed) == 1
    # codex writes a typographic apostrophe: "You\u2019ve hit your usage limit."
    assert failed[0]["error"]["message"].startswith("You\u2019ve hit your usage limit.")
    assert "try again at" in failed[0]["error"]["message"]

"""The scripted model: its wire format and turn selection over plain HTTP, then the real CLI."""

from __future__ import annotations

import http.client
import json
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from adapters.scripted_model import (
    Match,
    Scenario,
    ScriptedModelServer,
    load_scenario,
    parse_scenario,
    shipped_scenarios,
)
from adapters.scripted_model.wire import encode_sse, stream_events
from domain.errors import ConfigError, InvalidAgentOutputError
from domain.models import AgentRole
from domain.results import validate_output
from tests.adapters.scripted_model.scripted_cli import (
    WAIT,
    assemble,
    call,
    cli_request,
    finish,
    git_repo,
    kill,
    parse_sse,
    play,
    run_cli,
    start_cli,
)
from tests.fakes.executable import write_executable

Serve = Callable[[Scenario | Sequence[Scenario]], ScriptedModelServer]


@pytest.fixture
def serve() -> Iterator[Serve]:
    servers: list[ScriptedModelServer] = []

    def start(book: Scenario | Sequence[Scenario]) -> ScriptedModelServer:
        server = ScriptedModelServer(book).start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.close()


def scenario(turns: list[Any], **fields: Any) -> Scenario:
    return parse_scenario({"name": fields.pop("name", "test"), "turns": turns, **fields})


# -- wire format


def test_a_streamed_turn_has_the_event_order_the_cli_accepts() -> None:
    content: list[dict[str, Any]] = [
        {"type": "text", "text": "x" * 100},
        {"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {"command": "y" * 100}},
    ]
    events = stream_events(content, model="m", input_tokens=5, stop="tool_use")
    names = [name for name, _ in events]
    assert names[0] == "message_start"
    assert names[-2:] == ["message_delta", "message_stop"]
    assert names.count("content_block_start") == names.count("content_block_stop") == 2
    assert names.count("content_block_delta") > 2  # long values arrive in several deltas
    assert events[0][1]["message"]["model"] == "m"
    assert events[1][1]["content_block"] == {"type": "text", "text": ""}
    rebuilt, stop = assemble(parse_sse(encode_sse(events)))
    assert rebuilt == [("text", "x" * 100), ("tool_use", "Bash", {"command": "y" * 100})]
    assert stop == "tool_use"


def test_sse_frames_are_event_and_data_lines() -> None:
    assert encode_sse([("message_stop", {"type": "message_stop"})]) == (
        b'event: message_stop\ndata: {"type":"message_stop"}\n\n'
    )


# -- turn selection over HTTP


def test_the_turn_played_is_the_number_of_assistant_messages(serve: Serve) -> None:
    server = serve(scenario([[{"text": "first"}], [{"text": "second"}]]))
    assert play(server, cli_request(turns_done=1)) == ([("text", "second")], "end_turn")
    assert play(server, cli_request(turns_done=0)) == ([("text", "first")], "end_turn")
    assert play(server, cli_request(turns_done=1)) == ([("text", "second")], "end_turn")
    assert [r.turn for r in server.requests] == [1, 0, 1]


def test_past_the_last_turn_the_model_ends_with_final_text(serve: Serve) -> None:
    server = serve(scenario([[{"tool": "Bash", "input": {"command": "ls"}}]], final_text="Bye."))
    assert play(server, cli_request()) == ([("tool_use", "Bash", {"command": "ls"})], "tool_use")
    assert play(server, cli_request(turns_done=3)) == ([("text", "Bye.")], "end_turn")


def test_after_last_repeat_replays_the_last_turn(serve: Serve) -> None:
    server = serve(scenario([[{"text": "a"}], [{"text": "again"}]], after_last="repeat"))
    assert play(server, cli_request(turns_done=7)) == ([("text", "again")], "end_turn")


def test_the_first_matching_scenario_of_the_book_plays(serve: Serve) -> None:
    book = [
        scenario([[{"text": "planner"}]], name="p", match={"role": "planner"}),
        scenario([[{"text": "two"}]], name="two", match={"prompt": r"Work Item #2\b"}),
        scenario([[{"text": "sys"}]], name="sys", match={"system": "(?i)IMPLEMENTOR"}),
        scenario([[{"text": "any"}]], name="any"),
    ]
    server = serve(book)
    assert play(server, cli_request(role="planner"))[0] == [("text", "planner")]
    assert play(server, cli_request("## Work Item #2 — x"))[0] == [("text", "two")]
    # The <system-reminder> mentions Work Item #999: only the prompt itself is matched.
    assert play(server, cli_request("## Work Item #9"))[0] == [("text", "sys")]
    assert play(server, cli_request(system="You review."))[0] == [("text", "any")]
    assert [r.scenario for r in server.requests] == ["p", "two", "sys", "any"]


def test_templates_take_cwd_and_named_groups(serve: Serve) -> None:
    write = {"file_path": "{cwd}/item-{item}.txt", "content": '{{cwd}} {"a": {"b": 1}}'}
    book = scenario(
        [[{"tool": "Write", "input": write}]],
        match={"prompt": r"Work Item #(?P<item>\d+)"},
    )
    server = serve(book)
    content, _ = play(server, cli_request("## Work Item #42 — t", cwd="/tmp/wt"))
    assert content == [
        (
            "tool_use",
            "Write",
            {"file_path": "/tmp/wt/item-42.txt", "content": '{cwd} {"a": {"b": 1}}'},
        )
    ]
    assert server.requests[0].conversation is not None
    assert server.requests[0].conversation.cwd == "/tmp/wt"


def test_an_unmatched_conversation_gets_a_clear_error_and_is_recorded(serve: Serve) -> None:
    server = serve(scenario([[{"text": "x"}]], name="reviewing", match={"role": "reviewer"}))
    status, data = call(server, cli_request(role="implementor"))
    assert status == 400
    error = json.loads(data)
    assert error["type"] == "error"
    assert error["error"]["type"] == "invalid_request_error"
    assert "no scenario matches" in error["error"]["message"]
    assert "reviewing (role='reviewer')" in error["error"]["message"]
    (record,) = server.requests
    assert (record.kind, record.status) == ("turn", 400)
    assert record.error == error["error"]["message"]


def test_a_template_without_a_cwd_in_the_request_is_an_error(serve: Serve) -> None:
    server = serve(scenario([[{"tool": "Write", "input": {"file_path": "{cwd}/a"}}]]))
    status, data = call(server, cli_request(cwd=None))
    assert status == 400
    assert "Primary working directory" in json.loads(data)["error"]["message"]


def test_a_non_streaming_request_gets_the_same_turn_as_one_message(serve: Serve) -> None:
    server = serve(scenario([[{"text": "hi"}, {"tool": "Bash", "input": {"command": "ls"}}]]))
    status, data = call(server, cli_request(stream=False))
    message = json.loads(data)
    assert status == 200
    assert message["type"] == "message"
    assert message["stop_reason"] == "tool_use"
    assert [b["type"] for b in message["content"]] == ["text", "tool_use"]
    assert message["content"][1]["input"] == {"command": "ls"}


def test_side_requests_are_answered_without_a_scenario(serve: Serve) -> None:
    server = serve(scenario([[{"text": "x"}]], match={"role": "planner"}))
    count_status, count = call(server, cli_request(), path="/v1/messages/count_tokens")
    side = cli_request(stream=False)
    del side["tools"]
    side_status, reply = call(server, side)
    head_status, _ = call(server, method="HEAD", path="/api/hello")
    unknown_status, _ = call(server, {}, path="/v1/complete")
    assert (count_status, side_status, head_status, unknown_status) == (200, 200, 200, 404)
    assert json.loads(count)["input_tokens"] > 0
    assert json.loads(reply)["content"] == [{"type": "text", "text": "OK."}]
    kinds = [(r.method, r.path, r.kind) for r in server.requests]
    assert kinds == [
        ("POST", "/v1/messages/count_tokens", "count_tokens"),
        ("POST", "/v1/messages", "side"),
        ("HEAD", "/api/hello", "probe"),
        ("POST", "/v1/complete", "unknown"),
    ]


def test_requests_record_the_tool_results_the_client_sent(serve: Serve) -> None:
    server = serve(scenario([[{"text": "x"}]]))
    play(server, cli_request(turns_done=2))
    (record,) = server.requests
    assert [(r.tool_use_id, r.content, r.is_error) for r in record.tool_results] == [
        ("toolu_1", "out 1", False)
    ]
    assert record.tools == ("Bash", "StructuredOutput")
    assert (record.model, record.max_tokens, record.stream) == ("claude-test", 32000, True)


def test_concurrent_sessions_each_get_their_own_scenario(serve: Serve) -> None:
    roles: tuple[AgentRole, ...] = ("planner", "implementor", "reviewer")
    server = serve([scenario([[{"text": r}]], name=r, match={"role": r}) for r in roles])
    barrier = threading.Barrier(len(roles) * 3)
    answers: dict[tuple[str, int], Any] = {}

    def session(role: AgentRole, n: int) -> None:
        barrier.wait(timeout=WAIT)
        answers[role, n] = play(server, cli_request(role=role))[0]

    threads = [threading.Thread(target=session, args=(r, n)) for r in roles for n in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=WAIT)
    assert answers == {(r, n): [("text", r)] for r in roles for n in range(3)}


# -- hang


def test_a_hang_holds_until_the_client_goes_and_the_server_serves_on(serve: Serve) -> None:
    server = serve(
        [scenario([[{"hang": True}]], match={"role": "planner"}), scenario([[{"text": "ok"}]])]
    )
    host, port = server.base_url.removeprefix("http://").split(":")
    client = http.client.HTTPConnection(host, int(port), timeout=WAIT)
    client.request("POST", "/v1/messages", body=json.dumps(cli_request(role="planner")))
    assert server.wait_until(lambda s: s.hanging == 1, WAIT)
    client.close()
    assert server.wait_until(lambda s: s.hanging == 0, WAIT)
    assert play(server, cli_request())[0] == [("text", "ok")]
    assert server.requests[0].reply == ("hang",)


def test_close_ends_a_held_stream_after_its_leading_blocks(serve: Serve) -> None:
    server = serve(scenario([[{"text": "thinking it over"}, {"hang": True}]]))
    host, port = server.base_url.removeprefix("http://").split(":")
    client = http.client.HTTPConnection(host, int(port), timeout=WAIT)
    client.request("POST", "/v1/messages", body=json.dumps(cli_request()))
    response = client.getresponse()
    assert server.wait_until(lambda s: s.hanging == 1, WAIT)
    server.close()
    events = parse_sse(response.read())  # the server hung up: the stream ends here
    client.close()
    assert [name for name, _ in events][-1] == "content_block_stop"
    assert assemble(events) == ([("text", "thinking it over")], None)
    assert server.hanging == 0
    assert not [t for t in threading.enumerate() if "process_request" in t.name]
    server.close()  # idempotent


# -- scenario files


@pytest.mark.parametrize(
    ("turns", "extra", "problem"),
    [
        ([[{"say": "x"}]], {}, "turns[0][0]: a block is"),
        ([[{"hang": True}, {"text": "x"}]], {}, "turns[0][0]: a hang must be the last block"),
        ([[{"text": "{nope}"}]], {}, "turns[0][0].text: unknown placeholder {nope}"),
        ([[{"tool": "Bash", "input": {"command": "ls"}, "id": 1}]], {}, "turns[0][0].id: Extra"),
        ([[{"tool": "Bash"}]], {}, "turns[0][0].input: Field required"),
        ([[]], {}, "turns[0]: Tuple should have at least 1 item"),
        ([[{"text": "x"}]], {"match": {"prompt": "("}}, "match.prompt: not a regular expression"),
        ([[{"text": "x"}]], {"after_last": "loop"}, "after_last: Input should be 'end' or"),
        ([[{"text": "x"}]], {"tuning": 1}, "tuning: Extra inputs are not permitted"),
    ],
)
def test_a_bad_scenario_is_refused_naming_the_place(
    turns: list[Any], extra: dict[str, Any], problem: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_scenario({"name": "bad", "turns": turns, **extra}, source="bad.json")
    assert caught.value.key_path == "bad.json"
    assert problem in str(caught.value)


def test_scenario_files_load_by_path_with_their_stem_as_name(tmp_path: Path) -> None:
    (tmp_path / "mine.json").write_text('{"turns": [[{"text": "hi"}]]}')
    (tmp_path / "broken.json").write_text("{")
    assert load_scenario(tmp_path / "mine.json").name == "mine"
    with pytest.raises(ConfigError, match=r"broken\.json: not JSON"):
        load_scenario(tmp_path / "broken.json")
    with pytest.raises(ConfigError, match="no shipped scenario 'nope'; expected one of approve"):
        load_scenario("nope")


def test_a_match_given_at_load_replaces_the_files_and_binds_its_groups() -> None:
    loaded = load_scenario("implement", match=Match(prompt=r"#(?P<item>\d+)"))
    assert loaded.match == Match(prompt=r"#(?P<item>\d+)")
    assert loaded.turns == load_scenario("implement").turns


def test_the_shipped_scenarios_return_outputs_valid_for_their_roles() -> None:
    expected = {"implement", "blocked", "invalid_output", "hang", "denied_bash", "planner"}
    assert expected | {"review", "approve"} <= set(shipped_scenarios())
    outputs = {
        name: output
        for name in shipped_scenarios()
        for output in load_scenario(name).tool_inputs("StructuredOutput")
    }
    valid = {n: validate_output(o["role"], o) for n, o in outputs.items() if n != "invalid_output"}
    assert {
        n: getattr(v, "outcome", None) for n, v in valid.items() if v.role == "implementor"
    } == {
        "implement": "completed",
        "blocked": "blocked",
        "denied_bash": "completed",
    }
    planner = valid["planner"]
    assert planner.role == "planner"
    first, second = planner.create
    assert second.blocked_by == (first.temp_id,)
    review, approve = valid["review"], valid["approve"]
    assert review.role == approve.role == "reviewer"
    assert review.review.verdict == "needs-changes"
    assert review.review.comments
    assert approve.review.verdict == "approve"
    with pytest.raises(InvalidAgentOutputError, match="outcome"):
        validate_output("implementor", outputs["invalid_output"])


# -- end to end with the real claude CLI


def test_the_real_cli_plays_implement_in_a_real_repository(serve: Serve, tmp_path: Path) -> None:
    server = serve(load_scenario("implement"))
    repo = git_repo(tmp_path / "repo")
    run = run_cli(server, cwd=repo, home=tmp_path / "home", role="implementor")
    assert run.returncode == 0, run.stderr
    assert (repo / "test_greeting.py").read_text().startswith("import unittest")
    assert '"""A greeting for name."""' in (repo / "greeting.py").read_text()  # by Edit
    assert [r["is_error"] for r in run.tool_results() if "Ran 1 test" in str(r["content"])] == [
        False,
        False,
    ]
    result = run.result
    assert (result["subtype"], result["is_error"]) == ("success", False)
    output = validate_output("implementor", result["structured_output"])
    assert (output.role, getattr(output, "outcome", None)) == ("implementor", "completed")
    turns = [r for r in server.requests if r.kind == "turn"]
    assert [r.turn for r in turns] == [0, 1, 2, 3, 4]
    assert {r.conversation.cwd for r in turns if r.conversation} == {str(repo)}


@pytest.mark.parametrize(
    ("name", "role"),
    [
        ("blocked", "implementor"),
        ("planner", "planner"),
        ("review", "reviewer"),
        ("approve", "reviewer"),
    ],
)
def test_the_real_cli_returns_each_roles_scripted_output(
    serve: Serve, tmp_path: Path, name: str, role: AgentRole
) -> None:
    server = serve(load_scenario(name))
    run = run_cli(server, cwd=git_repo(tmp_path / "repo"), home=tmp_path / "home", role=role)
    assert run.returncode == 0, run.stderr
    scripted = load_scenario(name).tool_inputs("StructuredOutput")
    assert run.result["structured_output"] == scripted[-1]
    assert validate_output(role, run.result["structured_output"]).role == role


def test_invalid_output_exhausts_the_clis_structured_output_retries(
    serve: Serve, tmp_path: Path
) -> None:
    server = serve(load_scenario("invalid_output"))
    run = run_cli(
        server, cwd=git_repo(tmp_path / "repo"), home=tmp_path / "home", role="implementor"
    )
    assert run.returncode == 1
    assert run.result["subtype"] == "error_max_structured_output_retries"
    assert run.result.get("structured_output") is None
    # Five attempts (agent-protocols.md); each later request carries the schema error back.
    assert [r.turn for r in server.requests if r.kind == "turn"] == [0, 1, 2, 3, 4]
    errors = [t.content for r in server.requests for t in r.tool_results if t.is_error]
    assert len(errors) == 4
    assert all("does not match required schema" in e for e in errors)


def test_denied_bash_is_denied_through_a_real_pretooluse_hook(serve: Serve, tmp_path: Path) -> None:
    hook = tmp_path / "deny.sh"
    verdict = {
        "hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": "deny",
            "permissionDecisionReason": "git push is not allowed",
        }
    }
    write_executable(hook, f"#!/bin/sh\ncat >/dev/null\nprintf '%s' '{json.dumps(verdict)}'\n")
    settings = {
        "hooks": {
            "PreToolUse": [
                {"matcher": "Bash", "hooks": [{"type": "command", "command": str(hook)}]}
            ]
        }
    }
    server = serve(load_scenario("denied_bash"))
    repo = git_repo(tmp_path / "repo")
    extra = ["--setting-sources=", "--settings", json.dumps(settings)]
    run = run_cli(server, cwd=repo, home=tmp_path / "home", role="implementor", extra=extra)
    assert run.returncode == 0, run.stderr
    assert [d["tool_input"]["command"] for d in run.result["permission_denials"]] == [
        "git push origin main"
    ]
    seen = [r for rec in server.requests for r in rec.tool_results if r.is_error]
    assert [r.content for r in seen] == ["PreToolUse:Bash hook error: git push is not allowed"]
    assert (repo / "NOTES.md").is_file()
    assert run.result["structured_output"]["outcome"] == "completed"


def test_an_unmatched_real_session_ends_with_the_servers_error(
    serve: Serve, tmp_path: Path
) -> None:
    server = serve(load_scenario("planner"))
    run = run_cli(server, cwd=git_repo(tmp_path / "repo"), home=tmp_path / "home", role="reviewer")
    assert run.returncode == 1
    assert run.result["is_error"] is True
    assert "no scenario matches" in run.result["result"]
    # The CLI retries a 400 with other request variants; each is refused and recorded.
    assert {(r.kind, r.status) for r in server.requests if r.kind != "probe"} == {("turn", 400)}


def test_concurrent_real_sessions_share_one_server(serve: Serve, tmp_path: Path) -> None:
    server = serve([load_scenario("planner"), load_scenario("implement"), load_scenario("approve")])
    roles: tuple[AgentRole, ...] = ("planner", "implementor", "reviewer")
    processes = [
        start_cli(server, cwd=git_repo(tmp_path / role), home=tmp_path / f"home-{role}", role=role)
        for role in roles
    ]
    try:
        runs = [finish(process) for process in processes]
    finally:
        for process in processes:
            kill(process)
    assert [run.returncode for run in runs] == [0, 0, 0], [run.stderr for run in runs]
    assert [run.result["structured_output"]["role"] for run in runs] == list(roles)
    assert (tmp_path / "implementor" / "greeting.py").is_file()
    assert {r.scenario for r in server.requests if r.kind == "turn"} == {
        "planner",
        "implement",
        "approve",
    }


def test_a_killed_cli_leaves_the_hanging_server_serving(serve: Serve, tmp_path: Path) -> None:
    server = serve(
        [load_scenario("hang", match=Match(role="implementor")), load_scenario("approve")]
    )
    process = start_cli(
        server, cwd=git_repo(tmp_path / "repo"), home=tmp_path / "home", role="implementor"
    )
    try:
        assert server.wait_until(lambda s: s.hanging == 1, WAIT * 3), process.poll()
    finally:
        kill(process)
    assert server.wait_until(lambda s: s.hanging == 0, WAIT)
    run = run_cli(server, cwd=git_repo(tmp_path / "next"), home=tmp_path / "home", role="reviewer")
    assert run.result["structured_output"]["review"]["verdict"] == "approve"

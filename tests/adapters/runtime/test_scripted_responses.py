"""The scripted model's OpenAI Responses side (``POST /v1/responses``), as ``codex exec`` uses it.

Requests are shaped like codex 0.169.0's (agent-protocols.md §4): ``instructions``, then
``input`` items (a developer message, the ``<environment_context>`` user message carrying
``<cwd>``, the task prompt, then earlier turns and their tool outputs), the offered ``tools``
and, with ``--output-schema``, ``text.format`` holding the strict schema.
"""

from __future__ import annotations

import http.client
import json
import re
import subprocess
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from adapters.runtime.scripted_model import (
    Match,
    Scenario,
    ScriptedModelServer,
    load_scenario,
    parse_scenario,
)
from adapters.runtime.scripted_model.responses_items import add_file_patch, update_file_patch
from adapters.runtime.scripted_model.responses_wire import codex_overrides
from domain.models import AgentRole
from domain.results import output_schema, validate_output
from tests.adapters.runtime.scripted_cli import WAIT, call, parse_sse
from tests.fakes.codex_cli_fixture import FakeCodex

Serve = Callable[[Scenario | Sequence[Scenario]], ScriptedModelServer]
Event = tuple[str, dict[str, Any]]

EXEC_COMMAND = {"type": "function", "name": "exec_command", "parameters": {"type": "object"}}
SHELL = {"type": "function", "name": "shell", "parameters": {"type": "object"}}
SHELL_COMMAND = {"type": "function", "name": "shell_command", "parameters": {"type": "object"}}
APPLY_PATCH = {"type": "custom", "name": "apply_patch", "format": {"type": "grammar"}}
APPLY_PATCH_FUNCTION = {"type": "function", "name": "apply_patch", "parameters": {}}


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


def user(text: str) -> dict[str, Any]:
    return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}


def codex_request(
    prompt: str = "Do the work item.",
    *,
    turns_done: int = 0,
    role: AgentRole | None = "implementor",
    cwd: str | None = "/srv/repo",
    instructions: str = "You are Codex, a coding agent.",
    tools: Sequence[dict[str, Any]] = (EXEC_COMMAND, APPLY_PATCH),
    stream: bool = True,
) -> dict[str, Any]:
    developer = {
        "type": "message",
        "role": "developer",
        "content": [{"type": "input_text", "text": "<permissions instructions>never"}],
    }
    items: list[dict[str, Any]] = [developer]
    if cwd is not None:
        items.append(user(f"<environment_context>\n  <cwd>{cwd}</cwd>\n</environment_context>"))
    items.append(user(prompt))
    for i in range(turns_done):
        # One earlier turn: a message and two calls, then their outputs.
        items.append(
            {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": f"turn {i}"}],
            }
        )
        for n in range(2):
            call_id = f"call_{i}_{n}"
            items.append({"type": "function_call", "name": "shell", "call_id": call_id})
        for n in range(2):
            output = {"type": "function_call_output", "call_id": f"call_{i}_{n}"}
            items.append({**output, "output": f"out {i} {n}"})
    body: dict[str, Any] = {
        "model": "gpt-test",
        "instructions": instructions,
        "input": items,
        "tools": list(tools),
        "stream": stream,
        "store": False,
    }
    if role is not None:
        schema = output_schema(role)
        body["text"] = {
            "format": {
                "type": "json_schema",
                "strict": True,
                "name": "codex_output_schema",
                "schema": schema,
            }
        }
    return body


def check_grammar(events: list[Event]) -> list[dict[str, Any]]:
    """Assert the OpenAI stream grammar; return the output items rebuilt from the deltas."""
    assert [data["type"] for _, data in events] == [name for name, _ in events]
    assert [data["sequence_number"] for _, data in events] == list(range(len(events)))
    assert events[0][0] == "response.created"
    assert events[0][1]["response"]["status"] == "in_progress"
    response_id = events[0][1]["response"]["id"]
    rebuilt: dict[int, dict[str, Any]] = {}
    done: dict[int, dict[str, Any]] = {}
    for name, data in events[1:]:
        index: int = data.get("output_index", -1)
        if name == "response.output_item.added":
            assert index == len(rebuilt), "items open in order"
            assert index not in done
            rebuilt[index] = dict(data["item"])
            assert rebuilt[index]["status"] == "in_progress"
        elif name == "response.content_part.added":
            rebuilt[index]["content"].append(dict(data["part"]))
        elif name == "response.output_text.delta":
            rebuilt[index]["content"][data["content_index"]]["text"] += data["delta"]
        elif name == "response.function_call_arguments.delta":
            rebuilt[index]["arguments"] += data["delta"]
        elif name == "response.custom_tool_call_input.delta":
            rebuilt[index]["input"] += data["delta"]
        elif name == "response.output_item.done":
            assert index in rebuilt
            assert index not in done
            done[index] = data["item"]
            assert data["item"] == {**rebuilt[index], "status": "completed"}
        elif name.endswith(".done"):
            assert data["item_id"] == rebuilt[index]["id"]
        elif name == "response.completed":
            assert (name, data) == events[-1]
            response = data["response"]
            assert (response["id"], response["status"]) == (response_id, "completed")
            assert response["output"] == [done[i] for i in sorted(done)]
        else:
            assert name == "response.in_progress", name
    assert sorted(done) == sorted(rebuilt)
    return [done[i] for i in sorted(done)]


def play(server: ScriptedModelServer, body: dict[str, Any]) -> tuple[list[Event], list[Any]]:
    status, data = call(server, body, path="/v1/responses")
    assert status == 200, data
    events = parse_sse(data)
    return events, check_grammar(events)


def summary(items: list[dict[str, Any]]) -> list[Any]:
    out: list[Any] = []
    for item in items:
        if item["type"] == "message":
            out.append(("message", item["content"][0]["text"]))
        elif item["type"] == "function_call":
            out.append(("function_call", item["name"], json.loads(item["arguments"])))
        else:
            out.append((item["type"], item["name"], item["input"]))
    return out


def apply_codex_patch(root: Path, patch: str) -> None:
    """A small codex patch applier: Add File and one-or-more-hunk Update File, whole lines."""
    lines = patch.splitlines()
    assert lines[0] == "*** Begin Patch", patch
    assert lines[-1] == "*** End Patch", patch
    i = 1
    while i < len(lines) - 1:
        header = re.fullmatch(r"\*\*\* (Add|Update) File: (.+)", lines[i])
        assert header, lines[i]
        kind, path = header.groups()
        assert not Path(path).is_absolute()
        assert ".." not in Path(path).parts
        target = root / path
        i += 1
        body: list[str] = []
        while i < len(lines) - 1 and not lines[i].startswith("*** "):
            body.append(lines[i])
            i += 1
        if kind == "Add":
            assert all(line.startswith("+") for line in body)
            target.write_text("".join(line[1:] + "\n" for line in body))
            continue
        text = target.read_text().splitlines()
        hunks: list[list[str]] = []
        for line in body:
            if line.startswith("@@"):
                hunks.append([])
            else:
                hunks[-1].append(line)
        for hunk in hunks:
            old = [line[1:] for line in hunk if line[0] in " -"]
            new = [line[1:] for line in hunk if line[0] in " +"]
            at = next(n for n in range(len(text)) if text[n : n + len(old)] == old)
            text[at : at + len(old)] = new
        target.write_text("".join(line + "\n" for line in text))


# -- wire shapes


def test_a_turn_streams_message_function_call_and_apply_patch_in_the_openai_grammar(
    serve: Serve,
) -> None:
    write = {"file_path": "{cwd}/pkg/a.py", "content": "x = 1\n" * 20}
    server = serve(
        scenario(
            [
                [
                    {"text": "Let me look. " * 10},
                    {"tool": "Bash", "input": {"command": "ls -la", "description": "List"}},
                    {"tool": "Write", "input": write},
                ]
            ]
        )
    )
    events, items = play(server, codex_request(cwd="/srv/repo"))
    assert summary(items) == [
        ("message", "Let me look. " * 10),
        ("function_call", "exec_command", {"cmd": "ls -la"}),
        ("custom_tool_call", "apply_patch", add_file_patch("pkg/a.py", "x = 1\n" * 20)),
    ]
    names = [name for name, _ in events]
    assert names.count("response.output_text.delta") > 1  # long values arrive in pieces
    assert names.count("response.custom_tool_call_input.delta") > 1
    assert len({item["call_id"] for item in items[1:]}) == 2
    assert server.requests[0].reply == (
        "text",
        "function_call:exec_command",
        "custom_tool_call:apply_patch",
    )


def test_response_completed_carries_usage(serve: Serve) -> None:
    server = serve(scenario([[{"text": "hi"}]]))
    events, _ = play(server, codex_request())
    usage = events[-1][1]["response"]["usage"]
    assert usage["input_tokens"] > 0
    assert usage["output_tokens"] > 0
    assert usage["total_tokens"] == usage["input_tokens"] + usage["output_tokens"]
    assert usage["cache_write_input_tokens"] == 0
    assert usage["reasoning_output_tokens"] == 0
    assert usage["input_tokens_details"] == {"cached_tokens": 0}


@pytest.mark.parametrize(
    ("tools", "call"),
    [
        ((EXEC_COMMAND, SHELL), ("exec_command", {"cmd": "make test"})),
        ((SHELL_COMMAND, SHELL), ("shell_command", {"command": "make test"})),
        ((SHELL,), ("shell", {"command": ["bash", "-lc", "make test"]})),
        ((APPLY_PATCH,), ("shell", {"command": ["bash", "-lc", "make test"]})),
    ],
)
def test_bash_becomes_the_shell_function_the_request_offers(
    serve: Serve, tools: tuple[dict[str, Any], ...], call: tuple[str, Any]
) -> None:
    server = serve(scenario([[{"tool": "Bash", "input": {"command": "make test"}}]]))
    _, items = play(server, codex_request(tools=tools))
    assert summary(items) == [("function_call", *call)]


def test_apply_patch_offered_as_a_function_gets_a_function_call(serve: Serve) -> None:
    server = serve(scenario([[{"tool": "Write", "input": {"file_path": "b.txt", "content": "b"}}]]))
    _, items = play(server, codex_request(tools=(SHELL, APPLY_PATCH_FUNCTION)))
    assert summary(items) == [
        ("function_call", "apply_patch", {"input": add_file_patch("b.txt", "b\n")})
    ]


def test_other_tools_pass_through_as_function_calls(serve: Serve) -> None:
    server = serve(scenario([[{"tool": "update_plan", "input": {"plan": [{"step": "a"}]}}]]))
    _, items = play(server, codex_request())
    assert summary(items) == [("function_call", "update_plan", {"plan": [{"step": "a"}]})]


def test_a_non_streaming_request_gets_one_response_object(serve: Serve) -> None:
    server = serve(scenario([[{"text": "hi"}, {"tool": "Bash", "input": {"command": "ls"}}]]))
    status, data = call(server, codex_request(stream=False), path="/v1/responses")
    response = json.loads(data)
    assert status == 200
    assert (response["object"], response["status"]) == ("response", "completed")
    assert summary(response["output"]) == [
        ("message", "hi"),
        ("function_call", "exec_command", {"cmd": "ls"}),
    ]
    assert response["usage"]["output_tokens"] > 0


# -- turn selection and matching


def test_the_turn_played_counts_earlier_model_turns_statelessly(serve: Serve) -> None:
    server = serve(scenario([[{"text": "first"}], [{"text": "second"}], [{"text": "third"}]]))
    played = [summary(play(server, codex_request(turns_done=n))[1]) for n in (1, 0, 2, 1)]
    assert played == [
        [("message", "second")],
        [("message", "first")],
        [("message", "third")],
        [("message", "second")],
    ]
    assert [r.turn for r in server.requests] == [1, 0, 2, 1]
    # The tool outputs after the last turn are recorded as its results.
    assert [(t.tool_use_id, t.content) for t in server.requests[0].tool_results] == [
        ("call_0_0", "out 0 0"),
        ("call_0_1", "out 0 1"),
    ]


def test_a_turns_items_count_once_whatever_their_kinds(serve: Serve) -> None:
    server = serve(scenario([[{"text": "a"}], [{"text": "b"}], [{"text": "c"}]]))
    body = codex_request()
    body["input"] += [
        {"type": "reasoning", "summary": []},
        {"type": "message", "role": "assistant", "content": []},
        {"type": "custom_tool_call", "name": "apply_patch", "call_id": "c1", "input": ""},
        {"type": "custom_tool_call_output", "call_id": "c1", "output": "Done!"},
        {"type": "function_call", "name": "shell", "call_id": "c2", "arguments": "{}"},
        {
            "type": "function_call_output",
            "call_id": "c2",
            "output": {"content": "no", "success": False},
        },
    ]
    assert summary(play(server, body)[1]) == [("message", "c")]
    (record,) = server.requests
    assert [(t.tool_use_id, t.content, t.is_error) for t in record.tool_results] == [
        ("c2", "no", True)
    ]


def test_a_lone_hang_sends_nothing_until_the_client_goes(serve: Serve) -> None:
    server = serve(
        [scenario([[{"hang": True}]], match={"role": "planner"}), scenario([[{"text": "ok"}]])]
    )
    host, port = server.base_url.removeprefix("http://").split(":")
    client = http.client.HTTPConnection(host, int(port), timeout=WAIT)
    client.request("POST", "/v1/responses", body=json.dumps(codex_request(role="planner")))
    assert server.wait_until(lambda s: s.hanging == 1, WAIT)
    client.close()
    assert server.wait_until(lambda s: s.hanging == 0, WAIT)
    assert summary(play(server, codex_request())[1]) == [("message", "ok")]
    assert server.requests[0].reply == ("hang",)


def test_past_the_last_turn_final_text_or_repeat(serve: Serve) -> None:
    server = serve(
        [
            scenario([[{"text": "a"}]], name="end", match={"role": "planner"}, final_text="Bye."),
            scenario([[{"text": "a"}], [{"text": "again"}]], after_last="repeat"),
        ]
    )
    assert summary(play(server, codex_request(turns_done=4, role="planner"))[1]) == [
        ("message", "Bye.")
    ]
    assert summary(play(server, codex_request(turns_done=4))[1]) == [("message", "again")]


def test_match_rules_read_instructions_first_user_input_and_the_schema_role(
    serve: Serve,
) -> None:
    book = [
        scenario([[{"text": "planner"}]], name="p", match={"role": "planner"}),
        scenario([[{"text": "{item}"}]], name="two", match={"prompt": r"Work Item #(?P<item>\d+)"}),
        scenario([[{"text": "sys"}]], name="sys", match={"system": "(?i)REVIEWER"}),
        scenario([[{"text": "any"}]], name="any"),
    ]
    server = serve(book)
    assert summary(play(server, codex_request(role="planner"))[1]) == [("message", "planner")]
    assert summary(play(server, codex_request("## Work Item #7"))[1]) == [("message", "7")]
    # The environment context is not the prompt: its <cwd> never matches the prompt rule.
    body = codex_request(cwd="/wt/Work Item #9", instructions="You are the reviewer.")
    assert summary(play(server, body)[1]) == [("message", "sys")]
    assert summary(play(server, codex_request(role=None))[1]) == [("message", "any")]
    assert [r.scenario for r in server.requests] == ["p", "two", "sys", "any"]
    conversation = server.requests[2].conversation
    assert conversation is not None
    assert (conversation.cwd, conversation.prompt) == ("/wt/Work Item #9", "Do the work item.")


def test_a_plain_string_input_is_the_prompt(serve: Serve) -> None:
    server = serve(scenario([[{"text": "matched"}]], match={"prompt": "^hello$"}))
    body = {**codex_request(), "input": "hello"}
    assert summary(play(server, body)[1]) == [("message", "matched")]


def test_an_unmatched_or_unrenderable_request_gets_an_openai_error(serve: Serve) -> None:
    server = serve(
        [
            scenario([[{"text": "x"}]], name="reviewing", match={"role": "reviewer"}),
            scenario([[{"tool": "Edit", "input": {"file_path": "a"}}]], match={"role": "planner"}),
        ]
    )
    status, data = call(server, codex_request(role="implementor"), path="/v1/responses")
    assert status == 400
    error = json.loads(data)["error"]
    assert error["type"] == "invalid_request_error"
    assert "reviewing (role='reviewer')" in error["message"]
    status, data = call(server, codex_request(role="planner"), path="/v1/responses")
    assert status == 400
    assert "needs a string 'old_string'" in json.loads(data)["error"]["message"]
    assert [(r.kind, r.status) for r in server.requests] == [("turn", 400), ("turn", 400)]
    assert server.requests[0].error == error["message"]


def test_a_request_without_tools_is_a_side_request(serve: Serve) -> None:
    server = serve(scenario([[{"text": "x"}]], match={"role": "planner"}))
    _, items = play(server, codex_request(tools=()))
    assert summary(items) == [("message", "OK.")]
    assert server.requests[0].kind == "side"


def test_a_hang_holds_the_response_until_the_client_goes(serve: Serve) -> None:
    server = serve(scenario([[{"text": "thinking"}, {"hang": True}]]))
    host, port = server.base_url.removeprefix("http://").split(":")
    client = http.client.HTTPConnection(host, int(port), timeout=WAIT)
    client.request("POST", "/v1/responses", body=json.dumps(codex_request()))
    response = client.getresponse()
    assert server.wait_until(lambda s: s.hanging == 1, WAIT)
    server.close()
    events = parse_sse(response.read())
    client.close()
    assert events[-1][0] == "response.output_item.done"  # no response.completed
    assert summary(check_grammar(events)) == [("message", "thinking")]
    assert server.requests[0].reply == ("text", "hang")


# -- StructuredOutput and the shipped scenarios


@pytest.mark.parametrize(
    ("name", "role"),
    [("planner", "planner"), ("review", "reviewer"), ("approve", "reviewer")],
)
def test_structured_output_is_a_final_message_holding_the_json(
    serve: Serve, name: str, role: AgentRole
) -> None:
    server = serve(load_scenario(name))
    _, items = play(server, codex_request(role=role))
    last = items[-1]
    assert last["type"] == "message"
    output = json.loads(last["content"][0]["text"])
    assert output == load_scenario(name).tool_inputs("StructuredOutput")[-1]
    assert validate_output(role, output).role == role


def test_implement_plays_through_and_its_patches_apply(serve: Serve, tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    server = serve(load_scenario("implement", match=Match(role="implementor")))
    played = []
    for turn in range(6):
        _, items = play(server, codex_request(turns_done=turn, cwd=str(repo)))
        played.append(summary(items))
        for item in items:
            if item["type"] == "custom_tool_call":
                apply_codex_patch(repo, item["input"])
    kinds = [[entry[0] if entry[0] == "message" else entry[1] for entry in t] for t in played]
    assert kinds == [
        ["message", "apply_patch", "apply_patch"],
        ["exec_command"],
        ["message", "apply_patch"],
        ["exec_command"],
        ["message"],
        ["message"],
    ]
    assert played[1] == [
        ("function_call", "exec_command", {"cmd": "python3 -B -m unittest -v test_greeting"})
    ]
    assert (repo / "greeting.py").read_text() == (
        'def greet(name: str) -> str:\n    """A greeting for name."""\n'
        '    return "Hello, " + name + "!"\n'
    )
    assert (repo / "test_greeting.py").read_text().startswith("import unittest\n")
    output = validate_output("implementor", json.loads(played[4][0][1]))
    assert getattr(output, "outcome", None) == "completed"
    assert played[5] == [("message", "Done.")]


def test_update_patches_replace_whole_lines(tmp_path: Path) -> None:
    (tmp_path / "f.txt").write_text("a\nb\nc\n")
    apply_codex_patch(tmp_path, update_file_patch("f.txt", "b\n", "B1\nB2\n"))
    assert (tmp_path / "f.txt").read_text() == "a\nB1\nB2\nc\n"
    assert update_file_patch("f.txt", "b", "c") == (
        "*** Begin Patch\n*** Update File: f.txt\n@@\n-b\n+c\n*** End Patch\n"
    )


def test_codex_overrides_parse_as_codex_config(tmp_path: Path) -> None:
    # The fake codex parses -c values as TOML, as the real one does.
    fake = FakeCodex.install(tmp_path / "fake")
    argv = [str(fake.path), "exec", "--skip-git-repo-check"]
    for override in codex_overrides("http://127.0.0.1:4321"):
        argv += ["-c", override]
    done = subprocess.run(
        [*argv, "x"],
        cwd=tmp_path,
        env={"PATH": "/usr/bin:/bin", **fake.env("no_output")},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=WAIT,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert fake.records()[0]["config"] == {
        "model_provider": "scripted",
        "model_providers.scripted": {
            "name": "scripted",
            "base_url": "http://127.0.0.1:4321/v1",
            "wire_api": "responses",
        },
    }

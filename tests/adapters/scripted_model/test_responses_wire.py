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

from adapters.scripted_model import (
    Match,
    Scenario,
    ScriptedModelServer,
    load_scenario,
    parse_scenario,
)
from adapters.scripted_model.responses_items import (
    add_file_patch,
    apply_patch_heredoc,
    update_file_patch,
)
from adapters.scripted_model.responses_wire import (
    codex_overrides,
    offered_tool_names,
    offered_tools,
)
from domain.models import AgentRole
from domain.results import output_schema, validate_output
from tests.adapters.scripted_model.scripted_cli import WAIT, call, parse_sse
from tests.fakes.codex_cli_fixture import FakeCodex

Serve = Callable[[Scenario | Sequence[Scenario]], ScriptedModelServer]
Event = tuple[str, dict[str, Any]]

EXEC_COMMAND = {"type": "function", "name": "exec_command", "parameters": {"type": "object"}}
SHELL = {"type": "function", "name": "shell", "parameters": {"type": "object"}}
SHELL_COMMAND = {"type": "function", "name": "shell_command", "parameters": {"type": "object"}}
APPLY_PATCH = {"type": "custom", "name": "apply_patch", "format": {"type": "grammar"}}
APPLY_PATCH_FUNCTION = {"type": "function", "name": "apply_patch", "parameters": {}}
# codex 0.169.0's code mode (its default model): no top-level tools, one freeform JavaScript
# ``exec`` tool (nested tools.exec_command, tools.apply_patch …) in an additional_tools item.
EXEC = {"type": "custom", "name": "exec", "format": {"type": "grammar", "syntax": "lark"}}
WAIT_TOOL = {"type": "function", "name": "wait", "parameters": {"type": "object"}}
SLEEP = {"type": "function", "name": "sleep", "parameters": {"type": "object"}}


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


def code_mode_request(**kw: Any) -> dict[str, Any]:
    """A request as codex's code mode sends it: the tools come in an ``additional_tools``
    input item, in namespaces, and there are no top-level ``tools``."""
    body = codex_request(tools=(), **kw)
    del body["tools"]
    offered = {
        "type": "additional_tools",
        "role": "developer",
        "tools": [
            {"type": "namespace", "name": "functions", "tools": [EXEC, WAIT_TOOL]},
            {"type": "namespace", "name": "clock", "tools": [SLEEP]},
        ],
    }
    body["input"].insert(0, offered)
    return body


def js_strings(source: str) -> list[str]:
    """The JSON string literals of a scripted ``exec`` source, decoded."""
    return [json.loads(m) for m in re.findall(r'"(?:[^"\\]|\\.)*"', source)]


def patch_of(item: dict[str, Any]) -> str | None:
    """The codex patch an output item carries, whichever way it goes (None: not a patch)."""
    if item["type"] == "custom_tool_call" and item["name"] == "apply_patch":
        return str(item["input"])
    if item["type"] == "custom_tool_call" and item["name"] == "exec":
        if "tools.apply_patch(" not in item["input"]:
            return None
        (patch,) = js_strings(item["input"])
        return patch
    if item["type"] == "function_call":
        arguments = json.loads(item["arguments"])
        if item["name"] == "apply_patch":
            return str(arguments["input"])
        command = arguments.get("cmd") or arguments.get("command")
        if isinstance(command, list):
            command = command[-1]
        heredoc = re.fullmatch(r"apply_patch <<'(\w+)'\n(.*\n)\1", command, re.DOTALL)
        return heredoc.group(2) if heredoc else None
    return None


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


EDIT = {"file_path": "/srv/repo/a.py", "old_string": "x = 1\n", "new_string": "x = 2\n"}


@pytest.mark.parametrize(
    ("tools", "shell", "wrap"),
    [
        ((EXEC_COMMAND, SHELL), "exec_command", lambda c: {"cmd": c}),
        ((SHELL_COMMAND,), "shell_command", lambda c: {"command": c}),
        ((SHELL, WAIT_TOOL), "shell", lambda c: {"command": ["bash", "-lc", c]}),
    ],
)
def test_without_an_apply_patch_tool_patches_are_heredocs_through_the_shell(
    serve: Serve, tools: tuple[dict[str, Any], ...], shell: str, wrap: Callable[[str], Any]
) -> None:
    # codex 0.169.0 offers no apply_patch tool to a custom provider, but intercepts
    # ``apply_patch <<'PATCH'`` run through its shell and applies the patch itself.
    write = {"file_path": "/srv/repo/a.py", "content": "x = 1\n"}
    server = serve(scenario([[{"tool": "Write", "input": write}, {"tool": "Edit", "input": EDIT}]]))
    _, items = play(server, codex_request(tools=tools, cwd="/srv/repo"))
    added = (
        "apply_patch <<'PATCH'\n*** Begin Patch\n*** Add File: a.py\n+x = 1\n*** End Patch\nPATCH"
    )
    updated = apply_patch_heredoc(update_file_patch("a.py", "x = 1\n", "x = 2\n"))
    assert summary(items) == [
        ("function_call", shell, wrap(added)),
        ("function_call", shell, wrap(updated)),
    ]
    assert [patch_of(item) for item in items] == [
        add_file_patch("a.py", "x = 1\n"),
        update_file_patch("a.py", "x = 1\n", "x = 2\n"),
    ]
    assert server.requests[0].reply == (f"function_call:{shell}", f"function_call:{shell}")


def test_the_heredoc_delimiter_is_no_line_of_the_patch() -> None:
    assert apply_patch_heredoc("*** Begin Patch\n*** End Patch\n") == (
        "apply_patch <<'PATCH'\n*** Begin Patch\n*** End Patch\nPATCH"
    )
    patch = "*** Begin Patch\nPATCH\nPATCH_1\n*** End Patch\n"
    assert apply_patch_heredoc(patch) == f"apply_patch <<'PATCH_2'\n{patch}PATCH_2"


def test_offered_tools_come_from_tools_and_additional_tools_with_namespaces_flattened() -> None:
    assert offered_tool_names(code_mode_request()) == ("exec", "wait", "sleep")
    body = codex_request(
        tools=(
            EXEC_COMMAND,
            {"type": "namespace", "name": "multi_agent_v1", "tools": [WAIT_TOOL]},
            {"type": "web_search", "external_web_access": False},  # no name
        )
    )
    assert offered_tool_names(body) == ("exec_command", "wait")
    assert [t["type"] for t in offered_tools(body)] == ["function", "function", "web_search"]
    assert offered_tool_names(codex_request(tools=())) == ()


def test_in_code_mode_bash_and_patches_become_exec_javascript(serve: Serve) -> None:
    command = 'printf "%s\\n" \'a "quoted" line\'\nls -la'
    write = {"file_path": "/srv/repo/pkg/a.py", "content": 'x = "1"\n'}
    server = serve(
        scenario(
            [
                [
                    {"text": "Working."},
                    {"tool": "Bash", "input": {"command": command, "description": "x"}},
                    {"tool": "Write", "input": write},
                    {"tool": "Edit", "input": EDIT},
                ]
            ]
        )
    )
    _, items = play(server, code_mode_request(cwd="/srv/repo"))
    assert server.requests[0].kind == "turn"  # not a tool-less side request
    assert [(item["type"], item.get("name")) for item in items] == [
        ("message", None),
        ("custom_tool_call", "exec"),
        ("custom_tool_call", "exec"),
        ("custom_tool_call", "exec"),
    ]
    run, add, edit = (item["input"] for item in items[1:])
    assert run == (
        f"const r = await tools.exec_command({{cmd: {json.dumps(command)}}});\n"
        "text(JSON.stringify(r));\n"
    )
    assert js_strings(run) == [command]
    assert add.startswith("const r = await tools.apply_patch(")
    assert js_strings(add) == [add_file_patch("pkg/a.py", 'x = "1"\n')]
    assert js_strings(edit) == [update_file_patch("a.py", "x = 1\n", "x = 2\n")]
    assert server.requests[0].reply == ("text", *["custom_tool_call:exec"] * 3)


def test_code_mode_turns_and_exec_results_are_read(serve: Serve) -> None:
    server = serve(scenario([[{"text": "a"}], [{"text": "b"}], [{"text": "c"}]]))
    body = code_mode_request()

    def output(call_id: str, head: str, text: str) -> dict[str, Any]:
        # As codex 0.169.0 returns an exec call's result: a header part, then the text(...)s.
        parts = [
            {"type": "input_text", "text": f"{head}\nWall time 0.1 seconds\nOutput:\n"},
            {"type": "input_text", "text": text},
        ]
        return {"type": "custom_tool_call_output", "call_id": call_id, "output": parts}

    body["input"] += [
        {"type": "message", "role": "assistant", "content": []},
        {"type": "custom_tool_call", "name": "exec", "call_id": "e1", "input": "x"},
        {"type": "custom_tool_call", "name": "exec", "call_id": "e2", "input": "y"},
        output("e1", "Script completed", '{"exit_code":0,"output":"OK\\n"}'),
        output("e2", "Script failed", "Script error:\napply_patch verification failed"),
    ]
    assert summary(play(server, body)[1]) == [("message", "b")]
    (record,) = server.requests
    assert (record.kind, record.turn) == ("turn", 1)
    assert [(t.tool_use_id, t.is_error) for t in record.tool_results] == [
        ("e1", False),
        ("e2", True),
    ]
    assert record.tool_results[0].content.endswith('{"exit_code":0,"output":"OK\\n"}')


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


@pytest.mark.parametrize(
    ("request_for", "call"),
    [
        (lambda **kw: codex_request(tools=(EXEC_COMMAND, WAIT_TOOL), **kw), "exec_command"),
        (code_mode_request, "exec"),
    ],
    ids=["heredoc", "code-mode"],
)
def test_implement_plays_through_without_an_apply_patch_tool(
    serve: Serve, tmp_path: Path, request_for: Callable[..., dict[str, Any]], call: str
) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    server = serve(load_scenario("implement", match=Match(role="implementor")))
    for turn in range(6):
        _, items = play(server, request_for(turns_done=turn, cwd=str(repo)))
        for item in items:
            patch = patch_of(item)
            if patch is not None:
                apply_codex_patch(repo, patch)
    tool = f"custom_tool_call:{call}" if call == "exec" else f"function_call:{call}"
    assert [r.reply for r in server.requests] == [
        ("text", tool, tool),
        (tool,),
        ("text", tool),
        (tool,),
        ("text",),
        ("text",),
    ]
    assert [r.turn for r in server.requests] == list(range(6))
    assert (repo / "greeting.py").read_text() == (
        'def greet(name: str) -> str:\n    """A greeting for name."""\n'
        '    return "Hello, " + name + "!"\n'
    )
    assert (repo / "test_greeting.py").read_text().startswith("import unittest\n")


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

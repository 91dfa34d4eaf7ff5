"""Talk to a scripted model the way the ``claude`` CLI does, or run the real CLI against it.

``cli_request``/``call``/``play`` are a plain HTTP client sending requests shaped like the
CLI's (observed on 2.1.330). ``run_cli``/``start_cli`` run the real CLI bundled in the
claude-agent-sdk wheel, found without importing ``claude_agent_sdk`` (only the SDK adapter
may); each runs in its own session so a test can kill it and whatever it started at once.
"""

from __future__ import annotations

import contextlib
import http.client
import importlib.util
import json
import os
import signal
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from adapters.scripted_model import ScriptedModelServer
from domain.models import AgentRole
from domain.results import output_schema

WAIT = 30.0  # seconds: a bound on waits for server threads and HTTP replies, never a sleep
# Generous: a loaded 2-core machine starts the CLI (a 380 MB binary) in seconds, not 0.5 s.
CLI_TIMEOUT = 90.0


def claude_cli() -> Path:
    spec = importlib.util.find_spec("claude_agent_sdk")
    assert spec is not None, "claude-agent-sdk is not installed"
    assert spec.submodule_search_locations, "claude_agent_sdk is not a package"
    cli = Path(spec.submodule_search_locations[0]) / "_bundled" / "claude"
    assert cli.is_file(), f"no bundled claude CLI at {cli}"
    return cli


def git_repo(path: Path) -> Path:
    path.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", "-b", "main"], cwd=path, check=True)
    return path


def cli_env(server: ScriptedModelServer, home: Path) -> dict[str, str]:
    """A minimal environment: the server, a throwaway HOME, and root allowed to bypass."""
    home.mkdir(parents=True, exist_ok=True)
    # The venv's bin first: the scenarios' Bash commands run ``python3``.
    path = os.pathsep.join([str(Path(sys.executable).parent), "/usr/bin", "/bin"])
    return {"PATH": path, "HOME": str(home), "IS_SANDBOX": "1", **server.client_env()}


def start_cli(
    server: ScriptedModelServer,
    *,
    cwd: Path,
    home: Path,
    role: AgentRole,
    prompt: str = "Do the work item.",
    extra: Sequence[str] = (),
) -> subprocess.Popen[str]:
    argv = [
        str(claude_cli()),
        "-p",
        prompt,
        "--output-format",
        "stream-json",
        "--verbose",
        "--json-schema",
        json.dumps(output_schema(role)),
        "--permission-mode",
        "bypassPermissions",
        *extra,
    ]
    return subprocess.Popen(
        argv,
        cwd=cwd,
        env=cli_env(server, home),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


@dataclass(frozen=True)
class CliRun:
    returncode: int
    events: tuple[dict[str, Any], ...]
    stderr: str

    @property
    def result(self) -> dict[str, Any]:
        results = [e for e in self.events if e.get("type") == "result"]
        assert results, f"no result line (exit {self.returncode}); stderr: {self.stderr[-2000:]}"
        return results[-1]

    def tool_results(self) -> list[dict[str, Any]]:
        return [
            block
            for event in self.events
            if event.get("type") == "user"
            for block in event["message"]["content"]
            if isinstance(block, dict) and block.get("type") == "tool_result"
        ]


def finish(process: subprocess.Popen[str], timeout: float = CLI_TIMEOUT) -> CliRun:
    """Wait for the CLI to end and parse its stream-json; kill it if it outlives ``timeout``."""
    try:
        stdout, stderr = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        kill(process)
        raise
    events = tuple(json.loads(line) for line in stdout.splitlines() if line.startswith("{"))
    return CliRun(process.returncode, events, stderr)


def run_cli(
    server: ScriptedModelServer,
    *,
    cwd: Path,
    home: Path,
    role: AgentRole,
    prompt: str = "Do the work item.",
    extra: Sequence[str] = (),
) -> CliRun:
    return finish(start_cli(server, cwd=cwd, home=home, role=role, prompt=prompt, extra=extra))


def kill(process: subprocess.Popen[str]) -> None:
    """SIGKILL the CLI's whole session and reap it."""
    if process.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
    process.communicate(timeout=CLI_TIMEOUT)


# -- a plain HTTP client speaking like the CLI


def cli_request(
    prompt: str = "Do the work item.",
    *,
    turns_done: int = 0,
    role: AgentRole | None = "implementor",
    cwd: str | None = "/srv/repo",
    system: str = "You are the implementor.",
    stream: bool = True,
) -> dict[str, Any]:
    """A request shaped like the CLI's (observed): reminders, then the prompt, then the env."""
    messages: list[dict[str, Any]] = [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "<system-reminder>\nWork Item #999\n</system-reminder>"},
                {"type": "text", "text": prompt},
            ],
        }
    ]
    if cwd is not None:
        env = f"# Environment\n - Primary working directory: {cwd}\n - Platform: linux"
        messages.append({"role": "system", "content": [{"type": "text", "text": env}]})
    for i in range(turns_done):
        use = {"type": "tool_use", "id": f"toolu_{i}", "name": "Bash", "input": {}}
        messages.append({"role": "assistant", "content": [use]})
        result = {"type": "tool_result", "tool_use_id": f"toolu_{i}", "content": f"out {i}"}
        messages.append({"role": "user", "content": [result]})
    tools: list[dict[str, Any]] = [{"name": "Bash", "input_schema": {"type": "object"}}]
    if role is not None:
        tools.append({"name": "StructuredOutput", "input_schema": output_schema(role)})
    return {
        "model": "claude-test",
        "max_tokens": 32000,
        "stream": stream,
        "system": [{"type": "text", "text": system}],
        "messages": messages,
        "tools": tools,
    }


def call(
    server: ScriptedModelServer,
    body: object = None,
    *,
    path: str = "/v1/messages",
    method: str = "POST",
) -> tuple[int, bytes]:
    host, port = server.base_url.removeprefix("http://").split(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=WAIT)
    try:
        data = None if body is None else json.dumps(body).encode()
        connection.request(method, path, body=data, headers={"Content-Type": "application/json"})
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


def parse_sse(data: bytes) -> list[tuple[str, dict[str, Any]]]:
    events = []
    for frame in data.decode().split("\n\n"):
        if frame.strip():
            fields = dict(line.split(": ", 1) for line in frame.splitlines())
            events.append((fields["event"], json.loads(fields["data"])))
    return events


def assemble(events: list[tuple[str, dict[str, Any]]]) -> tuple[list[Any], str | None]:
    """The content and stop reason a client rebuilds from the stream, as the CLI does."""
    blocks: dict[int, dict[str, Any]] = {}
    partial: dict[int, str] = {}
    stop = None
    for name, data in events:
        if name == "content_block_start":
            blocks[data["index"]] = dict(data["content_block"])
        elif name == "content_block_delta":
            delta = data["delta"]
            if delta["type"] == "text_delta":
                blocks[data["index"]]["text"] += delta["text"]
            else:
                partial[data["index"]] = partial.get(data["index"], "") + delta["partial_json"]
        elif name == "message_delta":
            stop = data["delta"]["stop_reason"]
    for index, text in partial.items():
        blocks[index]["input"] = json.loads(text)
    content = [
        (b["type"], b["text"]) if b["type"] == "text" else (b["type"], b["name"], b["input"])
        for _, b in sorted(blocks.items())
    ]
    return content, stop


def play(server: ScriptedModelServer, body: dict[str, Any]) -> tuple[list[Any], str | None]:
    status, data = call(server, body)
    assert status == 200, data
    return assemble(parse_sse(data))

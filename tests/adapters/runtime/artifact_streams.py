"""Shared by the artifact tests: a fixed clock, a run opener, and native message streams
(the minimal claude session of agent-protocols.md §1.5, and a codex ``exec --json`` one)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from adapters.runtime.artifacts.store import CANONICAL_FILES, RunArtifacts

SESSION = "implementor-0123456789ab"
PROMPT = "Implement spec `auth.md`.\nKeep the tests green."


class Clock:
    """A clock that moves 250 ms at each reading."""

    def __init__(self) -> None:
        self.now = datetime(2026, 11, 5, 10, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        self.now += timedelta(milliseconds=250)
        return self.now


def open_run(tmp_path: Path, **overrides: Any) -> RunArtifacts:
    kwargs: dict[str, Any] = {
        "agent_family": "claude_cli",
        "invocation_mode": "sdk_stream_json",
        "command": ["claude", "--output-format", "stream-json", "--verbose"],
        "working_directory": tmp_path / "worktree",
        "prompt": PROMPT,
        "prompt_reference": "agents/implementor.md@abc123",
        "requested_policy": {"workspace": "writable", "network": False, "bash": "guarded"},
        "clock": Clock(),
    }
    kwargs.update(overrides)
    state_dir = kwargs.pop("state_dir", tmp_path / "state")
    return RunArtifacts.open(state_dir, kwargs.pop("session_id", SESSION), **kwargs)


# The minimal session of agent-protocols.md §1.5, as the CLI writes it.
INIT: dict[str, Any] = {
    "type": "system",
    "subtype": "init",
    "session_id": "s-1",
    "cwd": "/repo",
    "tools": ["Bash"],
    "model": "fake",
    "permissionMode": "default",
    "claude_code_version": "2.1.330",
}
TEXT: dict[str, Any] = {
    "type": "assistant",
    "message": {"id": "msg_1", "model": "fake", "role": "assistant", "content": [
        {"type": "text", "text": "Running\nthe listing"}]},
    "parent_tool_use_id": None,
    "session_id": "s-1",
}  # fmt: skip
TOOL: dict[str, Any] = {
    "type": "assistant",
    "message": {"id": "msg_1", "model": "fake", "role": "assistant", "content": [
        {"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {"command": "ls -la"}}]},
    "parent_tool_use_id": None,
    "session_id": "s-1",
}  # fmt: skip
TOOL_RESULT: dict[str, Any] = {
    "type": "user",
    "message": {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "toolu_1", "content": "a.txt\n" * 200,
         "is_error": False}]},
    "parent_tool_use_id": None,
    "session_id": "s-1",
}  # fmt: skip
RESULT: dict[str, Any] = {
    "type": "result",
    "subtype": "success",
    "is_error": False,
    "duration_ms": 5,
    "duration_api_ms": 3,
    "num_turns": 2,
    "session_id": "s-1",
    "result": '{"outcome": "completed"}',
    "structured_output": {"outcome": "completed", "summary": "done"},
    "total_cost_usd": 0.001,
    "usage": {"input_tokens": 10, "output_tokens": 5, "cache_read_input_tokens": 3},
    "permission_denials": [
        {"tool_name": "Bash", "tool_use_id": "toolu_9", "tool_input": {"command": "git push"}}
    ],
    "terminal_reason": "completed",
}
STREAM: list[dict[str, Any]] = [INIT, TEXT, TOOL, TOOL_RESULT, RESULT]


def play(artifacts: RunArtifacts, stream: list[dict[str, Any]] = STREAM) -> None:
    for message in stream:
        artifacts.record_native(message)


def read_json(path: Path) -> Any:
    return json.loads(path.read_text())


def metadata(artifacts: RunArtifacts) -> dict[str, Any]:
    data: dict[str, Any] = read_json(artifacts.run_dir / CANONICAL_FILES["runner_metadata"])
    return data


def _item(event: str, **item: Any) -> dict[str, Any]:
    return {"type": event, "item": item}


MAKE_TEST = "bash -lc 'make test'"
CODEX_STREAM = [
    {"type": "thread.started", "thread_id": "th-1"},
    {"type": "turn.started"},
    _item("item.completed", id="i1", type="agent_message", text="Running."),
    _item("item.started", id="i2", type="command_execution", command=MAKE_TEST),
    _item(
        "item.completed",
        id="i2",
        type="command_execution",
        command=MAKE_TEST,
        aggregated_output="ok\n",
        exit_code=0,
    ),
    {"type": "turn.completed", "usage": {"input_tokens": 200, "output_tokens": 60}},
    _item("item.completed", id="i3", type="agent_message", text="All done."),
    {"type": "turn.completed", "usage": {"input_tokens": 50, "output_tokens": 6}},
]

"""The fake ``claude`` CLI against the real claude-agent-sdk: each fault looks to the SDK as the
real CLI's would (agent-protocols.md §1.2-1.5), and every process it starts can be killed."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import psutil
import pytest
from claude_agent_sdk import (
    AssistantMessage,
    ClaudeAgentOptions,
    CLIJSONDecodeError,
    HookMatcher,
    ProcessError,
    ResultError,
    ResultMessage,
    SystemMessage,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
    UserMessage,
    query,
)
from claude_agent_sdk.types import Message

from tests.fakes.claude_cli_fixture import FakeClaude

WAIT = 30.0  # seconds: a bound on each SDK session and process wait, never slept
SCHEMA = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}

OnMessage = Callable[[Message], Awaitable[None]]


def options(
    fake_claude: FakeClaude, cwd: Path, env: dict[str, str], **extra: Any
) -> ClaudeAgentOptions:
    return ClaudeAgentOptions(
        cli_path=fake_claude.path,
        cwd=cwd,
        env=env,
        setting_sources=[],
        output_format={"type": "json_schema", "schema": SCHEMA},
        **extra,
    )


def run_query(
    opts: ClaudeAgentOptions, on_message: OnMessage | None = None
) -> tuple[list[Message], BaseException | None]:
    """Every message the SDK yields, and what it raised at the end (None when it ended)."""
    seen: list[Message] = []

    async def main() -> BaseException | None:
        with anyio.fail_after(WAIT):
            try:
                async for message in query(prompt="do it", options=opts):
                    seen.append(message)
                    if on_message is not None:
                        await on_message(message)
            except Exception as exc:
                return exc
        return None

    error = anyio.run(main)
    return seen, error


def is_init(message: Message) -> bool:
    return isinstance(message, SystemMessage) and message.subtype == "init"


# ----------------------------------------------------------------------------- ok


def test_ok_mode_gives_the_sdk_a_result_with_the_structured_output(
    fake_claude: FakeClaude, tmp_path: Path
) -> None:
    messages, error = run_query(
        options(fake_claude, tmp_path, fake_claude.env("ok", output={"ok": True}))
    )

    assert error is None
    assert is_init(messages[0])
    assert isinstance(messages[0], SystemMessage)
    assert messages[0].data["claude_code_version"] == "2.1.330"
    assert messages[0].data["cwd"] == str(tmp_path)
    blocks = [b for m in messages if isinstance(m, AssistantMessage) for b in m.content]
    assert isinstance(blocks[0], TextBlock)
    assert isinstance(blocks[1], ToolUseBlock)
    assert blocks[1].input["command"] == "ls"
    result = messages[-1]
    assert isinstance(result, ResultMessage)
    assert result.subtype == "success"
    assert not result.is_error
    assert result.structured_output == {"ok": True}
    assert result.permission_denials == []


def test_ok_mode_records_the_argv_and_the_prompt_the_sdk_sent(
    fake_claude: FakeClaude, tmp_path: Path
) -> None:
    run_query(options(fake_claude, tmp_path, fake_claude.env("ok", output={"ok": True})))

    records = fake_claude.records()
    argv = records[0]["argv"]
    assert argv[argv.index("--input-format") + 1] == "stream-json"
    assert json.loads(argv[argv.index("--json-schema") + 1]) == SCHEMA
    assert "--print" not in argv
    stdin = [r["stdin"] for r in records[1:]]
    assert stdin[0]["request"]["subtype"] == "initialize"
    assert stdin[1]["message"]["content"] == "do it"


def test_a_denying_pre_tool_use_hook_turns_the_bash_call_into_a_permission_denial(
    fake_claude: FakeClaude, tmp_path: Path
) -> None:
    asked: list[str] = []

    async def deny(hook_input: Any, tool_use_id: str | None, context: Any) -> Any:
        asked.append(hook_input["tool_input"]["command"])
        return {
            "hookSpecificOutput": {
                "hookEventName": "PreToolUse",
                "permissionDecision": "deny",
                "permissionDecisionReason": "Bash is blocked by policy",
            }
        }

    hooks: Any = {"PreToolUse": [HookMatcher(matcher="Bash", hooks=[deny])]}
    env = fake_claude.env("ok", output={"ok": True}, bash="git push")
    messages, error = run_query(options(fake_claude, tmp_path, env, hooks=hooks))

    assert error is None
    assert asked == ["git push"]
    tool_results = [
        block
        for m in messages
        if isinstance(m, UserMessage) and isinstance(m.content, list)
        for block in m.content
        if isinstance(block, ToolResultBlock)
    ]
    assert tool_results[0].is_error
    assert "Bash is blocked by policy" in str(tool_results[0].content)
    result = messages[-1]
    assert isinstance(result, ResultMessage)
    assert result.permission_denials is not None
    assert result.permission_denials[0]["tool_name"] == "Bash"


# ----------------------------------------------------------------------------- faults


def test_error_result_mode_yields_the_error_result_then_raises_result_error(
    fake_claude: FakeClaude, tmp_path: Path
) -> None:
    messages, error = run_query(options(fake_claude, tmp_path, fake_claude.env("error_result")))

    result = messages[-1]
    assert isinstance(result, ResultMessage)
    assert result.is_error
    assert result.subtype == "error_max_structured_output_retries"
    assert isinstance(error, ResultError)
    assert error.exit_code == 1


def test_crash_mode_makes_the_sdk_raise_process_error_with_the_exit_code(
    fake_claude: FakeClaude, tmp_path: Path
) -> None:
    messages, error = run_query(
        options(fake_claude, tmp_path, fake_claude.env("crash", exit_code=7))
    )

    assert isinstance(error, ProcessError)
    assert not isinstance(error, ResultError)
    assert error.exit_code == 7
    assert any(isinstance(m, AssistantMessage) for m in messages)
    assert not any(isinstance(m, ResultMessage) for m in messages)


def test_no_result_mode_ends_the_sdk_stream_quietly_without_a_result(
    fake_claude: FakeClaude, tmp_path: Path
) -> None:
    messages, error = run_query(options(fake_claude, tmp_path, fake_claude.env("no_result")))

    # The SDK reports nothing: telling this apart from success is the runner's job.
    assert error is None
    assert any(isinstance(m, AssistantMessage) for m in messages)
    assert not any(isinstance(m, ResultMessage) for m in messages)


def test_garbage_mode_makes_the_sdk_raise_a_json_decode_error(
    fake_claude: FakeClaude, tmp_path: Path
) -> None:
    messages, error = run_query(options(fake_claude, tmp_path, fake_claude.env("garbage")))

    assert isinstance(error, CLIJSONDecodeError)
    assert "{this line starts like JSON" in str(error)
    assert not any(isinstance(m, ResultMessage) for m in messages)


def test_hang_mode_stays_silent_until_the_test_kills_it(
    fake_claude: FakeClaude, tmp_path: Path
) -> None:
    killed: list[int] = []

    async def kill_at_init(message: Message) -> None:
        if is_init(message):
            process = psutil.Process(fake_claude.pid())
            assert process.is_running()
            process.kill()  # the SDK reaps its own child: do not wait() here
            killed.append(process.pid)

    messages, error = run_query(
        options(fake_claude, tmp_path, fake_claude.env("hang")), kill_at_init
    )

    assert len(killed) == 1
    assert [m for m in messages if not is_init(m)] == []
    assert isinstance(error, ProcessError)
    assert error.exit_code == -signal.SIGKILL
    assert not psutil.pid_exists(killed[0]) or _ended(killed[0])


def test_grandchild_mode_through_the_sdk_dies_with_its_process_tree(
    fake_claude: FakeClaude, tmp_path: Path
) -> None:
    tree: list[psutil.Process] = []

    async def kill_tree_at_init(message: Message) -> None:
        if is_init(message):
            cli = psutil.Process(fake_claude.pid())
            tree.extend([cli, *cli.children(recursive=True)])
            for process in tree:
                process.kill()

    _, error = run_query(
        options(fake_claude, tmp_path, fake_claude.env("grandchild")), kill_tree_at_init
    )

    assert fake_claude.grandchild_pid() in [p.pid for p in tree]
    assert isinstance(error, ProcessError)
    assert error.exit_code == -signal.SIGKILL
    _, alive = psutil.wait_procs(tree[1:], timeout=WAIT)  # not ours to reap: init does
    assert alive == []


# ----------------------------------------------------------------------------- raw processes


class RawSession:
    """The fake driven by hand, for what the SDK cannot show: signals and orphans."""

    def __init__(self, fake_claude: FakeClaude, mode: str) -> None:
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), **fake_claude.env(mode)}
        self.process = subprocess.Popen(
            [str(fake_claude.path), "--output-format", "stream-json"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )

    def send(self, message: dict[str, Any]) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(message) + "\n")
        self.process.stdin.flush()

    def receive(self) -> dict[str, Any]:
        assert self.process.stdout is not None
        line = self.process.stdout.readline()  # blocks until the fake writes: a sync point
        message: dict[str, Any] = json.loads(line)
        return message

    def start_turn(self) -> dict[str, Any]:
        """Initialize, send the prompt, and return the ``system/init`` line."""
        self.send({"type": "control_request", "request_id": "req_1", "request": {
            "subtype": "initialize", "hooks": None}})  # fmt: skip
        assert self.receive()["response"]["request_id"] == "req_1"
        self.send({"type": "user", "session_id": "", "parent_tool_use_id": None,
                   "message": {"role": "user", "content": "do it"}})  # fmt: skip
        return self.receive()


@pytest.fixture
def raw(fake_claude: FakeClaude) -> Iterator[Callable[[str], RawSession]]:
    sessions: list[RawSession] = []

    def start(mode: str) -> RawSession:
        sessions.append(RawSession(fake_claude, mode))
        return sessions[-1]

    yield start
    fake_claude.reap()
    for session in sessions:
        with session.process:  # closes the pipes and reaps
            session.process.kill()


def test_ignore_sigterm_mode_survives_sigterm_and_dies_on_sigkill(
    raw: Callable[[str], RawSession],
) -> None:
    session = raw("ignore_sigterm")
    assert session.start_turn()["subtype"] == "init"

    ignored = _sig_ignored(session.process.pid)
    assert ignored & (1 << (signal.SIGTERM - 1))
    session.process.send_signal(signal.SIGTERM)
    with pytest.raises(subprocess.TimeoutExpired):
        session.process.wait(timeout=0.5)  # bounded proof of a negative, not a sync sleep
    session.process.kill()
    assert session.process.wait(timeout=WAIT) == -signal.SIGKILL


def test_grandchild_mode_leaves_an_orphan_that_the_test_kills_by_pid(
    fake_claude: FakeClaude, raw: Callable[[str], RawSession]
) -> None:
    session = raw("grandchild")
    assert session.start_turn()["subtype"] == "init"
    grandchild = psutil.Process(fake_claude.grandchild_pid())
    assert grandchild.ppid() == session.process.pid

    session.process.kill()
    assert session.process.wait(timeout=WAIT) == -signal.SIGKILL
    assert grandchild.is_running()  # it outlived the CLI
    assert grandchild.ppid() != session.process.pid
    assert fake_claude.reap() == [grandchild.pid]
    assert not _running(grandchild)


def test_hang_mode_ends_at_stdin_eof_only_when_killed(
    fake_claude: FakeClaude, raw: Callable[[str], RawSession]
) -> None:
    session = raw("hang")
    assert session.start_turn()["subtype"] == "init"
    assert session.process.stdin is not None
    session.process.stdin.close()  # the SDK's first step of closing

    with pytest.raises(subprocess.TimeoutExpired):
        session.process.wait(timeout=0.5)  # bounded proof of a negative, not a sync sleep
    assert fake_claude.reap() == [session.process.pid]
    # reap() waited for its own kill, so Popen finds the child already collected (status 0).
    assert session.process.wait(timeout=WAIT) in (-signal.SIGKILL, 0)


def test_overspend_mode_streams_costly_messages_and_never_a_result(
    raw: Callable[[str], RawSession],
) -> None:
    session = raw("overspend")
    assert session.start_turn()["subtype"] == "init"
    messages = [session.receive()["message"] for _ in range(3)]
    assert [m["id"] for m in messages] == ["msg_fake_0", "msg_fake_1", "msg_fake_2"]
    assert {m["model"] for m in messages} == {"claude-sonnet-fake"}
    assert all(m["usage"]["input_tokens"] == 1_000_000 for m in messages)
    session.process.kill()
    assert session.process.wait(timeout=WAIT) == -signal.SIGKILL


def test_an_unknown_mode_exits_2_with_a_message(fake_claude: FakeClaude) -> None:
    result = subprocess.run(
        [str(fake_claude.path)],
        env=fake_claude.env("nonsense"),
        input="",
        capture_output=True,
        text=True,
        timeout=WAIT,
        check=False,
    )
    assert result.returncode == 2
    assert "unknown FAKE_CLAUDE_MODE" in result.stderr


# ----------------------------------------------------------------------------- helpers


def _sig_ignored(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("SigIgn:"):
            return int(line.split()[1], 16)
    raise AssertionError("no SigIgn line")


def _running(process: psutil.Process) -> bool:
    try:
        return bool(process.status() != psutil.STATUS_ZOMBIE)
    except psutil.NoSuchProcess:
        return False


def _ended(pid: int) -> bool:
    try:
        return bool(psutil.Process(pid).status() == psutil.STATUS_ZOMBIE)
    except psutil.NoSuchProcess:
        return True

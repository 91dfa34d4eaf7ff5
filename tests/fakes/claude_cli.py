#!/usr/bin/env python3
"""A fake ``claude`` CLI that speaks the Agent SDK's stream-json control protocol.

The claude-agent-sdk starts its CLI with ``--output-format stream-json --verbose
--input-format stream-json …`` and talks NDJSON over stdin/stdout (agent-protocols.md §1.2,
§1.5, verified on SDK 0.2.187): it sends an ``initialize`` control request, then the user
message, and closes stdin once it has the ``result`` (or, with hooks, once the run ends). This
script answers like the real CLI, and then misbehaves on demand, to inject the faults the real
CLI will not produce when asked: crashes, hangs, garbage, a missing ``result``, a child that
outlives it. Standard library only, so any ``python3`` runs it; argv is accepted and ignored.

Behaviour comes from the environment (the SDK passes ``ClaudeAgentOptions.env`` through):

``FAKE_CLAUDE_MODE``
    ``ok`` (default): ``system/init``, assistant text, a ``Bash`` tool call (sent through the
    SDK's ``PreToolUse`` hook when one matches, so a hook can deny it), its tool result, and a
    ``success`` result carrying the structured output; exits 0 at stdin EOF.
    ``error_result``: a result with ``is_error: true`` (subtype from
    ``FAKE_CLAUDE_RESULT_SUBTYPE``, default ``error_max_structured_output_retries``), exit 1.
    ``crash``: init and some text, a line on stderr, then exit ``FAKE_CLAUDE_EXIT_CODE``
    (default 3) mid-stream. ``no_result``: init and text, then exit 0 without a result.
    ``garbage``: init, a plain non-JSON line (the SDK skips those) and a line that starts with
    ``{`` but is not JSON (the SDK raises ``CLIJSONDecodeError``). ``hang``: init, then silence
    until killed. ``ignore_sigterm``: ignores SIGTERM from the start, then as ``hang``.
    ``grandchild``: starts a sleeping child (stdin from /dev/null, stdout and stderr inherited,
    as a backgrounded shell command would), records its pid, then as ``hang``.
    ``crash_grandchild``: starts that child, then as ``crash``: the CLI is gone, its child not.
    ``overspend``: a CLI that does not hold its budget: assistant messages (distinct ids) of a
    million input tokens each on ``claude-sonnet-fake`` (some $3 at list price), one every
    50 ms, up to 1000, and no result.
``FAKE_CLAUDE_OUTPUT``
    A JSON file holding the structured output of the result (none when unset).
``FAKE_CLAUDE_TEXT`` / ``FAKE_CLAUDE_BASH``
    The assistant's text (default ``Working on it.``) and the Bash command it "runs" (``ls``).
``FAKE_CLAUDE_BASH_RUN``
    When ``1``, the Bash command really runs (``/bin/sh -c`` in the cwd) once the hooks allow
    it, and its output is the tool result; otherwise the result is a canned ``a.txt``.
``FAKE_CLAUDE_NO_HOOK_ON_FAILURE``
    When ``1``, ``initialize`` is answered like a CLI that predates ``onFailure`` on hook
    matchers (no ``hook_on_failure_supported``); otherwise like 2.1.330, which honours it: a
    hook callback that fails blocks the tool when its matcher says ``onFailure: "block"``.
``FAKE_CLAUDE_PID_FILE`` / ``FAKE_CLAUDE_GRANDCHILD_PID_FILE``
    Files that receive this process's pid and the grandchild's, written before ``system/init``
    so a reader that has seen init can read them without waiting.
``FAKE_CLAUDE_PID_DIR``
    A directory that receives one ``<pid>`` file per process started (for reaping).
``FAKE_CLAUDE_RECORD``
    A JSONL file that receives ``{"argv": …, "cwd": …}`` and every stdin message.
``FAKE_CLAUDE_HANG_SECONDS``
    A safety cap on hangs and on the grandchild's sleep (default 600): a leaked fake ends.

Run it directly (``python3 tests/fakes/claude_cli.py`` with the env above) or point
``ClaudeAgentOptions.cli_path`` at the wrapper ``claude_cli_fixture.install_fake_cli`` writes.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import uuid
from pathlib import Path
from typing import Any

VERSION = "2.1.330"  # the bundled CLI of SDK 0.2.187; the SDK warns when init lacks one
MODEL = "fake-model"
OVERSPEND = "claude-sonnet-fake"  # priced as a Sonnet by cpe's table
SESSION = "fake-session-0001"
GRANDCHILD_MARKER = "fake-claude-grandchild"
MODES = (
    "ok",
    "error_result",
    "crash",
    "no_result",
    "garbage",
    "hang",
    "ignore_sigterm",
    "grandchild",
    "crash_grandchild",
    "overspend",
)


def _env(name: str, default: str = "") -> str:
    return os.environ.get(name, default)


def _write_atomic(path: str, text: str) -> None:
    target = Path(path)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    tmp.write_text(text)
    tmp.replace(target)


def _record_pid(pid: int, file_var: str) -> None:
    if _env(file_var):
        _write_atomic(_env(file_var), f"{pid}\n")
    if _env("FAKE_CLAUDE_PID_DIR"):
        _write_atomic(str(Path(_env("FAKE_CLAUDE_PID_DIR")) / str(pid)), f"{pid}\n")


def _record(entry: dict[str, Any]) -> None:
    if _env("FAKE_CLAUDE_RECORD"):
        with open(_env("FAKE_CLAUDE_RECORD"), "a", encoding="utf-8") as out:
            out.write(json.dumps(entry) + "\n")


def _hang_seconds() -> float:
    return float(_env("FAKE_CLAUDE_HANG_SECONDS", "600"))


class FakeCli:
    def __init__(self, mode: str) -> None:
        self.mode = mode
        self.hooks: dict[str, Any] = {}
        self.cwd = os.getcwd()

    # ------------------------------------------------------------------ wire
    def emit(self, message: dict[str, Any]) -> None:
        self.emit_raw(json.dumps(message))

    @staticmethod
    def emit_raw(line: str) -> None:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()

    def read(self) -> dict[str, Any] | None:
        """The next stdin message; None at EOF. Non-JSON lines are reported and skipped."""
        for line in sys.stdin:
            if not line.strip():
                continue
            try:
                message = json.loads(line)
            except json.JSONDecodeError:
                sys.stderr.write(f"fake claude: ignoring non-JSON stdin line: {line[:80]!r}\n")
                continue
            _record({"stdin": message})
            if isinstance(message, dict):
                return message
        return None

    def answer(self, request_id: str, response: dict[str, Any]) -> None:
        self.emit(
            {
                "type": "control_response",
                "response": {"subtype": "success", "request_id": request_id, "response": response},
            }
        )

    # ------------------------------------------------------------------ session
    def run(self) -> int:
        while (message := self.read()) is not None:
            kind = message.get("type")
            if kind == "control_request":
                self.on_control_request(message)
            elif kind == "user":
                status = self.turn()
                if status is not None:
                    return status
        return 0  # stdin EOF: the SDK is done with us

    def on_control_request(self, message: dict[str, Any]) -> None:
        request = message.get("request") or {}
        subtype = request.get("subtype")
        if subtype == "initialize":
            self.hooks = request.get("hooks") or {}
            answer: dict[str, Any] = {"claude_code_version": VERSION, "pid": os.getpid()}
            if _env("FAKE_CLAUDE_NO_HOOK_ON_FAILURE") != "1":
                answer.update(hook_on_failure_supported=True, hooks_applied=True)
            self.answer(message["request_id"], answer)
        elif subtype == "interrupt":
            self.answer(message["request_id"], {"still_queued": []})
        else:
            self.answer(message["request_id"], {})

    def turn(self) -> int | None:
        """Play the turn for the user message; an int ends the process with that status."""
        if self.mode in ("grandchild", "crash_grandchild"):
            self.start_grandchild()
        self.emit(self.init_message())
        if self.mode in ("hang", "ignore_sigterm", "grandchild"):
            threading.Event().wait(_hang_seconds())
            return 124
        if self.mode == "overspend":
            pause = threading.Event()  # never set: the time between two messages
            for n in range(1000):
                usage = {"input_tokens": 1_000_000, "output_tokens": 10}
                text = {"type": "text", "text": f"spending {n}"}
                self.assistant(text, message_id=f"msg_fake_{n}", model=OVERSPEND, usage=usage)
                pause.wait(0.05)
            return 0
        self.assistant({"type": "text", "text": _env("FAKE_CLAUDE_TEXT", "Working on it.")})
        if self.mode in ("crash", "crash_grandchild"):
            sys.stderr.write("fake claude: simulated crash\n")
            sys.stderr.flush()
            return int(_env("FAKE_CLAUDE_EXIT_CODE", "3"))
        if self.mode == "no_result":
            return 0
        if self.mode == "garbage":
            self.emit_raw("this line is not JSON")
            self.emit_raw("{this line starts like JSON but is not")
            return None
        if self.mode == "error_result":
            self.emit(self.error_result())
            return 1
        denials = self.bash_tool_call()
        self.emit(self.success_result(denials))
        return None

    def init_message(self) -> dict[str, Any]:
        return {
            "type": "system",
            "subtype": "init",
            "session_id": SESSION,
            "cwd": self.cwd,
            "tools": ["Bash", "StructuredOutput"],
            "model": MODEL,
            "permissionMode": "default",
            "claude_code_version": VERSION,
            "uuid": str(uuid.uuid4()),
        }

    def assistant(
        self,
        block: dict[str, Any],
        *,
        message_id: str = "msg_fake_1",
        model: str = MODEL,
        usage: dict[str, int] | None = None,
    ) -> None:
        # The real CLI writes one assistant line per content block.
        self.emit(
            {
                "type": "assistant",
                "message": {
                    "id": message_id,
                    "type": "message",
                    "role": "assistant",
                    "model": model,
                    "content": [block],
                    **({"usage": usage} if usage is not None else {}),
                },
                "parent_tool_use_id": None,
                "session_id": SESSION,
            }
        )

    def bash_tool_call(self) -> list[dict[str, Any]]:
        tool_id = "toolu_fake_1"
        tool_input = {"command": _env("FAKE_CLAUDE_BASH", "ls"), "description": "Run it"}
        self.assistant({"type": "tool_use", "id": tool_id, "name": "Bash", "input": tool_input})
        reason = self.pre_tool_use("Bash", tool_input, tool_id)
        denials: list[dict[str, Any]] = []
        if reason is None and _env("FAKE_CLAUDE_BASH_RUN") == "1":
            content, is_error = self.run_bash(tool_input["command"])
        elif reason is None:
            content, is_error = "a.txt", False
        else:
            content, is_error = f"PreToolUse:Bash hook error: {reason}", True
            denials = [{"tool_name": "Bash", "tool_use_id": tool_id, "tool_input": tool_input}]
        self.emit(
            {
                "type": "user",
                "message": {
                    "role": "user",
                    "content": [
                        {
                            "type": "tool_result",
                            "tool_use_id": tool_id,
                            "content": content,
                            "is_error": is_error,
                        }
                    ],
                },
                "parent_tool_use_id": None,
                "session_id": SESSION,
            }
        )
        return denials

    def run_bash(self, command: str) -> tuple[str, bool]:
        done = subprocess.run(
            ["/bin/sh", "-c", command],
            cwd=self.cwd,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=_hang_seconds(),
            check=False,
        )
        return done.stdout + done.stderr, done.returncode != 0

    def pre_tool_use(self, tool: str, tool_input: dict[str, Any], tool_id: str) -> str | None:
        """Ask every matching SDK hook; the first denial's reason, or None when allowed. A
        callback that fails blocks the tool when its matcher has ``onFailure: "block"``."""
        for matcher in self.hooks.get("PreToolUse") or []:
            pattern = matcher.get("matcher")
            if pattern and not re.fullmatch(pattern, tool):
                continue
            for callback_id in matcher.get("hookCallbackIds") or []:
                reply = self.hook_callback(callback_id, tool, tool_input, tool_id)
                if reply is None:  # the callback failed
                    if matcher.get("onFailure") == "block":
                        return "hook callback failed"
                    continue
                specific = reply.get("hookSpecificOutput") or {}
                if specific.get("permissionDecision") == "deny":
                    return str(specific.get("permissionDecisionReason") or "denied by hook")
                if reply.get("decision") == "block":
                    return str(reply.get("reason") or "blocked by hook")
        return None

    def hook_callback(
        self, callback_id: str, tool: str, tool_input: dict[str, Any], tool_id: str
    ) -> dict[str, Any] | None:
        """The callback's answer; None when it failed (an error reply)."""
        request_id = str(uuid.uuid4())
        hook_input = {
            "session_id": SESSION,
            "transcript_path": "",
            "cwd": self.cwd,
            "permission_mode": "default",
            "hook_event_name": "PreToolUse",
            "tool_name": tool,
            "tool_input": tool_input,
            "tool_use_id": tool_id,
        }
        self.emit(
            {
                "type": "control_request",
                "request_id": request_id,
                "request": {
                    "subtype": "hook_callback",
                    "callback_id": callback_id,
                    "input": hook_input,
                    "tool_use_id": tool_id,
                },
            }
        )
        while (message := self.read()) is not None:
            if message.get("type") == "control_request":
                self.on_control_request(message)
                continue
            response = message.get("response") or {}
            if message.get("type") == "control_response" and (
                response.get("request_id") == request_id
            ):
                if response.get("subtype") == "error":
                    return None
                body = response.get("response")
                return body if isinstance(body, dict) else {}
        return {}

    def success_result(self, denials: list[dict[str, Any]]) -> dict[str, Any]:
        result: dict[str, Any] = {
            "type": "result",
            "subtype": "success",
            "is_error": False,
            "duration_ms": 5,
            "duration_api_ms": 3,
            "num_turns": 2,
            "session_id": SESSION,
            "result": "Done.",
            "total_cost_usd": 0.001,
            "usage": {"input_tokens": 10, "output_tokens": 5},
            "permission_denials": denials,
            "terminal_reason": "completed",
        }
        if _env("FAKE_CLAUDE_OUTPUT"):
            output = json.loads(Path(_env("FAKE_CLAUDE_OUTPUT")).read_text())
            result["structured_output"] = output
            result["result"] = json.dumps(output)
        return result

    @staticmethod
    def error_result() -> dict[str, Any]:
        subtype = _env("FAKE_CLAUDE_RESULT_SUBTYPE", "error_max_structured_output_retries")
        return {
            "type": "result",
            "subtype": subtype,
            "is_error": True,
            "duration_ms": 5,
            "duration_api_ms": 3,
            "num_turns": 6,
            "session_id": SESSION,
            "total_cost_usd": 0.002,
            "usage": {"input_tokens": 20, "output_tokens": 8},
            "permission_denials": [],
            "errors": [f"fake claude: {subtype}"],
            "terminal_reason": "structured_output_retry_exhausted",
        }

    @staticmethod
    def start_grandchild() -> None:
        code = "import sys, time; time.sleep(float(sys.argv[1]))"
        child = subprocess.Popen(
            [sys.executable, "-c", code, str(_hang_seconds()), GRANDCHILD_MARKER],
            stdin=subprocess.DEVNULL,
        )
        _record_pid(child.pid, "FAKE_CLAUDE_GRANDCHILD_PID_FILE")


def main() -> int:
    mode = _env("FAKE_CLAUDE_MODE", "ok")
    if mode not in MODES:
        sys.stderr.write(f"fake claude: unknown FAKE_CLAUDE_MODE {mode!r}; one of {MODES}\n")
        return 2
    if mode == "ignore_sigterm":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    _record_pid(os.getpid(), "FAKE_CLAUDE_PID_FILE")
    _record({"argv": sys.argv[1:], "cwd": os.getcwd()})
    try:
        return FakeCli(mode).run()
    except BrokenPipeError:
        # The reader went away; nothing left to say to it.
        return 0


if __name__ == "__main__":
    sys.exit(main())

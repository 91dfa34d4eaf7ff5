#!/usr/bin/env python3
"""A fake ``codex`` CLI: ``codex exec --json`` as observed on 0.169.0 (agent-protocols.md §4).

The real ``codex`` runs in the tests too (``test_real.py`` in ``tests/adapters/runtime/codex/``,
against the scripted model), but it will not produce faults on demand. This script takes the
command line the real one takes, fails the way it fails, and prints the recorded JSONL event
shapes, for the fault tests.
Standard library only; it never runs the commands it reports.

Command line (the real one's; anything else is a clap-style usage error, exit 2)::

    codex [-a POLICY] [-c key=value]… exec [--json] [-c key=value]… [--output-schema FILE]
          [-o|--output-last-message FILE] [-C|--cd DIR] [-m MODEL] [-s|--sandbox MODE]
          [--skip-git-repo-check] [--dangerously-bypass-approvals-and-sandbox] [--add-dir DIR]…
          [-p PROFILE] [--ephemeral] [--ignore-user-config] [-i FILE]… [PROMPT | -]

As the real one: ``-a``/``--ask-for-approval`` only before ``exec``; ``--approval-policy`` and
``--full-auto`` do not exist; ``-c`` values are TOML (an unparsable value is kept as a
string); a nonexistent ``-C`` directory, a directory outside a git repository without
``--skip-git-repo-check``, and an unreadable ``--output-schema`` file each exit 1. Without
``--json`` stdout carries only the final message and stderr a banner. ``--sandbox`` and the
approval policy are recorded, not enforced.

stdin, the real one's hang: with a PROMPT and a stdin that is not a TTY, codex prints
``Reading additional input from stdin...`` to stderr and reads stdin to EOF, appending it as a
``<stdin>`` block; an open pipe that never closes hangs it forever (pitfall §5.2). The fake does
the same, but gives up after ``FAKE_CODEX_HANG_SECONDS`` with exit 124 and a stderr line saying
so, so a runner that forgets ``stdin=DEVNULL`` sees a silent process (its idle timeout fires)
and a leaked fake still ends. ``-`` or no PROMPT reads the whole prompt from stdin.

Behaviour comes from the environment:

``FAKE_CODEX_MODE``
    ``ok`` (default): ``thread.started``, ``turn.started``, an ``agent_message``
    (``FAKE_CODEX_TEXT``), a ``command_execution`` started and completed
    (``FAKE_CODEX_COMMAND``, output ``FAKE_CODEX_COMMAND_OUTPUT``, exit code
    ``FAKE_CODEX_COMMAND_EXIT``: non-zero gives ``status: failed`` and the run still exits 0;
    the command takes ``FAKE_CODEX_COMMAND_SECONDS``, printing nothing meanwhile),
    with ``FAKE_CODEX_FILE`` (a path relative to the working directory) a real write of
    ``FAKE_CODEX_FILE_CONTENT`` reported as a ``file_change``, the final ``agent_message``
    (the JSON in the file ``FAKE_CODEX_OUTPUT``, else ``FAKE_CODEX_FINAL``), ``turn.completed``
    with usage; the final text goes to ``-o``; exit 0.
    ``turn_failed``: ``error`` and ``turn.failed`` (message ``FAKE_CODEX_ERROR``), ``-o``
    created empty, exit 1. ``hang``: ``thread.started`` and ``turn.started``, then silence until
    killed. ``ignore_sigterm``: SIGTERM ignored from the start, then as ``hang``. ``crash``:
    as ``ok`` up to the first message, then a panic line on stderr and exit
    ``FAKE_CODEX_EXIT_CODE`` (default 101, Rust's panic status). ``no_output``: exit 0 having
    printed nothing and written no ``-o`` file. ``garbage``: ``thread.started`` and
    ``turn.started``, a non-JSON line and a line that starts with ``{`` but is not JSON, then
    exit 0 without a turn end. ``sandbox_broken``: as ``ok``, but as with a system bubblewrap
    and no helper alias, stderr says codex could not create its PATH aliases and the command
    never starts: no ``command_execution`` item, the model gets ``NO_HELPER``; exit 0.
    ``offline``: as the real one with a model API it cannot connect to (observed on 0.169.0,
    the port closed): ``thread.started``, ``turn.started``, then an ``error`` event
    ``Reconnecting... waiting for network (Connection failed: error sending request)`` every
    ``FAKE_CODEX_NETWORK_WAIT`` seconds (default 0.05; the real one waits about 25 s) until
    killed; it never ends the turn.
``CODEX_HOME``
    Where a run leaves its session log, as the real one (which defaults to ``~/.codex``; the
    fake does not): ``sessions/YYYY/MM/DD/rollout-<time>-<thread>.jsonl``, the command's call
    and the output the model got.
``FAKE_CODEX_PID_FILE`` / ``FAKE_CODEX_RECORD``
    A file that receives this process's pid (before any output), and a JSONL file that
    receives ``{"argv", "cwd", "prompt", "config", "output_schema", …}`` once arguments parse.
``FAKE_CODEX_HANG_SECONDS``
    The cap on hangs and on the stdin wait (default 600).
"""

from __future__ import annotations

import argparse
import json
import os
import select
import shlex
import signal
import sys
import threading
import time
import tomllib
import uuid
from pathlib import Path
from typing import Any, NoReturn

VERSION = "0.169.0"
MODES = ("ok", "turn_failed", "hang", "ignore_sigterm", "crash", "no_output", "garbage")
MODES += ("sandbox_broken",)  # the sandbox cannot start a command
MODES += ("offline",)  # the model API cannot be connected to: codex waits for the network
NO_HELPER = "bwrap: execvp codex-linux-sandbox: No such file or directory\n"
USAGE = {
    "input_tokens": 200,
    "cached_input_tokens": 40,
    "cache_write_input_tokens": 0,
    "output_tokens": 60,
    "reasoning_output_tokens": 10,
}


class UsageError(Exception):
    """A command line clap would refuse (exit 2)."""


class Fail(Exception):
    """A run codex refuses before any event (exit 1)."""


def _env(name: str, default: str = "") -> str:
    return os.environ.get(name, default)


def _hang_seconds() -> float:
    return float(_env("FAKE_CODEX_HANG_SECONDS", "600"))


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise UsageError(message)


def _exec_parser() -> _Parser:
    parser = _Parser(prog="codex exec", add_help=False, allow_abbrev=False)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("-c", "--config", action="append", default=[])
    parser.add_argument("--output-schema")
    parser.add_argument("-o", "--output-last-message")
    parser.add_argument("-C", "--cd")
    parser.add_argument("-m", "--model", default="gpt-5-codex")
    parser.add_argument(
        "-s", "--sandbox", choices=("read-only", "workspace-write", "danger-full-access")
    )
    for flag in (
        "--skip-git-repo-check",
        "--dangerously-bypass-approvals-and-sandbox",
        "--ephemeral",
        "--ignore-user-config",
        "--approve-for-me",
    ):
        parser.add_argument(flag, action="store_true")
    parser.add_argument("--add-dir", action="append", default=[])
    parser.add_argument("-i", "--image", action="append", default=[])
    parser.add_argument("-p", "--profile")
    parser.add_argument("prompt", nargs="?")
    return parser


def parse_command_line(argv: list[str]) -> tuple[argparse.Namespace, dict[str, Any]]:
    """The exec options and the effective ``-c`` config (top-level ``-a`` included)."""
    overrides: list[str] = []
    approval: str | None = None
    rest = list(argv)
    while rest and rest[0] != "exec":
        flag = rest.pop(0)
        if flag in ("-a", "--ask-for-approval") and rest:
            approval = rest.pop(0)
        elif flag in ("-c", "--config") and rest:
            overrides.append(rest.pop(0))
        else:
            raise UsageError(f"unexpected argument '{flag}' found")
    if not rest:
        raise UsageError("the fake codex implements only the 'exec' subcommand")
    options, unknown = _exec_parser().parse_known_args(rest[1:])
    if unknown:
        raise UsageError(f"unexpected argument '{unknown[0]}' found")
    config: dict[str, Any] = {}
    for override in [*overrides, *options.config]:
        key, equals, value = override.partition("=")
        if not equals or not key.strip():
            raise UsageError(f"Invalid override (missing '='): {override}")
        try:
            config[key.strip()] = tomllib.loads(f"v = {value}")["v"]
        except tomllib.TOMLDecodeError:
            config[key.strip()] = value  # codex keeps an unparsable value as a string
    if approval is not None:
        config["approval_policy"] = approval
    return options, config


def read_stdin(cap: float) -> str | None:
    """stdin to EOF; None when it is still open after ``cap`` seconds (the real one waits)."""
    chunks: list[bytes] = []
    fd = sys.stdin.fileno()
    while True:
        readable, _, _ = select.select([fd], [], [], cap)
        if not readable:
            return None
        chunk = os.read(fd, 65536)
        if not chunk:
            return b"".join(chunks).decode(errors="replace")
        chunks.append(chunk)


def prompt_of(given: str | None) -> str:
    stdin_is_tty = sys.stdin is None or sys.stdin.isatty()
    if given is None or given == "-":
        if stdin_is_tty:
            raise Fail("No prompt provided. Either specify one as an argument or pipe it in.")
        _say("Reading prompt from stdin...")
        text = _read_stdin_or_give_up()
        if not text.strip():
            raise Fail("No prompt provided via stdin.")
        return text
    if stdin_is_tty:
        return given
    _say("Reading additional input from stdin...")
    extra = _read_stdin_or_give_up()
    return f"{given}\n\n<stdin>\n{extra}\n</stdin>" if extra.strip() else given


def _read_stdin_or_give_up() -> str:
    text = read_stdin(_hang_seconds())
    if text is None:
        _say(
            "fake codex: stdin never reached EOF; the real codex waits forever here "
            "(spawn it with stdin=DEVNULL)"
        )
        sys.exit(124)
    return text


def _say(line: str) -> None:
    sys.stderr.write(line + "\n")
    sys.stderr.flush()


def _inside_git_repo(directory: Path) -> bool:
    return any((d / ".git").exists() for d in (directory, *directory.parents))


class Run:
    def __init__(self, options: argparse.Namespace) -> None:
        self.json = bool(options.json)
        self.last_message_file: str | None = options.output_last_message
        self.ids = 0
        self.final = ""
        self.session_log: Path | None = None

    def emit(self, event: dict[str, Any]) -> None:
        if self.json:
            self.emit_raw(json.dumps(event))

    def emit_raw(self, line: str) -> None:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()

    def item(self, kind: str, started: bool, **fields: Any) -> dict[str, Any]:
        if started:
            self.ids += 1
        item = {"id": f"item_{self.ids}", "type": kind, **fields}
        self.emit({"type": "item.started" if started else "item.completed", "item": item})
        return item

    def message(self, text: str) -> None:
        self.ids += 1
        self.final = text
        item = {"id": f"item_{self.ids}", "type": "agent_message", "text": text}
        self.emit({"type": "item.completed", "item": item})

    def start(self) -> None:
        thread = str(uuid.uuid4())
        self.emit({"type": "thread.started", "thread_id": thread})
        self.emit({"type": "turn.started"})
        if _env("CODEX_HOME"):
            day = Path(_env("CODEX_HOME"), "sessions", time.strftime("%Y/%m/%d"))
            day.mkdir(parents=True, exist_ok=True)
            self.session_log = day / f"rollout-{time.strftime('%Y-%m-%dT%H-%M-%S')}-{thread}.jsonl"

    def log_call(self, command: str, output: str, code: int) -> None:
        """The call and its output, in the shapes of codex's session log."""
        if self.session_log is not None:
            text = f"Process exited with code {code}\nOutput:\n{output}"
            call = {"type": "function_call", "name": "exec_command", "arguments": command}
            result = {"type": "function_call_output", "output": text}
            with self.session_log.open("a", encoding="utf-8") as log:
                for payload in (call, result):
                    log.write(json.dumps({"type": "response_item", "payload": payload}) + "\n")

    def command(self, started: bool = True) -> None:
        command = f"/bin/bash -lc {shlex.quote(_env('FAKE_CODEX_COMMAND', 'echo hello'))}"
        if not started:  # the sandbox could not start it: only the model hears of it
            self.log_call(command, NO_HELPER, 1)
            return
        fields: dict[str, Any] = {"command": command, "aggregated_output": ""}
        self.item("command_execution", True, **fields, exit_code=None, status="in_progress")
        threading.Event().wait(float(_env("FAKE_CODEX_COMMAND_SECONDS", "0")))  # it runs, silent
        code = int(_env("FAKE_CODEX_COMMAND_EXIT", "0"))
        fields["aggregated_output"] = _env("FAKE_CODEX_COMMAND_OUTPUT", "hello\n")
        status = "completed" if code == 0 else "failed"
        self.item("command_execution", False, **fields, exit_code=code, status=status)
        self.log_call(command, fields["aggregated_output"], code)

    def file_change(self, relative: str) -> None:
        target = (Path.cwd() / relative).resolve()
        if not target.is_relative_to(Path.cwd().resolve()):
            raise Fail(f"fake codex: FAKE_CODEX_FILE {relative!r} leaves the working directory")
        kind = "update" if target.exists() else "add"
        changes = [{"path": str(target), "kind": kind}]
        self.item("file_change", True, changes=changes, status="in_progress")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(_env("FAKE_CODEX_FILE_CONTENT", "hello\n"))
        self.item("file_change", False, changes=changes, status="completed")

    def write_last_message(self) -> None:
        if self.last_message_file:
            Path(self.last_message_file).write_text(self.final)


def play(mode: str, options: argparse.Namespace, config: dict[str, Any]) -> int:
    run = Run(options)
    if mode == "no_output":
        return 0
    if not run.json:
        policy = config.get("approval_policy", "never")
        for line in (
            f"workdir: {Path.cwd()}",
            f"model: {options.model}",
            f"provider: {config.get('model_provider', 'openai')}",
            f"approval: {policy}",
            f"sandbox: {options.sandbox or 'read-only'}",
            f"session id: {uuid.uuid4()}",
        ):
            _say(line)
    if mode == "garbage":
        run.start()
        run.emit_raw("this line is not JSON")
        run.emit_raw("{this line starts like JSON but is not")
        return 0
    run.start()
    if mode in ("hang", "ignore_sigterm"):
        threading.Event().wait(_hang_seconds())
        return 124
    if mode == "offline":
        waited, pause = 0.0, float(_env("FAKE_CODEX_NETWORK_WAIT", "0.05"))
        message = "Reconnecting... waiting for network (Connection failed: error sending request)"
        while waited < _hang_seconds():
            run.emit({"type": "error", "message": message})
            threading.Event().wait(pause)
            waited += pause
        return 124
    if mode == "turn_failed":
        message = _env("FAKE_CODEX_ERROR", "unexpected status 400 Bad Request: scripted")
        run.emit({"type": "error", "message": message})
        run.emit({"type": "turn.failed", "error": {"message": message}})
        run.write_last_message()  # created empty, as observed
        if not run.json:
            _say(f"ERROR: {message}")
        return 1
    run.message(_env("FAKE_CODEX_TEXT", "Running a command."))
    if mode == "crash":
        _say("thread 'main' panicked at codex-rs/exec/src/lib.rs: fake codex: simulated crash")
        return int(_env("FAKE_CODEX_EXIT_CODE", "101"))
    run.command(started=mode != "sandbox_broken")
    if _env("FAKE_CODEX_FILE"):
        run.file_change(_env("FAKE_CODEX_FILE"))
    output = _env("FAKE_CODEX_OUTPUT")
    final = json.dumps(json.loads(Path(output).read_text())) if output else None
    run.message(final or _env("FAKE_CODEX_FINAL", "Done."))
    run.emit({"type": "turn.completed", "usage": dict(USAGE)})
    run.write_last_message()
    if not run.json:
        run.emit_raw(run.final)
        _say(f"tokens used\n{USAGE['input_tokens'] + USAGE['output_tokens']}")
    return 0


def main(argv: list[str]) -> int:
    mode = _env("FAKE_CODEX_MODE", "ok")
    if mode not in MODES:
        _say(f"fake codex: unknown FAKE_CODEX_MODE {mode!r}; one of {MODES}")
        return 2
    if mode == "ignore_sigterm":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if mode == "sandbox_broken":
        _say(
            "WARNING: proceeding, even though we could not create PATH aliases: Refusing to "
            'create helper binaries under temporary dir "/tmp" (codex_home: '
            f'AbsolutePathBuf("{_env("CODEX_HOME")}"))'
        )
    if _env("FAKE_CODEX_PID_FILE"):
        Path(_env("FAKE_CODEX_PID_FILE")).write_text(f"{os.getpid()}\n")
    if argv in (["--version"], ["-V"]):
        print(f"codex-cli {VERSION}")
        return 0
    try:
        options, config = parse_command_line(argv)
    except UsageError as exc:
        _say(f"error: {exc}\n\nUsage: codex exec [OPTIONS] [PROMPT]")
        return 2
    try:
        if options.cd is not None:
            if not Path(options.cd).is_dir():
                raise Fail(f"Error: failed to change directory to {options.cd}: not a directory")
            os.chdir(options.cd)
        if not options.skip_git_repo_check and not _inside_git_repo(Path.cwd()):
            raise Fail(
                "Not inside a trusted directory and --skip-git-repo-check was not specified."
            )
        schema = None
        if options.output_schema is not None:
            try:
                schema = json.loads(Path(options.output_schema).read_text())
            except (OSError, ValueError) as exc:
                raise Fail(
                    f"Failed to read output schema file {options.output_schema}: {exc}"
                ) from exc
        prompt = prompt_of(options.prompt)
    except Fail as exc:
        _say(str(exc))
        return 1
    if _env("FAKE_CODEX_RECORD"):
        entry = {
            "argv": argv,
            "cwd": os.getcwd(),
            "prompt": prompt,
            "config": config,
            "output_schema": schema,
            "sandbox": options.sandbox,
            "model": options.model,
            "json": options.json,
        }
        with open(_env("FAKE_CODEX_RECORD"), "a", encoding="utf-8") as out:
            out.write(json.dumps(entry) + "\n")
    try:
        return play(mode, options, config)
    except Fail as exc:
        _say(str(exc))
        return 1
    except BrokenPipeError:
        return 101  # observed when the reader closed stdout early


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

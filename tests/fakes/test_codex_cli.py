"""The fake ``codex`` CLI: the command line, exits and JSONL shapes of ``codex exec`` 0.169.0
(agent-protocols.md §4), its stdin hang, and each fault mode a codex runner will be tested with."""

from __future__ import annotations

import json
import os
import select
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.codex_cli_fixture import FakeCodex

WAIT = 30.0  # seconds: a bound on each process wait and pipe read, never slept
SCHEMA = {
    "type": "object",
    "properties": {"ok": {"type": "boolean"}, "summary": {"type": "string"}},
    "required": ["ok", "summary"],
    "additionalProperties": False,
}
PROVIDER = (
    'model_providers.scripted={name="scripted", base_url="http://127.0.0.1:9/v1", '
    'wire_api="responses"}'
)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    path = tmp_path / "repo"
    (path / ".git").mkdir(parents=True)  # all the trust check looks for
    return path


def environment(fake_codex: FakeCodex, mode: str = "ok", **settings: Any) -> dict[str, str]:
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), **fake_codex.env(mode, **settings)}


def run(
    fake_codex: FakeCodex,
    args: Sequence[str],
    *,
    cwd: Path,
    env: Mapping[str, str] | None = None,
    stdin_text: str | None = None,
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(fake_codex.path), *args],
        cwd=cwd,
        env=dict(env if env is not None else environment(fake_codex)),
        input=stdin_text,
        stdin=subprocess.DEVNULL if stdin_text is None else None,
        capture_output=True,
        text=True,
        timeout=WAIT,
        check=False,
    )


def events(stdout: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stdout.splitlines()]


def kinds(stdout: str) -> list[str]:
    return [e["type"] + (f":{e['item']['type']}" if "item" in e else "") for e in events(stdout)]


class Lines:
    """Lines from an unbuffered pipe, each read bounded by ``WAIT``."""

    def __init__(self, pipe: Any) -> None:
        self.fd = pipe.fileno()
        self.buffer = b""

    def next(self) -> str:
        while b"\n" not in self.buffer:
            readable, _, _ = select.select([self.fd], [], [], WAIT)
            assert readable, "no line within the wait"
            chunk = os.read(self.fd, 65536)
            assert chunk, f"EOF after {self.buffer!r}"
            self.buffer += chunk
        line, _, self.buffer = self.buffer.partition(b"\n")
        return line.decode()

    def idle(self) -> bool:
        """Nothing more written so far (checked without waiting)."""
        return not self.buffer and not select.select([self.fd], [], [], 0)[0]


def start(
    fake_codex: FakeCodex, args: Sequence[str], *, cwd: Path, env: Mapping[str, str]
) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [str(fake_codex.path), *args],
        cwd=cwd,
        env=dict(env),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        bufsize=0,
        start_new_session=True,
    )


@pytest.fixture
def processes() -> Iterator[list[subprocess.Popen[bytes]]]:
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for process in started:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=WAIT)
        for pipe in (process.stdin, process.stdout, process.stderr):
            if pipe is not None:
                pipe.close()


# -- a completed run


def test_ok_emits_the_recorded_jsonl_and_writes_the_last_message(
    fake_codex: FakeCodex, repo: Path, tmp_path: Path
) -> None:
    schema = tmp_path / "schema.json"
    schema.write_text(json.dumps(SCHEMA))
    last = tmp_path / "last.txt"
    output = {"ok": True, "summary": "done"}
    args = [
        "exec",
        "--json",
        "-c",
        'approval_policy="never"',
        "-c",
        PROVIDER,
        "-c",
        "model_provider=scripted",
        "--output-schema",
        str(schema),
        "-o",
        str(last),
        "-C",
        str(repo),
        "--sandbox",
        "workspace-write",
        "Do the work item.",
    ]
    env = environment(fake_codex, output=output, file="pkg/hello.txt", command="make test")
    done = run(fake_codex, args, cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr
    assert kinds(done.stdout) == [
        "thread.started",
        "turn.started",
        "item.completed:agent_message",
        "item.started:command_execution",
        "item.completed:command_execution",
        "item.started:file_change",
        "item.completed:file_change",
        "item.completed:agent_message",
        "turn.completed",
    ]
    seen = events(done.stdout)
    assert seen[3]["item"] == {
        "id": "item_2",
        "type": "command_execution",
        "command": "/bin/bash -lc 'make test'",
        "aggregated_output": "",
        "exit_code": None,
        "status": "in_progress",
    }
    assert (seen[4]["item"]["exit_code"], seen[4]["item"]["status"]) == (0, "completed")
    assert seen[6]["item"]["changes"] == [{"path": str(repo / "pkg/hello.txt"), "kind": "add"}]
    assert json.loads(seen[7]["item"]["text"]) == output
    assert set(seen[8]["usage"]) == {
        "input_tokens",
        "cached_input_tokens",
        "cache_write_input_tokens",
        "output_tokens",
        "reasoning_output_tokens",
    }
    assert json.loads(last.read_text()) == output
    assert (repo / "pkg" / "hello.txt").read_text() == "hello\n"
    (record,) = fake_codex.records()
    assert record["cwd"] == str(repo)
    assert record["prompt"] == "Do the work item."  # stdin from /dev/null adds nothing
    assert record["config"] == {
        "approval_policy": "never",
        "model_providers.scripted": {
            "name": "scripted",
            "base_url": "http://127.0.0.1:9/v1",
            "wire_api": "responses",
        },
        "model_provider": "scripted",
    }
    assert record["output_schema"] == SCHEMA
    assert record["sandbox"] == "workspace-write"
    assert "Reading additional input from stdin..." in done.stderr


def test_a_failed_command_is_reported_and_the_run_still_exits_0(
    fake_codex: FakeCodex, repo: Path
) -> None:
    done = run(
        fake_codex, ["exec", "--json", "x"], cwd=repo, env=environment(fake_codex, command_exit="7")
    )
    assert done.returncode == 0
    (completed,) = [
        e["item"]
        for e in events(done.stdout)
        if e["type"] == "item.completed" and e["item"]["type"] == "command_execution"
    ]
    assert (completed["exit_code"], completed["status"]) == (7, "failed")


def test_without_json_stdout_is_the_final_message_and_stderr_a_banner(
    fake_codex: FakeCodex, repo: Path
) -> None:
    done = run(fake_codex, ["exec", "x"], cwd=repo, env=environment(fake_codex, final="All done."))
    assert done.returncode == 0
    assert done.stdout == "All done.\n"
    assert "sandbox: read-only" in done.stderr
    assert "approval: never" in done.stderr


def test_approval_goes_before_exec_or_through_c(fake_codex: FakeCodex, repo: Path) -> None:
    top = run(fake_codex, ["-a", "never", "exec", "--json", "x"], cwd=repo)
    assert top.returncode == 0, top.stderr
    assert fake_codex.records()[-1]["config"] == {"approval_policy": "never"}


# -- refusals


@pytest.mark.parametrize(
    ("args", "unexpected"),
    [
        (["exec", "-a", "never", "x"], "-a"),
        (["exec", "--ask-for-approval", "never", "x"], "--ask-for-approval"),
        (["exec", "--approval-policy", "never", "x"], "--approval-policy"),
        (["exec", "--full-auto", "x"], "--full-auto"),
        (["exec", "--output", "f", "x"], "--output"),  # no abbreviations, as clap
        (["--json", "exec", "x"], "--json"),
    ],
)
def test_usage_errors_exit_2_like_clap(
    fake_codex: FakeCodex, repo: Path, args: list[str], unexpected: str
) -> None:
    done = run(fake_codex, args, cwd=repo)
    assert done.returncode == 2
    assert f"error: unexpected argument '{unexpected}' found" in done.stderr
    assert done.stdout == ""
    assert fake_codex.records() == []


@pytest.fixture
def outside() -> Iterator[Path]:
    """A directory in no git repository, as codex judges it (a ``.git`` in it or in any
    parent). Not under /tmp: codex's own bubblewrap sandbox, run on the host (the codex tests
    "with-bwrap"), leaves an empty ``/tmp/.git`` behind, the mount point it protects a writable
    root's ``.git`` with, and from then on every directory under /tmp is in a repository to
    codex. /var/tmp is no writable root of codex's."""
    base = Path("/var/tmp") if Path("/var/tmp").is_dir() else Path(tempfile.gettempdir())
    path = Path(tempfile.mkdtemp(prefix="cpe-plain-", dir=base))
    try:
        assert not any((d / ".git").exists() for d in (path, *path.parents)), path
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def test_refusals_before_any_event_exit_1(
    fake_codex: FakeCodex, repo: Path, tmp_path: Path, outside: Path
) -> None:
    untrusted = run(fake_codex, ["exec", "--json", "x"], cwd=outside)
    missing_dir = run(fake_codex, ["exec", "--json", "-C", str(tmp_path / "nope"), "x"], cwd=repo)
    missing_schema = run(
        fake_codex,
        ["exec", "--json", "--output-schema", str(tmp_path / "none.json"), "x"],
        cwd=repo,
    )
    assert [p.returncode for p in (untrusted, missing_dir, missing_schema)] == [1, 1, 1]
    assert "Not inside a trusted directory and --skip-git-repo-check" in untrusted.stderr
    assert "failed to change directory" in missing_dir.stderr
    assert "Failed to read output schema file" in missing_schema.stderr
    assert all(p.stdout == "" for p in (untrusted, missing_dir, missing_schema))
    skipped = run(fake_codex, ["exec", "--json", "--skip-git-repo-check", "x"], cwd=outside)
    assert skipped.returncode == 0


def test_an_unknown_mode_is_refused(fake_codex: FakeCodex, repo: Path) -> None:
    done = run(fake_codex, ["exec", "x"], cwd=repo, env=environment(fake_codex, "explode"))
    assert done.returncode == 2
    assert "unknown FAKE_CODEX_MODE" in done.stderr


# -- stdin


def test_an_open_stdin_pipe_holds_the_run_until_eof(
    fake_codex: FakeCodex, repo: Path, processes: list[subprocess.Popen[bytes]]
) -> None:
    process = start(fake_codex, ["exec", "--json", "Do it."], cwd=repo, env=environment(fake_codex))
    processes.append(process)
    assert Lines(process.stderr).next() == "Reading additional input from stdin..."
    stdout = Lines(process.stdout)
    assert stdout.idle()  # the real codex hangs here, silent, while the pipe is open
    assert process.poll() is None
    assert process.stdin is not None
    process.stdin.write(b"extra context")
    process.stdin.close()
    assert json.loads(stdout.next())["type"] == "thread.started"
    assert process.wait(timeout=WAIT) == 0
    assert fake_codex.records()[0]["prompt"] == "Do it.\n\n<stdin>\nextra context\n</stdin>"


def test_a_pipe_that_never_closes_ends_the_fake_at_its_cap(
    fake_codex: FakeCodex, repo: Path, tmp_path: Path
) -> None:
    err = tmp_path / "err.txt"
    with err.open("w") as stderr:
        process = subprocess.Popen(
            [str(fake_codex.path), "exec", "--json", "x"],
            cwd=repo,
            env=environment(fake_codex, hang_seconds=0),
            stdin=subprocess.PIPE,  # held open, never written
            stdout=subprocess.DEVNULL,
            stderr=stderr,
        )
        try:
            assert process.wait(timeout=WAIT) == 124
        finally:
            assert process.stdin is not None
            process.stdin.close()
    assert "stdin never reached EOF" in err.read_text()
    assert fake_codex.records() == []


def test_dash_reads_the_prompt_from_stdin(fake_codex: FakeCodex, repo: Path) -> None:
    done = run(fake_codex, ["exec", "--json", "-"], cwd=repo, stdin_text="The prompt.\n")
    assert done.returncode == 0, done.stderr
    assert fake_codex.records()[0]["prompt"] == "The prompt.\n"


# -- fault modes


def test_turn_failed_exits_1_with_an_empty_last_message_file(
    fake_codex: FakeCodex, repo: Path, tmp_path: Path
) -> None:
    last = tmp_path / "last.txt"
    env = environment(fake_codex, "turn_failed", error="boom")
    done = run(fake_codex, ["exec", "--json", "-o", str(last), "x"], cwd=repo, env=env)
    assert done.returncode == 1
    assert kinds(done.stdout) == ["thread.started", "turn.started", "error", "turn.failed"]
    assert events(done.stdout)[2:] == [
        {"type": "error", "message": "boom"},
        {"type": "turn.failed", "error": {"message": "boom"}},
    ]
    assert last.read_text() == ""


def test_hang_goes_silent_after_turn_started_until_killed(
    fake_codex: FakeCodex, repo: Path, processes: list[subprocess.Popen[bytes]]
) -> None:
    process = start(
        fake_codex, ["exec", "--json", "x"], cwd=repo, env=environment(fake_codex, "hang")
    )
    processes.append(process)
    assert process.stdin is not None
    process.stdin.close()
    stdout = Lines(process.stdout)
    assert [json.loads(stdout.next())["type"] for _ in range(2)] == [
        "thread.started",
        "turn.started",
    ]
    assert stdout.idle()
    assert process.poll() is None
    assert fake_codex.pid() == process.pid  # the wrapper execs the fake: one process
    os.killpg(process.pid, signal.SIGKILL)
    assert process.wait(timeout=WAIT) == -signal.SIGKILL


def test_ignore_sigterm_ignores_it_from_the_start(
    fake_codex: FakeCodex, repo: Path, processes: list[subprocess.Popen[bytes]]
) -> None:
    env = environment(fake_codex, "ignore_sigterm")
    process = start(fake_codex, ["exec", "--json", "x"], cwd=repo, env=env)
    processes.append(process)
    assert process.stdin is not None
    process.stdin.close()
    assert json.loads(Lines(process.stdout).next())["type"] == "thread.started"
    status = Path(f"/proc/{process.pid}/status").read_text()
    ignored = int(next(line for line in status.splitlines() if line.startswith("SigIgn:"))[7:], 16)
    assert ignored & (1 << (signal.SIGTERM - 1))
    os.killpg(process.pid, signal.SIGKILL)
    assert process.wait(timeout=WAIT) == -signal.SIGKILL


def test_crash_exits_mid_turn_with_a_panic(fake_codex: FakeCodex, repo: Path) -> None:
    done = run(fake_codex, ["exec", "--json", "x"], cwd=repo, env=environment(fake_codex, "crash"))
    assert done.returncode == 101
    assert "panicked" in done.stderr
    assert kinds(done.stdout) == ["thread.started", "turn.started", "item.completed:agent_message"]
    custom = run(
        fake_codex,
        ["exec", "--json", "x"],
        cwd=repo,
        env=environment(fake_codex, "crash", exit_code="3"),
    )
    assert custom.returncode == 3


def test_no_output_exits_0_having_printed_nothing(
    fake_codex: FakeCodex, repo: Path, tmp_path: Path
) -> None:
    last = tmp_path / "last.txt"
    env = environment(fake_codex, "no_output")
    done = run(fake_codex, ["exec", "--json", "-o", str(last), "x"], cwd=repo, env=env)
    assert (done.returncode, done.stdout) == (0, "")
    assert not last.exists()


def test_garbage_prints_lines_that_are_not_json(fake_codex: FakeCodex, repo: Path) -> None:
    done = run(
        fake_codex, ["exec", "--json", "x"], cwd=repo, env=environment(fake_codex, "garbage")
    )
    assert done.returncode == 0
    first, second, *rest = done.stdout.splitlines()
    assert [json.loads(first)["type"], json.loads(second)["type"]] == [
        "thread.started",
        "turn.started",
    ]
    assert rest == ["this line is not JSON", "{this line starts like JSON but is not"]
    for line in rest:
        with pytest.raises(json.JSONDecodeError):
            json.loads(line)

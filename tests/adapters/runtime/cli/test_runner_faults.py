"""The ``claude-cli`` runner with fake CLIs: capabilities, refusals, and faults the real CLI
will not produce on demand. Whatever the end, no process of the run's group survives."""

from __future__ import annotations

import contextlib
import json
import sys
import threading
from pathlib import Path

import psutil
import pytest

from adapters.runtime.artifacts.store import read_prompt
from adapters.runtime.claude.cli_runner import ClaudeCliRunner
from adapters.runtime.cli.jsonl import CliOutcome
from adapters.runtime.cli.process import group_members
from adapters.runtime.cli.request import RunRejectedError, RunRequest
from adapters.runtime.cli.runner import CliRunner
from adapters.runtime.pricing import DEFAULT_PRICES
from tests.fakes.executable import write_executable
from tests.support.git import make_repo

FAKE = Path(__file__).with_name("fake_cli.py")


@pytest.fixture
def worktree(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "repo")


@pytest.fixture
def cli(tmp_path: Path) -> Path:
    return write_executable(tmp_path / "bin" / "claude", f"#!{sys.executable}\n" + FAKE.read_text())


def runner(
    tmp_path: Path, cli: Path, wall_timeout: float | None = None, idle_timeout: float | None = None
) -> ClaudeCliRunner:
    return ClaudeCliRunner(
        tmp_path / "state",
        cli_path=str(cli),
        kill_grace=1,
        wall_timeout=wall_timeout,
        idle_timeout=idle_timeout,
    )


def run(
    tmp_path: Path, cli: Path, worktree: Path, mode: str, **kw: float
) -> tuple[CliOutcome, list[int]]:
    pids = tmp_path / f"{mode}.pids"
    request = RunRequest(
        run_id=f"run-{mode}",
        worktree_path=worktree,
        prompt="do the thing",
        env={"FAKE_MODE": mode, "FAKE_PIDS": str(pids), "PATH": "/usr/bin:/bin"},
    )
    handle = runner(tmp_path, cli, **kw).start(request, request.prompt, request.env)
    outcome = handle.wait(timeout=120)
    assert not group_members(handle.process.pid)
    listed = [int(p) for p in pids.read_text().split()] if pids.exists() else []
    return outcome, listed


def assert_gone(pids: list[int]) -> None:
    for pid in pids:
        with contextlib.suppress(psutil.NoSuchProcess):
            assert psutil.Process(pid).status() == psutil.STATUS_ZOMBIE, pid


def metadata(outcome: CliOutcome) -> dict[str, object]:
    path = outcome.artifacts.path("runner_metadata")
    assert path is not None
    loaded: dict[str, object] = json.loads(path.read_text())
    return loaded


@pytest.mark.spec("S003-01")
@pytest.mark.spec("S003-02")
@pytest.mark.spec("S004-03")
def test_the_runner_offers_the_interface_and_machine_readable_capabilities(
    tmp_path: Path, cli: Path
) -> None:
    claude = runner(tmp_path, cli)
    assert isinstance(claude, CliRunner)
    caps = claude.get_capabilities().as_dict()
    json.dumps(caps)  # plain data
    assert caps["supports_model"] is True
    assert caps["supports_non_interactive"] is True
    assert "supports_prompt_file_inclusion" in caps
    assert set(caps["available_models"]) == {"sonnet", "opus", "haiku"}
    assert set(caps["enforces"]) == {
        "writable_workspace",
        "sandboxed_execution",
        "approval_controls",
        "tool_allow_deny",
        "structured_event_stream",
        "interactive_prompt_suppression",
    }


@pytest.mark.spec("S003-03")
@pytest.mark.spec("S003-04")
@pytest.mark.spec("S004-04")
def test_a_request_the_runner_cannot_honour_is_rejected_before_anything_runs(
    tmp_path: Path, cli: Path, worktree: Path
) -> None:
    claude = runner(tmp_path, cli)
    base = RunRequest(run_id="r", worktree_path=worktree, prompt="p")
    for bad in (
        RunRequest(run_id="r", worktree_path=worktree, prompt="p", model="gpt-5"),
        RunRequest(
            run_id="r",
            worktree_path=worktree,
            prompt="p",
            requested_policy=frozenset({"sandboxed_execution"}),
        ),
    ):
        with pytest.raises(RunRejectedError):
            claude.start(bad, bad.prompt, None)
    assert not (tmp_path / "state" / "runs" / "r").exists()  # nothing recorded, nothing ran
    assert "--model" not in claude.command(base, "p")
    with_model = RunRequest(run_id="r", worktree_path=worktree, prompt="p", model="haiku")
    assert claude.command(with_model, "p")[-4:] == ["--model", "haiku", "--", "p"]


@pytest.mark.spec("S003-06")
def test_a_working_directory_that_is_not_a_worktree_is_refused(
    tmp_path: Path, cli: Path, worktree: Path
) -> None:
    (worktree / "sub").mkdir()
    for cwd in (tmp_path / "plain", worktree / "sub", tmp_path / "missing"):
        if cwd.name == "plain":
            cwd.mkdir()
        with pytest.raises(RunRejectedError, match="not a git worktree"):
            runner(tmp_path, cli).start(RunRequest(run_id="r", worktree_path=cwd, prompt="p"))


@pytest.mark.spec("S003-05")
@pytest.mark.spec("S003-07")
@pytest.mark.spec("S004-07")
@pytest.mark.spec("S004-09")
@pytest.mark.spec("S004-11")
def test_a_clean_run_is_completed_with_the_normalized_artifacts(
    tmp_path: Path, cli: Path, worktree: Path
) -> None:
    outcome, pids = run(tmp_path, cli, worktree, "ok")
    assert outcome.termination == "completed", outcome.reason
    assert outcome.exit_code == 0
    assert outcome.result is not None
    assert outcome.result["structured_output"] == {"ok": True}
    meta = metadata(outcome)
    assert meta["agent_family"] == "claude_cli"
    assert read_prompt(outcome.artifacts.run_dir) == "do the thing"
    assert meta["termination"] == "completed"
    for key in ("invocation_mode", "command", "working_directory", "started_at", "ended_at"):
        assert meta[key], key
    assert meta["capture_format"] == "claude_stream_json"
    # the final result, as the CLI gave it: its text and its structured output
    final_path = outcome.artifacts.path("runner_final_response")
    assert final_path is not None
    final = json.loads(final_path.read_text())
    assert final["available"] is True
    assert final["text"] == "done"
    assert final["structured_output"] == {"ok": True}
    assert (final["subtype"], final["is_error"]) == ("success", False)
    transcript = outcome.artifacts.path("runner_transcript")
    assert transcript is not None
    events = [json.loads(line) for line in transcript.read_text().splitlines()]
    assert [e["type"] for e in events] == ["system", "assistant", "result"]
    init = events[0]
    assert init["argv"][:5] == [
        "-p",
        "--output-format",
        "stream-json",
        "--verbose",
        "--permission-mode",
    ]
    assert init["argv"][-2:] == ["--", "do the thing"]
    assert init["stdin"] == ""  # /dev/null: no input reaches the process (S003-06)
    final = outcome.artifacts.path("runner_final_response")
    assert final is not None
    assert "structured_output" in final.read_text()
    assert "hello" in (outcome.artifacts.run_dir / "stdout.log").read_text()  # raw capture too
    assert_gone(pids)


@pytest.mark.spec("S004-11")
@pytest.mark.spec("S003-11")
def test_a_hang_with_no_output_is_killed_idle_and_nothing_survives(
    tmp_path: Path, cli: Path, worktree: Path
) -> None:
    outcome, pids = run(tmp_path, cli, worktree, "hang", idle_timeout=3)
    assert outcome.termination == "killed_idle"
    assert outcome.process is not None
    assert outcome.process.cancelled_at is not None
    assert metadata(outcome)["termination"] == "killed_idle"
    assert "cancelled_at" in str(metadata(outcome)["extra"])
    assert_gone(pids)


@pytest.mark.spec("S003-07")
def test_events_are_handed_over_as_they_stream_not_when_the_process_ends(
    tmp_path: Path, cli: Path, worktree: Path
) -> None:
    """A CLI that never ends (``chatty``: a line every 50 ms): its events reach ``on_event``
    while it runs, and its transcript grows meanwhile."""
    seen: list[dict[str, object]] = []
    three = threading.Event()

    def on_event(event: dict[str, object]) -> None:
        seen.append(event)
        if len(seen) >= 3:
            three.set()

    request = RunRequest(
        run_id="run-streaming",
        worktree_path=worktree,
        prompt="do the thing",
        env={"FAKE_MODE": "chatty", "PATH": "/usr/bin:/bin"},
    )
    handle = runner(tmp_path, cli).start(request, request.prompt, request.env, on_event=on_event)
    try:
        assert three.wait(60), "no event reached on_event while the CLI ran"
        assert psutil.pid_exists(handle.process.pid)
        assert group_members(handle.process.pid), "the CLI had ended: events came only at the end"
        assert seen[0] == {"type": "system", "subtype": "tick"}
    finally:
        handle.stop()
        outcome = handle.wait(timeout=120)
    assert outcome.termination == "killed_policy"


def test_a_cli_that_goes_on_past_its_budget_is_stopped_by_cpe(
    tmp_path: Path, cli: Path, worktree: Path
) -> None:
    """The CLI is given --max-budget-usd and checks it after each message; one that starts
    another message past it anyway is stopped by cpe from its streamed usage, priced."""
    request = RunRequest(
        run_id="run-overspend",
        worktree_path=worktree,
        prompt="do the thing",
        env={"FAKE_MODE": "overspend", "PATH": "/usr/bin:/bin"},
        max_budget_usd=5.0,
        prices=DEFAULT_PRICES,
    )
    handle = runner(tmp_path, cli).start(request, request.prompt, request.env)
    outcome = handle.wait(timeout=120)
    assert outcome.termination == "killed_policy"
    assert outcome.reason is not None
    assert outcome.reason.startswith(
        "budget: the run reached [budget] per_run_usd ($5.0) and the CLI went on: stopped by cpe"
    )
    # $3 a message: two messages ($6) were over, the third was the one too many (a loaded
    # machine may read a few more already in the pipe before the kill lands)
    assert 3 <= len(handle.live.messages) < 1000
    assert outcome.reason.endswith("at $6.0003 counted from its streamed usage")  # + output
    meta = metadata(outcome)
    assert meta["termination"] == "killed_policy"
    assert "--max-budget-usd" in str(meta["command"])


@pytest.mark.spec("S003-13")
@pytest.mark.spec("S004-11")
def test_a_long_run_is_killed_at_the_wall_clock_timeout(
    tmp_path: Path, cli: Path, worktree: Path
) -> None:
    outcome, pids = run(tmp_path, cli, worktree, "chatty", wall_timeout=3, idle_timeout=60)
    assert outcome.termination == "killed_timeout"
    assert_gone(pids)


@pytest.mark.spec("S003-08")
@pytest.mark.spec("S003-12")
def test_a_non_zero_exit_is_an_error_with_stderr_logged(
    tmp_path: Path, cli: Path, worktree: Path
) -> None:
    outcome, pids = run(tmp_path, cli, worktree, "fail")
    assert outcome.termination == "error"
    assert outcome.exit_code == 3
    log = (outcome.artifacts.run_dir / "transcript.log").read_text()
    assert "invalid API key" in log
    assert_gone(pids)


@pytest.mark.spec("S004-12")
@pytest.mark.spec("S004-13")
def test_a_missing_transcript_is_an_error_even_with_exit_zero(
    tmp_path: Path, cli: Path, worktree: Path
) -> None:
    outcome, pids = run(tmp_path, cli, worktree, "silent")
    assert outcome.exit_code == 0
    assert outcome.termination == "error"
    assert metadata(outcome)["termination"] == "error"
    assert_gone(pids)


@pytest.mark.spec("S004-13")
@pytest.mark.spec("S003-06")
def test_a_cli_that_prompts_for_input_gets_none_and_the_run_is_an_error(
    tmp_path: Path, cli: Path, worktree: Path
) -> None:
    outcome, _ = run(tmp_path, cli, worktree, "prompt", idle_timeout=60)
    assert outcome.termination == "error"
    assert outcome.result is None


@pytest.mark.spec("S004-11")
def test_a_malformed_capture_is_an_error(tmp_path: Path, cli: Path, worktree: Path) -> None:
    outcome, _ = run(tmp_path, cli, worktree, "garbage")
    assert outcome.termination == "error"
    assert "malformed" in (outcome.reason or "")


@pytest.mark.spec("S003-12")
def test_a_missing_command_fails_the_run(tmp_path: Path, worktree: Path) -> None:
    claude = runner(tmp_path, tmp_path / "no-such-claude")
    with pytest.raises(FileNotFoundError, match="no-such-claude"):
        claude.start(RunRequest(run_id="gone", worktree_path=worktree, prompt="p"))
    meta = json.loads((tmp_path / "state" / "runs" / "gone" / "runner_metadata.json").read_text())
    assert meta["termination"] == "error"


@pytest.mark.spec("S003-11")
@pytest.mark.spec("S003-14")
def test_stop_kills_the_group_and_records_the_cancellation(
    tmp_path: Path, cli: Path, worktree: Path
) -> None:
    pids_file = tmp_path / "stop.pids"
    claude = runner(tmp_path, cli)
    request = RunRequest(
        run_id="run-stop",
        worktree_path=worktree,
        prompt="p",
        env={"FAKE_MODE": "chatty", "FAKE_PIDS": str(pids_file)},
    )
    seen: list[dict[str, object]] = []
    handle = claude.start(request, request.prompt, request.env, on_event=seen.append)
    claude.stop(handle)
    outcome = handle.wait(timeout=60)
    assert outcome.termination == "killed_policy"
    assert outcome.process is not None
    assert outcome.process.cancelled_at is not None
    assert not group_members(handle.process.pid)
    if pids_file.exists():
        assert_gone([int(p) for p in pids_file.read_text().split()])
    again = claude.start(
        RunRequest(run_id="run-stop-2", worktree_path=worktree, prompt="p", env={}), "p", {}
    )
    assert again is not handle  # a new run, a new process (S003-14)
    assert again.wait(timeout=60).termination == "completed"


@pytest.mark.spec("S003-06")
def test_a_prompt_too_long_for_argv_is_read_from_a_file_on_stdin(
    tmp_path: Path, cli: Path, worktree: Path
) -> None:
    claude = ClaudeCliRunner(tmp_path / "state", cli_path=str(cli), argv_prompt_bytes=10)
    prompt = "a prompt longer than ten bytes"
    request = RunRequest(run_id="long", worktree_path=worktree, prompt=prompt, env={})
    outcome = claude.start(request, prompt, {}).wait(timeout=60)
    assert outcome.termination == "completed", outcome.reason
    transcript = outcome.artifacts.path("runner_transcript")
    assert transcript is not None
    init = json.loads(transcript.read_text().splitlines()[0])
    assert init["stdin"] == prompt
    assert "--" not in init["argv"]
    assert prompt not in init["argv"]
    assert not (outcome.artifacts.run_dir / ".prompt-stdin").exists()
    assert read_prompt(outcome.artifacts.run_dir) == prompt

"""A codex run whose sandbox could not run its commands is an error that says so and why
(``codex/sandbox.py``), told apart from a run whose commands ran and failed. The session log
shapes below are the ones codex 0.169.0 wrote when its sandbox could not exec its helper."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from adapters.runtime.cli.cli_runtime import CliRuntimeConfig
from adapters.runtime.cli.request import RunRequest
from adapters.runtime.codex.runner import CodexCliRunner, create_codex_runtime
from adapters.runtime.codex.sandbox import (
    find_session_log,
    sandbox_errors,
    sandbox_failure,
)
from domain.errors import AgentFailure
from domain.models import ImplementorStartParams, SessionId, WorkItemId
from domain.ports import SessionLogging
from tests.adapters.runtime.driving import drive, provider_deps
from tests.fakes.codex_cli_fixture import FakeCodex
from tests.support.git import make_repo

NO_HELPER = "bwrap: execvp codex-linux-sandbox: No such file or directory"
WARNING = (
    "WARNING: proceeding, even though we could not create PATH aliases: Refusing to create "
    'helper binaries under temporary dir "/tmp" (codex_home: AbsolutePathBuf("/tmp/h/.codex"))\n'
    "Reading additional input from stdin...\n"
)
EXEC_COMMAND = {  # gpt-5-codex: exec_command's output as the model gets it
    "type": "function_call_output",
    "call_id": "call_1",
    "output": "Chunk ID: d836a9\nWall time: 0.0000 seconds\nProcess exited with code 1\n"
    f"Original token count: 16\nOutput:\n{NO_HELPER}\n",
}
CODE_MODE = {  # the default model: a JavaScript exec whose exec_command result is JSON text
    "type": "custom_tool_call_output",
    "call_id": "call_2",
    "output": [
        {"type": "input_text", "text": "Script completed\nWall time 0.1 seconds\nOutput:\n"},
        {
            "type": "input_text",
            "text": json.dumps({"chunk_id": "a22c0b", "exit_code": 1, "output": NO_HELPER + "\n"}),
        },
    ],
}
PATCH_FAILED = {  # apply_patch through the same sandbox: the cause does not show
    "type": "custom_tool_call_output",
    "call_id": "call_3",
    "output": [{"type": "input_text", "text": "Script error:\nFailed to write file /r/a.py\n"}],
}
PANIC = (
    "thread 'main' (2) panicked at linux-sandbox/src/linux_run_main.rs:1199:5:\n"
    "error applying Linux sandbox restrictions: landlock unavailable\n"
)


def session_log(directory: Path, thread: str, *outputs: dict[str, Any]) -> Path:
    log = (
        directory
        / "sessions"
        / "2026"
        / "11"
        / "25"
        / f"rollout-2026-11-25T22-08-01-{thread}.jsonl"
    )
    log.parent.mkdir(parents=True)
    lines = [{"type": "session_meta", "payload": {"id": thread}}]
    lines += [{"type": "response_item", "payload": output} for output in outputs]
    lines.append({"type": "event_msg", "payload": {"type": "task_complete"}})
    log.write_text("\n".join(json.dumps(line) for line in lines) + "\nnot json\n")
    return log


def ran(output: str, exit_code: int = 0) -> dict[str, Any]:
    """A completed ``command_execution`` item of --json's stdout."""
    return {"type": "command_execution", "aggregated_output": output, "exit_code": exit_code}


def test_bubblewrap_errors_and_sandbox_helper_panics_are_sandbox_level_errors() -> None:
    assert sandbox_errors(f"{NO_HELPER}\n") == [NO_HELPER]
    assert sandbox_errors("bwrap: No permissions to create new namespace\n") == [
        "bwrap: No permissions to create new namespace"
    ]
    assert sandbox_errors(PANIC) == [
        "codex-linux-sandbox: error applying Linux sandbox restrictions: landlock unavailable"
    ]
    assert sandbox_errors("FAILED (failures=1)\nmy bwrap: wrapper said no\n") == []


def test_the_session_log_is_found_by_the_thread_id(tmp_path: Path) -> None:
    log = session_log(tmp_path, "01a2-thread", EXEC_COMMAND)
    session_log(tmp_path / "other", "01a2-other", EXEC_COMMAND)
    assert find_session_log(tmp_path, "01a2-thread") == log
    assert find_session_log(tmp_path, "01a2-missing") is None


@pytest.mark.parametrize(
    "outputs", [(EXEC_COMMAND,), (PATCH_FAILED, CODE_MODE, CODE_MODE)], ids=["exec", "code-mode"]
)
def test_commands_that_all_failed_in_the_sandbox_are_a_failure_naming_the_error_and_why(
    tmp_path: Path, outputs: tuple[dict[str, Any], ...]
) -> None:
    log = session_log(tmp_path, "t", *outputs)
    failure = sandbox_failure(log, [], WARNING)
    assert failure is not None
    assert failure.errors == (NO_HELPER,)
    assert failure.failed == len([o for o in outputs if o is not PATCH_FAILED])
    assert failure.reason == (
        f"codex's sandbox could not run commands: {failure.failed} "
        f"{'command' if failure.failed == 1 else 'commands'} failed before starting "
        f"({NO_HELPER}) and none ran; at start codex could not create its helper aliases: "
        'Refusing to create helper binaries under temporary dir "/tmp" '
        '(codex_home: AbsolutePathBuf("/tmp/h/.codex"))'
    )


def test_a_command_both_on_stdout_and_in_the_session_log_counts_once(tmp_path: Path) -> None:
    """codex prints a command it could not start on stdout only now and then (timing)."""
    log = session_log(tmp_path, "t", EXEC_COMMAND)
    failure = sandbox_failure(log, [ran(f"{NO_HELPER}\n", 1)], WARNING)
    assert failure is not None
    assert (failure.failed, failure.errors) == (1, (NO_HELPER,))


def test_a_run_in_which_a_command_ran_is_no_sandbox_failure(tmp_path: Path) -> None:
    log = session_log(tmp_path, "t", EXEC_COMMAND)
    assert sandbox_failure(log, [ran("ok\n")], WARNING) is None
    # a command that ran and failed is the agent's business
    assert sandbox_failure(None, [ran("FAILED (failures=1)\n", 1)], "") is None
    # a stdout item whose output is a sandbox error did not run (should codex report one)
    assert sandbox_failure(None, [ran(f"{NO_HELPER}\n", 1)], "") is not None


def test_without_sandbox_errors_or_commands_there_is_no_failure(tmp_path: Path) -> None:
    assert sandbox_failure(session_log(tmp_path, "t", PATCH_FAILED), [], WARNING) is None
    assert sandbox_failure(None, [], WARNING) is None


def test_a_failure_without_codex_s_warning_names_the_error_only(tmp_path: Path) -> None:
    failure = sandbox_failure(session_log(tmp_path, "t", EXEC_COMMAND), [], "")
    assert failure is not None
    assert failure.helpers is None
    assert failure.reason.endswith(f"({NO_HELPER}) and none ran")


def test_a_codex_run_whose_sandbox_ran_nothing_is_an_error_saying_why(tmp_path: Path) -> None:
    """Against the fake codex (its ``sandbox_broken`` mode plays what 0.169.0 did): exit 0,
    ``turn.completed`` and a structured output, but the run's outcome is an error."""
    fake = FakeCodex.install(tmp_path / "fake")
    output = {"role": "implementor", "outcome": "completed", "summary": "tests pass"}
    env = {
        **fake.env("sandbox_broken", hang_seconds=60, output=output),
        "PATH": "/usr/bin:/bin",
        "CODEX_HOME": str(tmp_path / "codex-home"),
    }
    (tmp_path / "codex-home").mkdir()
    runner = CodexCliRunner(tmp_path / "state", cli_path=str(fake.path), kill_grace=1)
    request = RunRequest(
        run_id="run-1", worktree_path=make_repo(tmp_path / "repo"), prompt="go", env=env
    )
    outcome = runner.start(request).wait(timeout=60)

    assert (outcome.termination, outcome.exit_code, outcome.infrastructure) == (
        "error",
        0,
        "sandbox",
    )
    assert outcome.reason is not None
    assert outcome.reason.startswith("codex's sandbox could not run commands: 1 command failed")
    assert NO_HELPER in outcome.reason
    assert "Refusing to create helper binaries under temporary dir" in outcome.reason
    assert outcome.result is not None
    assert outcome.result["is_error"] is True
    meta = json.loads((tmp_path / "state/runs/run-1/runner_metadata.json").read_text())
    assert (meta["termination"], meta["termination_reason"]) == ("error", outcome.reason)
    assert meta["extra"]["infrastructure_failure"] == "sandbox"


def test_the_runtime_turns_a_sandbox_failure_into_an_agent_failure_with_the_reason(
    tmp_path: Path,
) -> None:
    fake = FakeCodex.install(tmp_path / "fake")
    repo = make_repo(tmp_path / "repo", {"README.md": "demo\n"}, with_agents=True)
    state = tmp_path / "state"
    config = CliRuntimeConfig(
        repo_root=str(repo),
        default_branch="main",
        max_agent_duration=120,
        logging=SessionLogging(logs_dir=str(state / "logs")),
        # codex's temporary directory elsewhere: the run's home stays in its state directory
        agent_env={**fake.env("sandbox_broken", file="f.py"), "TMPDIR": str(tmp_path / "t")},
        isolated_home=True,
    )
    deps = provider_deps(("1", "in-progress", "Greeting", "Add greet(name)."))
    adapter = create_codex_runtime(config, deps, cli_path=str(fake.path), kill_grace=1)
    params = ImplementorStartParams(
        session_id=SessionId("impl-1"), work_item_id=WorkItemId("1"), branch_name="cpe/1-x"
    )

    _, result = drive(adapter, params)

    assert isinstance(result, AgentFailure)
    assert result.kind == "failed"  # until the domain has a kind for infrastructure failures
    assert result.reason.startswith("error: codex's sandbox could not run commands")
    assert NO_HELPER in result.reason

"""The ``codex-cli`` runner against the fake ``codex`` (tests/fakes/codex_cli.py), which takes
the real 0.169.0 command line and emits its recorded JSONL. Whatever the end of a run, no
process of its group survives."""

from __future__ import annotations

import contextlib
import json
import os
import stat
import tomllib
from pathlib import Path
from typing import Any, cast

import psutil
import pytest

from adapters.bash_guard import BashGuardConfig
from adapters.runtime.artifacts.store import read_prompt
from adapters.runtime.cli.cli_runtime import CliRuntime, CliRuntimeConfig
from adapters.runtime.cli.jsonl import CliOutcome
from adapters.runtime.cli.process import group_members
from adapters.runtime.cli.request import AgentProfile, RunRejectedError, RunRequest
from adapters.runtime.cli.runner import CliRunner
from adapters.runtime.codex.run import NETWORK_WAITS
from adapters.runtime.codex.runner import (
    CodexCliRun,
    CodexCliRunner,
    create_codex_runtime,
    toml_string,
)
from adapters.scripted_model.responses_wire import codex_overrides
from domain.ports import RuntimeAdapterDeps, SessionLogging
from domain.results import output_schema, strict_output_schema, validate_output
from tests.fakes.codex_cli_fixture import FakeCodex
from tests.support.git import make_repo

OUTPUT = {"role": "implementor", "outcome": "completed", "summary": "done"}


@pytest.fixture
def worktree(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "repo")


def make_runner(tmp_path: Path, fake_codex: FakeCodex, **kw: Any) -> CodexCliRunner:
    return CodexCliRunner(tmp_path / "state", cli_path=str(fake_codex.path), kill_grace=1, **kw)


def request(worktree: Path, fake_codex: FakeCodex, mode: str = "ok", **kw: Any) -> RunRequest:
    settings = kw.pop("settings", {})
    env = {**fake_codex.env(mode, hang_seconds=60, **settings), "PATH": "/usr/bin:/bin"}
    fields: dict[str, Any] = {
        "run_id": f"run-{mode}",
        "worktree_path": worktree,
        "prompt": "implement the work item",
        "env": env,
        **kw,
    }
    return RunRequest(**fields)


def finish(handle: CodexCliRun) -> CliOutcome:
    """Wait for the run; then assert that no process of its group is left."""
    outcome = handle.wait(timeout=60)
    pid = handle.process.pid
    assert not group_members(pid)
    with contextlib.suppress(psutil.NoSuchProcess):
        assert psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    return outcome


def run(tmp_path: Path, fake_codex: FakeCodex, req: RunRequest, **kw: Any) -> CliOutcome:
    handle = make_runner(tmp_path, fake_codex, **kw).start(req, req.prompt, req.env)
    return finish(handle)


def read_json(outcome: CliOutcome, role: str) -> Any:
    path = outcome.artifacts.path(role)
    assert path is not None
    return json.loads(path.read_text())


def transcript_types(outcome: CliOutcome) -> list[str]:
    path = outcome.artifacts.path("runner_transcript")
    assert path is not None
    return [json.loads(line)["type"] for line in path.read_text().splitlines()]


@pytest.mark.spec("S003-01")
@pytest.mark.spec("S003-02")
@pytest.mark.spec("S004-03")
@pytest.mark.spec("S003-15")
def test_the_codex_runner_offers_the_interface_and_honest_capabilities(
    tmp_path: Path, fake_codex: FakeCodex
) -> None:
    codex = make_runner(tmp_path, fake_codex)
    assert isinstance(codex, CliRunner)
    caps = codex.get_capabilities().as_dict()
    json.dumps(caps)
    assert caps["name"] == "codex-cli"
    assert caps["supports_model"] is True
    assert caps["supports_non_interactive"] is True
    assert caps["available_models"]
    assert caps["enforces"] == {
        "writable_workspace": True,
        "sandboxed_execution": True,
        "approval_controls": True,
        "tool_allow_deny": False,
        "structured_event_stream": True,
        "interactive_prompt_suppression": True,
    }
    custom = make_runner(tmp_path, fake_codex, models=("gpt-test",))
    assert custom.get_capabilities().available_models == ("gpt-test",)
    full = make_runner(tmp_path, fake_codex, sandbox="danger-full-access").get_capabilities()
    assert (full.sandboxed_execution, full.writable_workspace) == (False, True)
    read_only = make_runner(tmp_path, fake_codex, sandbox="read-only").get_capabilities()
    assert (read_only.sandboxed_execution, read_only.writable_workspace) == (True, False)


@pytest.mark.spec("S003-10")
@pytest.mark.spec("S004-04")
def test_the_full_access_sandbox_of_the_seed_is_a_choice_that_drops_the_sandbox_guarantee(
    tmp_path: Path, fake_codex: FakeCodex, worktree: Path
) -> None:
    codex = make_runner(tmp_path, fake_codex, sandbox="danger-full-access")
    with pytest.raises(RunRejectedError, match="sandboxed_execution"):
        codex.start(
            *_args(
                request(worktree, fake_codex, requested_policy=frozenset({"sandboxed_execution"}))
            )
        )
    outcome = finish(codex.start(*_args(request(worktree, fake_codex))))
    assert outcome.termination == "completed"
    (record,) = fake_codex.records()
    assert record["sandbox"] == "danger-full-access"
    assert read_json(outcome, "runner_metadata")["effective_policy"]["sandbox"] == (
        "danger-full-access"
    )


@pytest.mark.spec("S004-10")
@pytest.mark.spec("S004-05")
@pytest.mark.spec("S004-06")
@pytest.mark.spec("S004-07")
@pytest.mark.spec("S004-08")
@pytest.mark.spec("S003-05")
@pytest.mark.spec("S003-07")
def test_a_completed_run_returns_the_structured_output_and_its_artifacts(
    tmp_path: Path, fake_codex: FakeCodex, worktree: Path
) -> None:
    events: list[dict[str, Any]] = []
    req = request(worktree, fake_codex, output_schema=output_schema("implementor"))
    req = RunRequest(**{**vars(req), "env": {**(req.env or {}), **fake_codex.env(output=OUTPUT)}})
    handle = make_runner(tmp_path, fake_codex).start(
        req, req.prompt, req.env, on_event=events.append
    )
    outcome = finish(handle)

    assert (outcome.termination, outcome.exit_code, outcome.reason) == ("completed", 0, None)
    assert outcome.result is not None
    assert validate_output("implementor", outcome.result["structured_output"]) == validate_output(
        "implementor", OUTPUT
    )
    assert outcome.result["num_turns"] == 1
    assert outcome.result["usage"]["input_tokens"] == 200
    assert outcome.result["usage"]["reasoning_output_tokens"] == 10
    assert events[0]["type"] == "thread.started"
    # codex was handed the strict schema, as a file
    (record,) = fake_codex.records()
    assert record["output_schema"] == strict_output_schema("implementor")

    assert transcript_types(outcome) == [
        "thread.started",
        "turn.started",
        "item.completed",
        "item.started",
        "item.completed",
        "item.completed",
        "turn.completed",
    ]
    final = read_json(outcome, "runner_final_response")
    assert json.loads(final["text"]) == OUTPUT
    assert final["structured_output"] == OUTPUT
    meta = read_json(outcome, "runner_metadata")
    assert meta["agent_family"] == "codex_cli"
    assert meta["capture_format"] == "codex_exec_jsonl"
    assert read_prompt(outcome.artifacts.run_dir) == "implement the work item"
    assert meta["command"][:2] == [str(fake_codex.path), "exec"]
    assert meta["termination"] == "completed"
    assert meta["exit_code"] == 0
    assert meta["usage"]["input_tokens"] == 200
    assert meta["working_directory"] == str(worktree)
    # the native captures are kept as optional artifacts, beside the normalized three
    last = outcome.artifacts.path("codex_last_message")
    assert last is not None
    assert json.loads(last.read_text()) == OUTPUT
    schema = outcome.artifacts.path("codex_output_schema")
    assert schema is not None
    assert json.loads(schema.read_text()) == record["output_schema"]
    assert not (outcome.artifacts.run_dir / ".codex-last-message").exists()


@pytest.mark.spec("S003-10")
@pytest.mark.spec("S004-02")
@pytest.mark.spec("S003-04")
def test_the_command_uses_the_flags_codex_exec_really_accepts(
    tmp_path: Path, fake_codex: FakeCodex, worktree: Path
) -> None:
    instructions = 'You are the "implementor".\nUse tabs\there; a backslash \\ too.'
    req = request(
        worktree,
        fake_codex,
        model="gpt-5-codex",
        agent=AgentProfile("implementor", "implements", instructions),
        prompt="-starts with a dash",
    )
    overrides = codex_overrides("http://127.0.0.1:9")
    outcome = run(tmp_path, fake_codex, req, overrides=overrides)
    assert outcome.termination == "completed"

    (record,) = fake_codex.records()
    argv: list[str] = record["argv"]
    assert argv[0] == "exec"
    assert "--json" in argv
    assert not {"--approval-policy", "-a", "--full-auto"} & set(argv)
    assert argv[argv.index("--sandbox") + 1] == "workspace-write"
    assert argv[argv.index("-C") + 1] == str(worktree)
    assert argv[-2:] == ["--", "-starts with a dash"]
    assert record["config"]["approval_policy"] == "never"
    assert record["config"]["developer_instructions"] == instructions
    assert record["config"]["model_provider"] == "scripted"
    assert record["config"]["model_providers.scripted"]["wire_api"] == "responses"
    assert record["model"] == "gpt-5-codex"
    assert record["sandbox"] == "workspace-write"
    assert record["cwd"] == str(worktree)
    assert record["prompt"] == "-starts with a dash"  # nothing came from stdin


def test_toml_string_round_trips_through_a_toml_parser() -> None:
    for text in ("plain", 'quote " and \\', "line\nbreak\ttab\x01\x7f", "ünïcode ✓ 😀"):
        assert tomllib.loads(f"v = {toml_string(text)}")["v"] == text


@pytest.mark.spec("S003-06")
@pytest.mark.spec("S004-13")
@pytest.mark.spec("S004-11")
def test_a_silent_command_at_work_is_activity_not_idleness(
    tmp_path: Path, fake_codex: FakeCodex, worktree: Path
) -> None:
    """A test suite that prints nothing for longer than the idle timeout: the run goes on,
    because a tool is at work (item.started without its item.completed)."""
    settings = {"command_seconds": "4"}
    outcome = run(
        tmp_path,
        fake_codex,
        request(worktree, fake_codex, "ok", idle_timeout=1.5, settings=settings),
    )
    assert outcome.termination == "completed", outcome.reason


def test_stdin_is_dev_null_and_a_silent_codex_is_killed_idle(
    tmp_path: Path, fake_codex: FakeCodex, worktree: Path
) -> None:
    seen: dict[str, Any] = {}
    codex = make_runner(tmp_path, fake_codex)
    req = request(worktree, fake_codex, "hang", idle_timeout=2.0)
    handle: list[CodexCliRun] = []

    def on_event(event: dict[str, Any]) -> None:  # while the fake is alive and hanging
        if event.get("type") == "turn.started":
            pid = fake_codex.pid()
            seen["stdin"] = os.readlink(f"/proc/{pid}/fd/0")
            seen["fifo"] = stat.S_ISFIFO(os.stat(f"/proc/{pid}/fd/0").st_mode)

    handle.append(codex.start(req, req.prompt, req.env, on_event=on_event))
    outcome = finish(handle[0])
    assert seen == {"stdin": os.devnull, "fifo": False}
    assert outcome.termination == "killed_idle"
    assert outcome.result is None
    meta = read_json(outcome, "runner_metadata")
    assert meta["termination"] == "killed_idle"
    assert meta["extra"]["cancelled_at"]
    assert fake_codex.records()[0]["prompt"] == "implement the work item"


@pytest.mark.spec("S003-11")
@pytest.mark.spec("S003-13")
@pytest.mark.spec("S004-11")
def test_a_long_run_that_ignores_sigterm_is_killed_timeout(
    tmp_path: Path, fake_codex: FakeCodex, worktree: Path
) -> None:
    req = request(worktree, fake_codex, "ignore_sigterm", wall_timeout=1.0)
    outcome = run(tmp_path, fake_codex, req)
    assert outcome.termination == "killed_timeout"
    assert read_json(outcome, "runner_metadata")["termination"] == "killed_timeout"


@pytest.mark.spec("S003-11")
def test_stop_kills_the_group_as_killed_policy(
    tmp_path: Path, fake_codex: FakeCodex, worktree: Path
) -> None:
    codex = make_runner(tmp_path, fake_codex)
    req = request(worktree, fake_codex, "hang")
    handles: list[CodexCliRun] = []

    def on_event(event: dict[str, Any]) -> None:
        if event.get("type") == "turn.started":
            codex.stop(handles[0])

    handles.append(codex.start(req, req.prompt, req.env, on_event=on_event))
    outcome = finish(handles[0])
    assert outcome.termination == "killed_policy"


@pytest.mark.spec("S003-08")
@pytest.mark.spec("S003-13")
@pytest.mark.spec("S004-11")
@pytest.mark.spec("S004-12")  # no_output: no transcript, no last message, exit 0 → error
@pytest.mark.parametrize(
    "case",
    [
        ("crash", 101, "exit code 101"),
        ("no_output", 0, "without a turn.completed"),
        ("garbage", 0, "2 malformed stdout line(s)"),
        ("turn_failed", 1, "turn.failed: unexpected status 400"),
    ],
)
def test_a_failed_run_is_an_error(
    tmp_path: Path, fake_codex: FakeCodex, worktree: Path, case: tuple[str, int, str]
) -> None:
    mode, exit_code, reason = case
    outcome = run(tmp_path, fake_codex, request(worktree, fake_codex, mode))
    assert outcome.termination == "error"
    assert outcome.exit_code == exit_code
    assert outcome.reason is not None
    assert reason in outcome.reason
    meta = read_json(outcome, "runner_metadata")
    assert meta["termination"] == "error"
    assert meta["exit_code"] == exit_code
    if mode == "turn_failed":
        assert outcome.result is not None
        assert outcome.result["is_error"] is True
        assert transcript_types(outcome)[-2:] == ["error", "turn.failed"]


@pytest.mark.parametrize(
    "said",
    [
        "unexpected status 401 Unauthorized: Incorrect API key provided, url: http://x/v1/responses",
        "unexpected status 503 Service Unavailable: overloaded, url: http://x/v1/responses",
        "exceeded retry limit, last status: 429 Too Many Requests",
        "We\u2019re currently experiencing high demand, which may cause temporary errors.",
        "Selected model is at capacity. Please try a different model.",
        "You\u2019ve hit your usage limit. Upgrade to Pro (https://chatgpt.com/explore/pro), "
        "visit https://chatgpt.com/settings/usage to purchase more credits or try again at "
        "7:43 AM.",
        "Quota exceeded. Check your plan and billing details.",
    ],
    ids=[
        "refused", "unavailable", "rate limited", "server error", "overloaded", "usage limit",
        "out of credits",
    ],
)  # fmt: skip
def test_a_turn_the_model_api_failed_is_an_infrastructure_failure(
    tmp_path: Path, fake_codex: FakeCodex, worktree: Path, said: str
) -> None:
    """What codex 0.169.0 says once its retries are spent: not the work's fault."""
    outcome = run(
        tmp_path, fake_codex, request(worktree, fake_codex, "turn_failed", settings={"error": said})
    )
    assert outcome.termination == "error"
    assert outcome.infrastructure == "model-api"
    assert outcome.reason == f"the model API failed: {said}"
    assert read_json(outcome, "runner_metadata")["extra"]["infrastructure_failure"] == "model-api"


def test_a_bad_request_stays_the_work_s_failure(
    tmp_path: Path, fake_codex: FakeCodex, worktree: Path
) -> None:
    """A 400 is what the run asked for (a schema codex's API refuses): no infrastructure."""
    outcome = run(tmp_path, fake_codex, request(worktree, fake_codex, "turn_failed"))
    assert outcome.termination == "error"
    assert outcome.infrastructure is None


def test_codex_waiting_for_the_network_is_stopped_as_an_infrastructure_failure(
    tmp_path: Path, fake_codex: FakeCodex, worktree: Path
) -> None:
    """The real codex retries an API it cannot connect to forever: after a few of its network
    waits in a row the run is stopped, its processes gone, and the model API named."""
    outcome = run(tmp_path, fake_codex, request(worktree, fake_codex, "offline"))
    assert outcome.termination == "error"
    assert outcome.infrastructure == "model-api"
    assert outcome.reason is not None
    assert outcome.reason.startswith("codex cannot reach the model API: Reconnecting... waiting")
    assert transcript_types(outcome).count("error") >= NETWORK_WAITS  # more may come meanwhile


@pytest.mark.spec("S004-11")
def test_an_error_item_is_not_fatal_and_unknown_events_are_ignored(
    tmp_path: Path, fake_codex: FakeCodex, worktree: Path
) -> None:
    codex = make_runner(tmp_path, fake_codex)
    handle = codex.start(*_args(request(worktree, fake_codex)))
    handle.line("stdout", json.dumps({"type": "item.completed", "item": {"type": "error"}}))
    handle.line("stdout", json.dumps({"type": "something.new", "x": 1}))
    outcome = finish(handle)
    assert outcome.termination == "completed"
    assert "something.new" in transcript_types(outcome)


def _args(req: RunRequest) -> tuple[RunRequest, str, Any]:
    return req, req.prompt, req.env


@pytest.mark.spec("S003-03")
@pytest.mark.spec("S004-04")
def test_a_request_codex_cannot_honour_is_rejected_before_anything_runs(
    tmp_path: Path, fake_codex: FakeCodex, worktree: Path
) -> None:

    codex = make_runner(tmp_path, fake_codex)
    for bad in (
        request(worktree, fake_codex, model="opus"),
        request(worktree, fake_codex, requested_policy=frozenset({"tool_allow_deny"})),
        request(worktree, fake_codex, bash_guard=BashGuardConfig()),
        request(worktree, fake_codex, max_turns=3),
        request(worktree, fake_codex, worktree_path=tmp_path),
    ):
        with pytest.raises(RunRejectedError):
            codex.start(*_args(bad))
    assert not fake_codex.pid_file.exists()
    assert fake_codex.records() == []
    assert not (tmp_path / "state" / "runs").exists()


@pytest.mark.spec("S003-06")
def test_a_long_prompt_goes_on_stdin_from_a_file(
    tmp_path: Path, fake_codex: FakeCodex, worktree: Path
) -> None:
    prompt = "x" * 5000
    req = request(worktree, fake_codex, prompt=prompt)
    outcome = run(tmp_path, fake_codex, req, argv_prompt_bytes=1000)
    assert outcome.termination == "completed"
    (record,) = fake_codex.records()
    assert record["argv"][-1] == "-"
    assert record["prompt"] == prompt
    assert read_prompt(outcome.artifacts.run_dir) == prompt


@pytest.mark.spec("S003-12")
def test_a_missing_cli_fails_to_start_and_the_run_is_an_error(
    tmp_path: Path, worktree: Path
) -> None:
    codex = CodexCliRunner(tmp_path / "state", cli_path=str(tmp_path / "no-codex"))
    req = RunRequest(run_id="r", worktree_path=worktree, prompt="p")
    with pytest.raises(FileNotFoundError):
        codex.start(req, req.prompt, {})
    meta = json.loads((tmp_path / "state" / "runs" / "r" / "runner_metadata.json").read_text())
    assert meta["termination"] == "error"


def test_create_codex_runtime_builds_a_cli_runtime_over_the_codex_runner(
    tmp_path: Path, worktree: Path
) -> None:
    config = CliRuntimeConfig(
        repo_root=str(worktree),
        default_branch="main",
        max_agent_duration=60,
        logging=SessionLogging(logs_dir=str(tmp_path / "logs")),
    )
    overrides = codex_overrides("http://127.0.0.1:9")
    runtime = create_codex_runtime(
        config, cast(RuntimeAdapterDeps, object()), cli_path="codex", overrides=overrides
    )
    assert isinstance(runtime, CliRuntime)
    assert isinstance(runtime.runner, CodexCliRunner)
    assert runtime.runner.overrides == tuple(overrides)
    assert runtime.runner.state_dir == tmp_path.absolute()

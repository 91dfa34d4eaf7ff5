"""The ``claude-cli`` runtime end to end: the real bundled ``claude`` CLI in ``-p`` stream-json
mode, in real worktrees, against the scripted model (only the model is scripted)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from adapters.runtime.artifacts.store import read_prompt
from adapters.runtime.claude.cli_runner import ClaudeCliRunner, create_claude_cli_runtime
from adapters.runtime.cli.cli_runtime import CliRuntime, CliRuntimeConfig
from adapters.runtime.cli.process import group_members
from adapters.scripted_model import Match, ScriptedModelServer, load_scenario
from domain.errors import AgentFailure
from domain.models import (
    ImplementorStartParams,
    PlannerStartParams,
    SessionId,
    WorkItemId,
)
from domain.ports import RuntimeAdapter, SessionLogging
from domain.results import ImplementorResult, PlannerResult
from tests.adapters.runtime.driving import drive, drive_with_usage, provider_deps
from tests.adapters.runtime.transcripts import assert_transcript_switch
from tests.support.git import git_raw, make_repo


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    files = {"specs/greeting.md": "# Greeting\nA greet(name) function.\n", "README.md": "demo\n"}
    return make_repo(tmp_path / "repo", files, with_agents=True)


@pytest.fixture
def server() -> Iterator[ScriptedModelServer]:
    book = [
        load_scenario("hang", match=Match(role="implementor", prompt=r"#8\b")),
        load_scenario("denied_bash", match=Match(role="implementor", prompt=r"#7\b")),
        load_scenario("implement"),
        load_scenario("planner"),
    ]
    with ScriptedModelServer(book) as s:
        yield s


def runtime(repo: Path, server: ScriptedModelServer, logs: Path, **config: Any) -> CliRuntime:
    deps = provider_deps(
        ("1", "in-progress", "Greeting", "Add greet(name)."),
        ("8", "in-progress", "Hang", ""),
        ("7", "in-progress", "Push it", ""),
    )
    settings: dict[str, Any] = {
        "repo_root": str(repo),
        "default_branch": "main",
        "max_agent_duration": 180,
        "logging": SessionLogging(logs_dir=str(logs)),
        "agent_env": server.client_env(),
        "isolated_home": True,
    }
    settings.update(config)
    return create_claude_cli_runtime(CliRuntimeConfig(**settings), deps, kill_grace=2)


def pgid_of(run_dir: Path) -> int:
    meta = json.loads((run_dir / "runner_metadata.json").read_text())
    pgid: int = meta["extra"]["pgid"]
    return pgid


@pytest.mark.spec("S003-09")
@pytest.mark.spec("S004-09")
@pytest.mark.spec("S004-05")
@pytest.mark.spec("S004-06")
@pytest.mark.spec("S004-16")
@pytest.mark.spec("S003-15")
def test_an_implementor_run_on_the_real_cli_returns_a_patch_that_applies(
    repo: Path, server: ScriptedModelServer, tmp_path: Path
) -> None:
    adapter = runtime(repo, server, tmp_path / "state" / "logs")
    assert isinstance(adapter, RuntimeAdapter)
    params = ImplementorStartParams(
        session_id=SessionId("implementor-1"), work_item_id=WorkItemId("1"), branch_name="cpe/1-x"
    )
    chunks, result = drive(adapter, params)
    assert isinstance(result, ImplementorResult), result
    assert result.outcome == "completed"
    assert "greeting.py" in (result.patch or "")
    (tmp_path / "p.diff").write_text(result.patch or "")
    git_raw(repo, "apply", "--check", str(tmp_path / "p.diff"))
    assert any("greeting module" in c for c in chunks)
    # the worktree and its branch are gone, and so is every process of the run
    assert not (repo / ".worktrees" / "cpe" / "1-x").exists()
    assert "cpe/1-x" not in git_raw(repo, "branch", "--list")
    run_dir = tmp_path / "state" / "runs" / "implementor-1"
    assert not group_members(pgid_of(run_dir))
    meta = json.loads((run_dir / "runner_metadata.json").read_text())
    assert meta["agent_family"] == "claude_cli"
    assert meta["termination"] == "completed"
    assert meta["exit_code"] == 0
    assert "--json-schema" in meta["command"]
    assert "--verbose" in meta["command"]
    assert "#1" in (read_prompt(run_dir) or "")
    assert meta["requested_policy"]
    assert meta["effective_policy"]
    events = [
        json.loads(line) for line in (run_dir / "runner_transcript.jsonl").read_text().splitlines()
    ]
    assert events[0]["type"] == "system"
    assert events[-1]["type"] == "result"
    final = json.loads((run_dir / "runner_final_response.json").read_text())
    assert "structured_output" in json.dumps(final)
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert "runner_transcript" in json.dumps(manifest)


@pytest.mark.spec("S003-04")
def test_a_planner_runs_on_the_real_cli_in_the_repository_worktree(
    repo: Path, server: ScriptedModelServer, tmp_path: Path
) -> None:
    adapter = runtime(repo, server, tmp_path / "state" / "logs")
    params = PlannerStartParams(
        session_id=SessionId("planner-1"), spec_paths=("specs/greeting.md",)
    )
    _, result = drive(adapter, params)
    assert isinstance(result, PlannerResult), result
    assert len(result.create) == 2


@pytest.mark.parametrize("enabled", [True, False])
@pytest.mark.spec("S004-06")
def test_the_human_transcript_follows_the_logging_switch_on_the_real_cli(
    repo: Path, server: ScriptedModelServer, tmp_path: Path, enabled: bool
) -> None:
    logging = SessionLogging(agent_sessions=enabled, logs_dir=str(tmp_path / "state" / "logs"))
    adapter = runtime(repo, server, tmp_path / "state" / "logs", logging=logging)
    params = PlannerStartParams(
        session_id=SessionId("planner-1"), spec_paths=("specs/greeting.md",)
    )

    async def main() -> tuple[str | None, Any]:
        handle = await adapter.start_agent(params)
        _ = [chunk async for chunk in handle.output]
        return handle.log_file_path, await handle.result

    log_file_path, result = anyio.run(main)
    assert isinstance(result, PlannerResult), result
    run_dir = tmp_path / "state" / "runs" / "planner-1"
    assert_transcript_switch(run_dir, log_file_path, enabled, "assistant:")
    meta = json.loads((run_dir / "runner_metadata.json").read_text())
    assert meta["termination"] == "completed"


def test_the_real_cli_reads_a_long_prompt_from_stdin(
    repo: Path, server: ScriptedModelServer, tmp_path: Path
) -> None:
    adapter = runtime(repo, server, tmp_path / "state" / "logs")
    assert isinstance(adapter.runner, ClaudeCliRunner)
    adapter.runner.argv_prompt_bytes = 0  # every prompt goes on stdin
    params = PlannerStartParams(
        session_id=SessionId("planner-2"), spec_paths=("specs/greeting.md",)
    )
    _, result = drive(adapter, params)
    assert isinstance(result, PlannerResult), result
    meta = json.loads(
        (tmp_path / "state" / "runs" / "planner-2" / "runner_metadata.json").read_text()
    )
    assert meta["command"][-1] != "--"
    assert "greet" in (read_prompt(tmp_path / "state" / "runs" / "planner-2") or "")
    turns = [r.conversation for r in server.requests if r.kind == "turn"]
    assert turns
    assert turns[0] is not None
    assert "greet(name)" in turns[0].prompt  # the model saw the prompt read from stdin


@pytest.mark.spec("S003-03")
def test_a_model_the_runner_cannot_honour_fails_before_the_cli_starts(
    repo: Path, server: ScriptedModelServer, tmp_path: Path
) -> None:
    adapter = runtime(repo, server, tmp_path / "state" / "logs", model="gpt-5-codex")
    params = ImplementorStartParams(
        session_id=SessionId("implementor-m"), work_item_id=WorkItemId("1"), branch_name="cpe/1-m"
    )
    with pytest.raises(AgentFailure, match="gpt-5-codex"):
        drive(adapter, params)
    assert not (tmp_path / "state" / "runs" / "implementor-m").exists()
    assert not (repo / ".worktrees" / "cpe" / "1-m").exists()
    assert "cpe/1-m" not in git_raw(repo, "branch", "--list")
    assert server.requests == ()  # the CLI never ran


@pytest.mark.spec("S003-13")
@pytest.mark.spec("S004-11")
def test_a_hanging_model_is_killed_idle_and_nothing_survives(
    repo: Path, server: ScriptedModelServer, tmp_path: Path
) -> None:
    adapter = runtime(repo, server, tmp_path / "state" / "logs", idle_timeout=8)
    params = ImplementorStartParams(
        session_id=SessionId("implementor-8"), work_item_id=WorkItemId("8"), branch_name="cpe/8-x"
    )
    _, failure = drive(adapter, params)
    assert isinstance(failure, AgentFailure)
    assert failure.kind == "timed-out"
    run_dir = tmp_path / "state" / "runs" / "implementor-8"
    meta = json.loads((run_dir / "runner_metadata.json").read_text())
    assert meta["termination"] == "killed_idle"
    assert not group_members(pgid_of(run_dir))
    assert not (repo / ".worktrees" / "cpe" / "8-x").exists()


def test_the_bash_guard_denies_a_push_through_the_cli_hook(
    repo: Path, server: ScriptedModelServer, tmp_path: Path
) -> None:
    adapter = runtime(repo, server, tmp_path / "state" / "logs")
    params = ImplementorStartParams(
        session_id=SessionId("implementor-7"), work_item_id=WorkItemId("7"), branch_name="cpe/7-x"
    )
    _, result = drive(adapter, params)
    assert isinstance(result, ImplementorResult), result
    assert "NOTES.md" in (result.patch or "")
    run_dir = tmp_path / "state" / "runs" / "implementor-7"
    results = [
        block
        for line in (run_dir / "runner_transcript.jsonl").read_text().splitlines()
        if (event := json.loads(line))["type"] == "user"
        for block in event["message"]["content"]
        if isinstance(block, dict) and block.get("type") == "tool_result"
    ]
    push = [b for b in results if "push" in json.dumps(b)]
    assert push, results
    assert push[0]["is_error"] is True
    assert "hook" in json.dumps(push[0]).lower()
    assert "cannot check" not in json.dumps(push[0])  # the guard's verdict, not a hook failure
    meta = json.loads((run_dir / "runner_metadata.json").read_text())
    assert '"tool_name": "Bash"' in json.dumps(meta["permission_denials"])
    assert meta["effective_policy"]["bash_guard"] == "deny"


@pytest.mark.spec("S003-11")
@pytest.mark.spec("S003-13")
def test_cancel_and_the_wall_clock_timeout_kill_the_real_cli(
    repo: Path, server: ScriptedModelServer, tmp_path: Path
) -> None:
    adapter = runtime(repo, server, tmp_path / "state" / "logs")
    params = ImplementorStartParams(
        session_id=SessionId("implementor-8c"), work_item_id=WorkItemId("8"), branch_name="cpe/8-c"
    )

    async def cancel_while_hanging() -> AgentFailure:
        handle = await adapter.start_agent(params)
        hanging = await anyio.to_thread.run_sync(
            lambda: server.wait_until(lambda s: s.hanging >= 1, timeout=120)
        )
        assert hanging
        adapter.cancel_agent(SessionId("implementor-8c"))
        chunks = [c async for c in handle.output]  # the stream ends
        assert all(isinstance(c, str) for c in chunks)
        with pytest.raises(AgentFailure) as caught:
            await handle.result
        return caught.value

    failure = anyio.run(cancel_while_hanging)
    assert failure.kind == "cancelled"
    run_dir = tmp_path / "state" / "runs" / "implementor-8c"
    meta = json.loads((run_dir / "runner_metadata.json").read_text())
    assert meta["termination"] == "killed_policy"
    assert meta["extra"]["cancelled_at"]
    assert not group_members(pgid_of(run_dir))
    assert not (repo / ".worktrees" / "cpe" / "8-c").exists()

    timed = runtime(repo, server, tmp_path / "state" / "logs", max_agent_duration=6)
    params = ImplementorStartParams(
        session_id=SessionId("implementor-8t"), work_item_id=WorkItemId("8"), branch_name="cpe/8-t"
    )
    _, failure = drive(timed, params)
    assert isinstance(failure, AgentFailure)
    assert failure.kind == "timed-out"
    run_dir = tmp_path / "state" / "runs" / "implementor-8t"
    assert json.loads((run_dir / "runner_metadata.json").read_text())["termination"] == (
        "killed_timeout"
    )
    assert not group_members(pgid_of(run_dir))
    assert not (repo / ".worktrees" / "cpe" / "8-t").exists()


def test_a_run_the_model_api_refuses_is_an_infrastructure_failure_on_the_real_cli(
    repo: Path, server: ScriptedModelServer, tmp_path: Path
) -> None:
    """``claude -p`` with no credential at all: its result says ``api_error``; the failure is
    not the work's, and its reason is the CLI's own words."""
    env = {
        k: v
        for k, v in server.client_env().items()
        if k not in ("ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL")
    }
    adapter = runtime(
        repo, server, tmp_path / "state" / "logs", agent_env={**env, "CLAUDE_CODE_MAX_RETRIES": "0"}
    )
    params = ImplementorStartParams(
        session_id=SessionId("implementor-9"), work_item_id=WorkItemId("1"), branch_name="cpe/1-x"
    )
    _, failure = drive(adapter, params)
    assert isinstance(failure, AgentFailure), failure
    assert failure.infrastructure
    assert "the model API failed: Not logged in" in failure.reason


def test_a_run_past_its_budget_on_the_real_cli_is_killed_policy_and_an_attempt(
    repo: Path, server: ScriptedModelServer, tmp_path: Path
) -> None:
    """--max-budget-usd from [budget] per_run_usd: the CLI stops after the turn that crossed
    it; the run ends killed_policy, saying budget, as a failure (not a cancel)."""
    adapter = runtime(repo, server, tmp_path / "state" / "logs", max_budget_usd=0.001)
    params = ImplementorStartParams(
        session_id=SessionId("implementor-1"), work_item_id=WorkItemId("1"), branch_name="cpe/1-x"
    )
    _, failure = drive(adapter, params)
    assert isinstance(failure, AgentFailure), failure
    assert failure.kind == "failed"
    assert "budget: the run reached [budget] per_run_usd ($0.001)" in failure.reason
    meta = json.loads(
        (tmp_path / "state" / "runs" / "implementor-1" / "runner_metadata.json").read_text()
    )
    assert meta["termination"] == "killed_policy"
    assert "--max-budget-usd" in meta["command"]
    assert not (repo / ".worktrees" / "cpe" / "1-x").exists()


def test_an_implementor_changing_nothing_on_the_real_cli_is_stopped(
    repo: Path, tmp_path: Path
) -> None:
    """The unchanged-worktree breaker on `claude -p`: different Bash calls, none changing the
    worktree; past the limit the run's group is stopped, saying so, as a failure."""
    with ScriptedModelServer([load_scenario("wander")]) as wandering:
        adapter = runtime(repo, wandering, tmp_path / "state" / "logs", unchanged_limit=4)
        params = ImplementorStartParams(
            session_id=SessionId("implementor-1"),
            work_item_id=WorkItemId("1"),
            branch_name="cpe/1-x",
        )
        _, failure = drive(adapter, params)
    assert isinstance(failure, AgentFailure), failure
    assert failure.kind == "failed"
    assert "no progress: 4 tool calls in a row changed nothing in the worktree" in failure.reason
    run_dir = tmp_path / "state" / "runs" / "implementor-1"
    meta = json.loads((run_dir / "runner_metadata.json").read_text())
    assert meta["termination"] == "killed_policy"
    assert not group_members(pgid_of(run_dir))
    assert not (repo / ".worktrees" / "cpe" / "1-x").exists()


def test_a_run_repeating_the_same_tool_call_on_the_real_cli_is_stopped(
    repo: Path, tmp_path: Path
) -> None:
    """The no-progress breaker on `claude -p`: the CLI's stream shows the same Bash call again
    and again; at the limit the run's group is stopped, saying so, as a failure."""
    with ScriptedModelServer([load_scenario("loop")]) as looping:
        adapter = runtime(repo, looping, tmp_path / "state" / "logs", repeat_limit=3)
        params = ImplementorStartParams(
            session_id=SessionId("implementor-1"),
            work_item_id=WorkItemId("1"),
            branch_name="cpe/1-x",
        )
        failure, usage = drive_with_usage(adapter, params)
    assert isinstance(failure, AgentFailure), failure
    assert failure.kind == "failed"
    assert "no progress: the same Bash call 3 times in a row" in failure.reason
    # no result event, so no cost from the CLI: the tokens it streamed, priced (not unknown)
    assert usage.input_tokens is not None
    assert usage.input_tokens > 0
    assert usage.cost_usd is not None
    assert usage.cost_usd > 0
    run_dir = tmp_path / "state" / "runs" / "implementor-1"
    meta = json.loads((run_dir / "runner_metadata.json").read_text())
    assert meta["termination"] == "killed_policy"
    assert not group_members(pgid_of(run_dir))
    assert not (repo / ".worktrees" / "cpe" / "1-x").exists()


def test_the_real_cli_stops_a_run_at_the_definitions_max_turns(repo: Path, tmp_path: Path) -> None:
    """maxTurns reaches `claude -p` as --max-turns, and the CLI holds it: a scenario that would
    go on for ever (different calls, so no other breaker sees it) ends at the limit."""
    definition = repo / ".claude" / "agents" / "implementor.md"
    text = definition.read_text()
    assert "maxTurns: 150" in text
    definition.write_text(text.replace("maxTurns: 150", "maxTurns: 3"))
    with ScriptedModelServer([load_scenario("wander")]) as wandering:
        adapter = runtime(repo, wandering, tmp_path / "state" / "logs")
        params = ImplementorStartParams(
            session_id=SessionId("implementor-1"),
            work_item_id=WorkItemId("1"),
            branch_name="cpe/1-x",
        )
        _, failure = drive(adapter, params)
        turns = [r for r in wandering.requests if r.kind == "turn"]
    assert isinstance(failure, AgentFailure), failure
    assert failure.kind == "failed"  # an attempt spent
    assert "no progress: the run reached max_turns (3)" in failure.reason
    assert len(turns) == 3
    meta = json.loads(
        (tmp_path / "state" / "runs" / "implementor-1" / "runner_metadata.json").read_text()
    )
    assert meta["termination"] == "killed_policy"
    assert "--max-turns" in meta["command"]

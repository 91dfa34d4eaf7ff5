"""The ``codex-cli`` runtime: ``CliRuntime`` over the codex runner, driven like any runtime
(``start_agent`` → output chunks → a validated result), against the fake ``codex``. The real
binary's end-to-end runs are in ``test_real.py``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest

from adapters.runtime.cli.cli_runtime import CliRuntime, CliRuntimeConfig
from adapters.runtime.cli.process import PIDFILE, group_members
from adapters.runtime.cli.request import RunRequest
from adapters.runtime.codex.runner import (
    CODEX_MODEL_VARIABLES,
    CodexCliRunner,
    create_codex_runtime,
)
from domain.errors import AgentFailure
from domain.models import (
    ImplementorStartParams,
    PlannerStartParams,
    SessionId,
    WorkItemId,
)
from domain.ports import RuntimeAdapter, RuntimeAdapterDeps, SessionLogging
from domain.results import ImplementorResult, PlannerResult, output_schema
from tests.adapters.runtime.driving import drive, provider_deps
from tests.adapters.runtime.transcripts import assert_transcript_switch
from tests.fakes.codex_cli_fixture import FakeCodex
from tests.support.git import git_raw, make_repo

PLAN = {
    "role": "planner",
    "create": [
        {
            "temp_id": "a",
            "title": "Greeting",
            "body": "Add greet(name).",
            "labels": [],
            "blocked_by": [],
        }
    ],
    "close": [],
    "update": [],
}
DONE = {"role": "implementor", "outcome": "completed", "summary": "added feature.py"}


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    files = {"specs/greeting.md": "# Greeting\nA greet(name) function.\n", "README.md": "demo\n"}
    return make_repo(tmp_path / "repo", files, with_agents=True)


def deps() -> RuntimeAdapterDeps:
    return provider_deps(("1", "in-progress", "Greeting", "Add greet(name)."))


def runtime(
    repo: Path,
    fake_codex: FakeCodex,
    state: Path,
    env: dict[str, str],
    *,
    agent_sessions: bool = True,
    **kw: Any,
) -> CliRuntime:
    config = CliRuntimeConfig(
        repo_root=str(repo),
        default_branch="main",
        max_agent_duration=120,
        logging=SessionLogging(agent_sessions=agent_sessions, logs_dir=str(state / "logs")),
        agent_env=env,
    )
    return create_codex_runtime(config, deps(), cli_path=str(fake_codex.path), kill_grace=1, **kw)


def metadata(state: Path, session: str) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(
        (state / "runs" / session / "runner_metadata.json").read_text()
    )
    return loaded


def argv_value(argv: list[str], flag: str) -> str:
    return argv[argv.index(flag) + 1]


@pytest.mark.spec("S004-01")
@pytest.mark.spec("S004-02")
@pytest.mark.spec("S004-04")
@pytest.mark.spec("S003-15")
def test_a_planner_on_codex_runs_read_only_confined_by_the_sandbox(
    repo: Path, fake_codex: FakeCodex, tmp_path: Path
) -> None:
    """The request is intent (S004-01/02): a planner needs no writable workspace, and codex,
    which cannot enforce tool lists or cpe's Bash guard, is asked for its sandbox instead; the
    runner turns that into ``--sandbox read-only``, not the configured workspace-write."""
    state = tmp_path / "state"
    adapter = runtime(
        repo, fake_codex, state, fake_codex.env("ok", output=PLAN, text="Reading the spec.")
    )
    assert isinstance(adapter, RuntimeAdapter)
    params = PlannerStartParams(
        session_id=SessionId("planner-1"), spec_paths=("specs/greeting.md",)
    )
    chunks, result = drive(adapter, params)
    assert isinstance(result, PlannerResult), result
    assert [item.title for item in result.create] == ["Greeting"]
    assert "Reading the spec." in chunks  # agent_message items stream as output
    (record,) = fake_codex.records()
    assert argv_value(record["argv"], "--sandbox") == "read-only"
    assert Path(record["cwd"]).resolve() == repo.resolve()
    meta = metadata(state, "planner-1")
    assert meta["agent_family"] == "codex_cli"
    # the request names the task it rendered, where it ran and which definition it came from
    assert meta["prompt_reference"] == ".claude/agents/planner.md"
    assert Path(meta["working_directory"]).resolve() == repo.resolve()
    assert meta["prompt_chars"] > 0
    required = meta["requested_policy"]["require"]
    assert "sandboxed_execution" in required
    assert "tool_allow_deny" not in required
    assert "writable_workspace" not in required
    assert meta["effective_policy"]["sandbox"] == "read-only"
    # what the agent definition asks and codex cannot enforce is recorded, not dropped silently;
    # its turn limit (.claude/agents/planner.md: 30) cpe enforces itself, counting tool calls
    not_enforced = meta["effective_policy"]["not_enforced"]
    assert "max_turns" not in not_enforced
    assert meta["effective_policy"]["max_turns"] == "30 tool calls, counted by cpe"
    assert "Read" in not_enforced["tools"]
    assert not any(arg.startswith("--max-turns") for arg in record["argv"])
    assert meta["usage"]["input_tokens"] > 0  # from turn.completed
    assert meta["num_turns"] == 1


@pytest.mark.parametrize("enabled", [True, False])
@pytest.mark.spec("S004-06")
def test_the_human_transcript_follows_the_logging_switch_and_the_normalized_set_is_kept(
    repo: Path, fake_codex: FakeCodex, tmp_path: Path, enabled: bool
) -> None:
    state = tmp_path / "state"
    env = fake_codex.env("ok", output=PLAN, text="Reading the spec.")
    adapter = runtime(repo, fake_codex, state, env, agent_sessions=enabled)
    params = PlannerStartParams(
        session_id=SessionId("planner-1"), spec_paths=("specs/greeting.md",)
    )

    async def main() -> tuple[str | None, Any]:
        handle = await adapter.start_agent(params)
        _ = [chunk async for chunk in handle.output]
        return handle.log_file_path, await handle.result

    log_file_path, result = anyio.run(main)
    assert isinstance(result, PlannerResult), result
    run_dir = state / "runs" / "planner-1"
    assert_transcript_switch(run_dir, log_file_path, enabled, "Reading the spec.")
    events = (run_dir / "runner_transcript.jsonl").read_text()
    assert "Reading the spec." in events
    assert metadata(state, "planner-1")["termination"] == "completed"


@pytest.mark.spec("S004-04")
def test_an_implementor_on_codex_writes_in_its_worktree_and_returns_the_patch(
    repo: Path, fake_codex: FakeCodex, tmp_path: Path
) -> None:
    state = tmp_path / "state"
    env = fake_codex.env("ok", output=DONE, file="feature.py", file_content="X = 1\n")
    adapter = runtime(repo, fake_codex, state, env)
    params = ImplementorStartParams(
        session_id=SessionId("implementor-1"), work_item_id=WorkItemId("1"), branch_name="cpe/1-x"
    )
    _, result = drive(adapter, params)
    assert isinstance(result, ImplementorResult), result
    assert result.outcome == "completed"
    assert "+X = 1" in (result.patch or "")
    (record,) = fake_codex.records()
    assert argv_value(record["argv"], "--sandbox") == "workspace-write"
    assert Path(record["cwd"]).name == "1-x"  # the implementor's own worktree
    assert "cpe/1-x" not in git_raw(repo, "branch", "--list")  # cleaned up after the run
    meta = metadata(state, "implementor-1")
    assert "writable_workspace" in meta["requested_policy"]["require"]
    assert meta["effective_policy"]["sandbox"] == "workspace-write"
    assert meta["termination"] == "completed"


def test_an_implementor_that_changed_nothing_fails_and_the_failure_names_it(
    repo: Path, fake_codex: FakeCodex, tmp_path: Path
) -> None:
    adapter = runtime(repo, fake_codex, tmp_path / "state", fake_codex.env("ok", output=DONE))
    params = ImplementorStartParams(
        session_id=SessionId("implementor-2"), work_item_id=WorkItemId("1"), branch_name="cpe/1-y"
    )
    _, result = drive(adapter, params)
    assert isinstance(result, AgentFailure)
    assert "no changes" in str(result)


def test_a_failed_codex_turn_is_an_agent_failure_with_the_reason(
    repo: Path, fake_codex: FakeCodex, tmp_path: Path
) -> None:
    adapter = runtime(
        repo, fake_codex, tmp_path / "state", fake_codex.env("turn_failed", error="quota")
    )
    params = PlannerStartParams(
        session_id=SessionId("planner-2"), spec_paths=("specs/greeting.md",)
    )
    _, result = drive(adapter, params)
    assert isinstance(result, AgentFailure)
    assert result.kind == "failed"
    assert "quota" in str(result)


def test_codex_with_full_access_confines_nothing_and_is_refused_when_built(
    repo: Path, fake_codex: FakeCodex, tmp_path: Path
) -> None:
    with pytest.raises(ValueError, match="unconfined agent"):
        runtime(repo, fake_codex, tmp_path / "state", {}, sandbox="danger-full-access")


def test_the_codex_runtime_passes_codex_credentials_and_no_claude_ones(
    repo: Path, fake_codex: FakeCodex, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-openai")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    monkeypatch.setenv("GITHUB_TOKEN", "ghp_" + "a" * 36)
    adapter = runtime(repo, fake_codex, tmp_path / "state", fake_codex.env("ok", output=PLAN))
    assert adapter.model_variables == CODEX_MODEL_VARIABLES
    env = adapter._env("planner-3")
    assert env["OPENAI_API_KEY"] == "sk-test-openai"
    assert "ANTHROPIC_API_KEY" not in env
    assert "GITHUB_TOKEN" not in env


def test_the_startup_reaper_kills_a_codex_group_a_crashed_daemon_left(
    repo: Path, fake_codex: FakeCodex, tmp_path: Path
) -> None:
    """A daemon killed mid-run leaves codex running in its own session; at the next start the
    runtime's reaper finds it by its pid file and kills its whole group."""
    state = tmp_path / "state"
    orphan = CodexCliRunner(state, cli_path=str(fake_codex.path), kill_grace=1).start(
        RunRequest(
            run_id="implementor-9",
            worktree_path=repo,
            prompt="p",
            env={**fake_codex.env("hang", hang_seconds=300), "PATH": "/usr/bin:/bin"},
        )
    )
    pidfile = state / "runs" / "implementor-9" / PIDFILE
    assert pidfile.read_text().split()[0] == str(orphan.process.pid)
    adapter = runtime(repo, fake_codex, state, {})
    adapter.reap(frozenset())
    outcome = orphan.wait(timeout=60)
    assert outcome.termination == "error"  # killed from outside its runner
    assert not group_members(orphan.process.pid)
    assert not pidfile.exists()


def test_the_reaper_leaves_a_recycled_pid_alone(
    repo: Path, fake_codex: FakeCodex, tmp_path: Path
) -> None:
    """The pid file names a live group leader with another start time: a recycled pid."""
    state = tmp_path / "state"
    bystander = CodexCliRunner(state, cli_path=str(fake_codex.path), kill_grace=1).start(
        RunRequest(
            run_id="implementor-6",
            worktree_path=repo,
            prompt="p",
            env={**fake_codex.env("hang", hang_seconds=300), "PATH": "/usr/bin:/bin"},
        )
    )
    try:
        run_dir = state / "runs" / "implementor-7"
        run_dir.mkdir(parents=True)
        (run_dir / PIDFILE).write_text(f"{bystander.process.pid} 12345.0\n")
        (state / "runs" / "implementor-6" / PIDFILE).unlink()
        runtime(repo, fake_codex, state, {}).reap(frozenset())
        assert group_members(bystander.process.pid)  # not killed
        assert not (run_dir / PIDFILE).exists()
    finally:
        bystander.stop()
        assert bystander.wait(timeout=60).termination == "killed_policy"


@pytest.mark.spec("S004-15")
@pytest.mark.spec("S004-11")
def test_the_runner_reports_how_the_process_ended_not_whether_the_work_succeeded(
    repo: Path, fake_codex: FakeCodex, tmp_path: Path
) -> None:
    """A failing test command and an agent that reports a validation failure are still a
    ``completed`` run: the termination is mechanical; judging the work is the caller's job."""
    verdict = {"role": "implementor", "outcome": "validation-failure", "summary": "tests fail"}
    env = {
        **fake_codex.env("ok", output=verdict, command="pytest -q", command_exit="1"),
        "PATH": "/usr/bin:/bin",
    }
    runner = CodexCliRunner(tmp_path / "state", cli_path=str(fake_codex.path), kill_grace=1)
    schema = output_schema("implementor")
    handle = runner.start(
        RunRequest(run_id="r-judge", worktree_path=repo, prompt="p", env=env, output_schema=schema)
    )
    outcome = handle.wait(timeout=60)
    assert outcome.termination == "completed"
    assert outcome.exit_code == 0
    assert outcome.result is not None
    assert outcome.result["structured_output"] == verdict  # passed on as it is, not judged
    events = [
        json.loads(line)
        for line in outcome.artifacts.path("runner_transcript").read_text().splitlines()  # type: ignore[union-attr]
    ]
    failed = [
        e["item"]
        for e in events
        if e.get("type") == "item.completed" and e["item"].get("type") == "command_execution"
    ]
    assert failed[0]["exit_code"] == 1


@pytest.mark.parametrize(
    ("model", "cost"),
    [("gpt-5-codex", (160 * 1.25 + 40 * 0.125 + 60 * 10.0) / 1e6), (None, None), ("o-x", None)],
    ids=["priced", "codex's default", "unknown model"],
)
def test_a_codex_run_is_priced_from_its_tokens_by_its_model(
    repo: Path, fake_codex: FakeCodex, tmp_path: Path, model: str | None, cost: float | None
) -> None:
    """codex reports tokens, no cost: the price table turns them into one (the fake's usage:
    200 input of which 40 cached, 60 output); a model without a price is unknown, not $0."""
    state = tmp_path / "state"
    config = CliRuntimeConfig(
        repo_root=str(repo),
        default_branch="main",
        max_agent_duration=120,
        logging=SessionLogging(logs_dir=str(state / "logs")),
        agent_env=fake_codex.env("ok", output=PLAN),
        model=model,
    )
    models = ("gpt-5-codex", "o-x")
    adapter = create_codex_runtime(config, deps(), cli_path=str(fake_codex.path), models=models)
    params = PlannerStartParams(
        session_id=SessionId("planner-1"), spec_paths=("specs/greeting.md",)
    )

    async def main() -> Any:
        handle = await adapter.start_agent(params)
        _ = [chunk async for chunk in handle.output]
        await handle.result
        return handle.usage()

    usage = anyio.run(main)
    assert usage.input_tokens == 200
    assert usage.cost_usd == (pytest.approx(cost) if cost is not None else None)


def test_a_codex_run_past_its_turn_limit_is_stopped_by_cpe(
    repo: Path, fake_codex: FakeCodex, tmp_path: Path
) -> None:
    """codex has no --max-turns: cpe counts its tool calls (here the fake's command and file
    change) and stops the run past the agent definition's max_turns, saying so."""
    definition = repo / ".claude" / "agents" / "implementor.md"  # committed: with_agents
    text = definition.read_text()
    assert "maxTurns: 150" in text
    definition.write_text(text.replace("maxTurns: 150", "maxTurns: 1"))
    state = tmp_path / "state"
    env = fake_codex.env("ok", file="greeting.py")
    adapter = runtime(repo, fake_codex, state, env)
    params = ImplementorStartParams(
        session_id=SessionId("implementor-1"), work_item_id=WorkItemId("1"), branch_name="cpe/1"
    )
    _, failure = drive(adapter, params)
    assert isinstance(failure, AgentFailure), failure
    assert failure.kind == "failed"
    assert "no progress: past max_turns (1 tool calls)" in failure.reason
    assert metadata(state, "implementor-1")["termination"] == "killed_policy"

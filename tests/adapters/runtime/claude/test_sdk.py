"""The Claude SDK adapter end to end: the real claude_agent_sdk and the real bundled claude CLI,
in real worktrees, against the scripted model (only the model is scripted)."""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import psutil
import pytest

from adapters.bash_guard import BashGuardConfig, BashVerdict, check_bash
from adapters.runtime.claude.sdk import ClaudeAdapter, ClaudeAdapterConfig, create_claude_adapter
from adapters.runtime.process.launcher import group_members, read_pid
from adapters.runtime.sandbox.guard_hook import BashCheck
from adapters.scripted_model import Match, ScriptedModelServer, load_scenario
from domain.errors import AgentDefinitionError, AgentFailure, ContextError, WorktreeError
from domain.models import (
    EngineState,
    ImplementorStartParams,
    PlannerStartParams,
    ReviewerStartParams,
    Revision,
    SessionId,
    WorkItem,
)
from domain.ports import RuntimeAdapterDeps, SessionLogging
from domain.results import ImplementorResult, PlannerResult, ReviewerResult
from tests.adapters.runtime.fake_sdk import still_running
from tests.fakes.provider import fake_provider
from tests.support.git import git_raw, make_repo


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    files = {"specs/greeting.md": "# Greeting\nA greet(name) function.\n", "README.md": "demo\n"}
    return make_repo(tmp_path / "repo", files, with_agents=True)


class Rig:
    def __init__(
        self,
        repo: Path,
        server: ScriptedModelServer,
        logs: Path,
        *,
        bash_check: BashCheck = check_bash,
        **config: Any,
    ):
        self.repo = repo
        self.tracker, provider = fake_provider()
        self.tracker.add_item("1", "in-progress", title="Greeting", body="Add greet(name).")
        self.state = EngineState.model_validate(
            {
                "work_items": {"1": self.tracker.work_items["1"]},
                "revisions": {},
            }
        )
        deps = RuntimeAdapterDeps(
            work_item_reader=provider.work_item_reader,
            revision_reader=provider.revision_reader,
            get_state=lambda: self.state,
            get_review_history=provider.revision_reader.get_review_history,
        )
        settings: dict[str, Any] = {
            "repo_root": str(repo),
            "default_branch": "main",
            "max_agent_duration": 180,
            "logging": SessionLogging(logs_dir=str(logs)),
            "agent_env": server.client_env(),
            "isolated_home": True,
            "kill_grace": 2,
        }
        settings.update(config)
        self.adapter: ClaudeAdapter = create_claude_adapter(
            ClaudeAdapterConfig(**settings), deps, bash_check=bash_check
        )

    def run(self, params: Any, *, cancel_after_output: bool = False) -> tuple[list[str], Any]:
        async def main() -> tuple[list[str], Any]:
            handle = await self.adapter.start_agent(params)
            chunks: list[str] = []
            async for chunk in handle.output:
                chunks.append(chunk)
                if cancel_after_output:
                    self.adapter.cancel_agent(params.session_id)
            try:
                return chunks, await handle.result
            except AgentFailure as failure:
                return chunks, failure

        return anyio.run(main)


@pytest.fixture
def server() -> Iterator[ScriptedModelServer]:
    book = [
        load_scenario("blocked", match=Match(role="implementor", prompt=r"#2\b")),
        load_scenario("invalid_output", match=Match(role="implementor", prompt=r"#3\b")),
        load_scenario("denied_bash", match=Match(role="implementor", prompt=r"#7\b")),
        load_scenario("hang", match=Match(role="implementor", prompt=r"#8\b")),
        load_scenario("implement"),
        load_scenario("planner"),
        load_scenario("review"),
    ]
    with ScriptedModelServer(book) as s:
        yield s


def implementor(wid: str = "1", sid: str = "implementor-1") -> ImplementorStartParams:
    return ImplementorStartParams(session_id=sid, work_item_id=wid, branch_name=f"cpe/{wid}-x")


@pytest.mark.spec("S000-21")
@pytest.mark.spec("S000-26")
@pytest.mark.spec("S001-27")
@pytest.mark.spec("S001-33")
@pytest.mark.spec("S001-02")
def test_an_implementor_run_returns_a_patch_that_applies_and_leaves_nothing_behind(
    repo: Path, server: ScriptedModelServer, tmp_path: Path
) -> None:
    rig = Rig(repo, server, tmp_path / "runs")
    chunks, result = rig.run(implementor())
    assert isinstance(result, ImplementorResult), result
    assert result.outcome == "completed"
    assert "greeting.py" in (result.patch or "")
    assert "A greeting for name." in (result.patch or "")  # the Edit after the Write
    assert any("greeting module" in c for c in chunks)
    # the patch applies cleanly to the default branch
    (tmp_path / "p.diff").write_text(result.patch or "")
    git_raw(repo, "apply", "--check", str(tmp_path / "p.diff"))
    # the worktree and its branch are gone
    assert not (repo / ".worktrees" / "cpe" / "1-x").exists()
    assert "cpe/1-x" not in git_raw(repo, "branch", "--list")
    # artifacts and the transcript are there
    run_dir = tmp_path / "runs" / "implementor-1"
    assert "assistant:" in (run_dir / "transcript.log").read_text()
    for artifact in ("runner_metadata.json", "runner_transcript.jsonl", "manifest.json"):
        assert (run_dir / artifact).exists(), artifact
    # what the CLI reported of the run's cost, turns and tokens is recorded
    meta = json.loads((run_dir / "runner_metadata.json").read_text())
    assert meta["num_turns"] >= 5  # the implement scenario's five model turns
    assert meta["cost_usd"] is not None
    assert meta["usage"]["input_tokens"] > 0
    assert meta["usage"]["output_tokens"] > 0


def test_the_agent_gets_no_secret_from_the_daemon_environment(
    repo: Path, server: ScriptedModelServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GITHUB_TOKEN", "ghp_" + "Z" * 36)
    rig = Rig(repo, server, tmp_path / "runs")
    _, result = rig.run(implementor())
    assert isinstance(result, ImplementorResult)
    wrapper = (tmp_path / "runs" / "implementor-1" / "claude.sh").read_text()
    assert "GITHUB_TOKEN" not in wrapper
    assert "ghp_" not in wrapper
    assert "env -i" in wrapper


@pytest.mark.spec("S001-15")
@pytest.mark.spec("S000-24")
@pytest.mark.spec("S001-31")
def test_a_planner_run_returns_a_typed_plan(
    repo: Path, server: ScriptedModelServer, tmp_path: Path
) -> None:
    rig = Rig(repo, server, tmp_path / "runs")
    params = PlannerStartParams(session_id="planner-1", spec_paths=("specs/greeting.md",))
    _, result = rig.run(params)
    assert isinstance(result, PlannerResult), result
    assert len(result.create) == 2


def test_a_reviewer_run_returns_a_typed_verdict(
    repo: Path, server: ScriptedModelServer, tmp_path: Path
) -> None:
    rig = Rig(repo, server, tmp_path / "runs")
    rig.state = rig.state.model_copy(
        update={
            "work_items": {"1": WorkItem(id="1", title="Greeting", status="in-review")},
            "revisions": {
                "r1": Revision(
                    id="r1", title="Greeting", work_item_id="1", branch="cpe/1-x", head_sha="h"
                )
            },
        }
    )
    params = ReviewerStartParams(session_id="reviewer-1", work_item_id="1", revision_id="r1")
    _, result = rig.run(params)
    assert isinstance(result, ReviewerResult), result
    assert result.review.verdict == "needs-changes"
    assert result.review.comments


def test_a_denied_bash_command_is_denied_through_the_real_hook(
    repo: Path, server: ScriptedModelServer, tmp_path: Path
) -> None:
    rig = Rig(repo, server, tmp_path / "runs")
    rig.tracker.add_item("7", "in-progress", title="Push it")
    rig.state = rig.state.model_copy(update={"work_items": {"7": rig.tracker.work_items["7"]}})
    _, result = rig.run(implementor("7", "implementor-7"))
    # the run goes on after the denial: the agent reports completed with the file it wrote
    assert isinstance(result, ImplementorResult), result
    assert result.outcome == "completed"
    assert "NOTES.md" in (result.patch or "")
    # the model was told, as an error tool result, that the hook denied the command
    denied = [t for r in server.requests for t in r.tool_results if t.is_error]
    assert len(denied) == 1
    assert "hook error" in denied[0].content
    assert "push" in denied[0].content
    transcript = (tmp_path / "runs" / "implementor-7" / "transcript.log").read_text()
    assert "denied Bash" in transcript
    assert "push" in transcript
    meta = json.loads((tmp_path / "runs" / "implementor-7" / "runner_metadata.json").read_text())
    assert [(d["tool_name"], d["tool_input"]["command"]) for d in meta["permission_denials"]] == [
        ("Bash", "git push origin main")
    ]


@pytest.mark.spec("S001-12")
@pytest.mark.spec("S001-13")
@pytest.mark.spec("S000-06")
def test_cancel_ends_the_run_kills_the_cli_and_removes_the_worktree(
    repo: Path, server: ScriptedModelServer, tmp_path: Path
) -> None:
    rig = Rig(repo, server, tmp_path / "runs")
    rig.tracker.add_item("8", "in-progress", title="Hang")
    rig.state = rig.state.model_copy(update={"work_items": {"8": rig.tracker.work_items["8"]}})
    params = implementor("8", "implementor-8")
    pids: list[int | None] = []

    async def main() -> Any:
        handle = await rig.adapter.start_agent(params)
        pidfile = tmp_path / "runs" / "implementor-8" / "cli.pid"
        hanging = await anyio.to_thread.run_sync(
            lambda: server.wait_until(lambda s: s.hanging >= 1, timeout=120)
        )
        assert hanging
        pids.append(read_pid(pidfile))
        rig.adapter.cancel_agent(params.session_id)
        chunks = [c async for c in handle.output]
        with pytest.raises(AgentFailure) as caught:
            await handle.result
        return chunks, caught.value

    _, failure = anyio.run(main)
    assert failure.kind == "cancelled"
    assert pids[0] is not None
    assert not psutil.pid_exists(pids[0]) or psutil.Process(pids[0]).status() == "zombie"
    assert not (repo / ".worktrees" / "cpe" / "8-x").exists()
    assert "cpe/8-x" not in git_raw(repo, "branch", "--list")


@pytest.mark.spec("S000-27")
@pytest.mark.spec("S001-42")
def test_a_run_past_its_duration_is_timed_out(
    repo: Path, server: ScriptedModelServer, tmp_path: Path
) -> None:
    rig = Rig(repo, server, tmp_path / "runs", max_agent_duration=10)
    _with_item(rig, "8", "Hang")
    params = implementor("8", "implementor-8")
    pidfile = tmp_path / "runs" / "implementor-8" / "cli.pid"
    tree: list[int] = []

    async def main() -> Any:
        handle = await rig.adapter.start_agent(params)
        result = handle.result
        assert isinstance(result, asyncio.Future)
        # the model holds the request: the CLI and whatever it started are running now
        hanging = await anyio.to_thread.run_sync(
            lambda: server.wait_until(lambda s: s.hanging >= 1 or result.done(), timeout=60)
        )
        assert hanging, "the CLI never reached the model"
        assert not result.done(), "the run ended before the CLI reached the model"
        tree.extend(process_tree(read_pid(pidfile)))
        chunks = [c async for c in handle.output]
        with pytest.raises(AgentFailure) as caught:
            await handle.result
        return chunks, caught.value

    _, failure = anyio.run(main)
    assert failure.kind == "timed-out"
    assert tree, "no process of the run was seen"
    assert still_running(tree) == []
    assert not group_members(tree[0])  # nothing left in the CLI's process group either
    assert not (repo / ".worktrees" / "cpe" / "8-x").exists()
    assert "cpe/8-x" not in git_raw(repo, "branch", "--list")


def test_each_role_runs_on_its_configured_model(
    repo: Path, server: ScriptedModelServer, tmp_path: Path
) -> None:
    """[runtime.models]: the implementor's model reaches the model API (the CLI resolves the
    alias), not the CLI's default."""
    rig = Rig(repo, server, tmp_path / "runs", models={"implementor": "haiku", "planner": "opus"})
    _, result = rig.run(implementor("1", "implementor-1"))
    assert isinstance(result, ImplementorResult), result
    models = {r.model for r in server.requests if r.kind == "turn"}
    assert models
    assert all("haiku" in (m or "") for m in models), models


def test_a_run_past_its_budget_is_stopped_by_the_cli_and_says_so(
    repo: Path, server: ScriptedModelServer, tmp_path: Path
) -> None:
    """[budget] per_run_usd reaches the real CLI as max_budget_usd: it ends the run after the
    turn that crossed it (error_max_budget_usd); the run is killed_policy, its reason says
    budget, and it is a failure of the run (an attempt), not a cancel."""
    rig = Rig(repo, server, tmp_path / "runs", max_budget_usd=0.001)
    _, failure = rig.run(implementor("1", "implementor-1"))
    assert isinstance(failure, AgentFailure)
    assert failure.kind == "failed"
    assert failure.reason.startswith("budget: the run reached [budget] per_run_usd ($0.001)")
    meta = json.loads((tmp_path / "runs" / "implementor-1" / "runner_metadata.json").read_text())
    assert meta["termination"] == "killed_policy"
    assert not (repo / ".worktrees" / "cpe" / "1-x").exists()


LOOP = load_scenario("loop")


def test_a_run_repeating_the_same_tool_call_is_stopped_as_making_no_progress(
    repo: Path, tmp_path: Path
) -> None:
    with ScriptedModelServer([LOOP]) as looping:
        rig = Rig(repo, looping, tmp_path / "runs", repeat_limit=3)
        _, failure = rig.run(implementor("1", "implementor-1"))
        calls = [r for r in looping.requests if r.kind == "turn"]
    assert isinstance(failure, AgentFailure)
    assert failure.kind == "failed"
    assert failure.reason == "no progress: the same Bash call 3 times in a row"
    # the stop lands within a few more calls on a loaded machine; without it the scenario
    # goes on until the duration limit (hundreds of calls)
    assert len(calls) < 30
    meta = json.loads((tmp_path / "runs" / "implementor-1" / "runner_metadata.json").read_text())
    assert meta["termination"] == "killed_policy"
    # stopped before the CLI reported a cost: the tokens it streamed, priced, not "unknown"
    assert meta["usage"]["input_tokens"] > 0
    assert meta["cost_usd"] > 0
    assert not (repo / ".worktrees" / "cpe" / "1-x").exists()


def test_an_implementor_whose_tool_calls_change_nothing_is_stopped_as_making_no_progress(
    repo: Path, tmp_path: Path
) -> None:
    """Different calls each time (the repeat breaker does not see them), none changing the
    worktree: past ``unchanged_limit`` of them the run is stopped, an attempt spent."""
    with ScriptedModelServer([load_scenario("wander")]) as wandering:
        rig = Rig(repo, wandering, tmp_path / "runs", unchanged_limit=4)
        _, failure = rig.run(implementor("1", "implementor-1"))
        calls = [r for r in wandering.requests if r.kind == "turn"]
    assert isinstance(failure, AgentFailure)
    assert failure.kind == "failed"
    assert failure.reason == "no progress: 4 tool calls in a row changed nothing in the worktree"
    # the stop lands within a few more calls on a loaded machine; without it the scenario
    # goes on until the duration limit (hundreds of calls)
    assert len(calls) < 30
    meta = json.loads((tmp_path / "runs" / "implementor-1" / "runner_metadata.json").read_text())
    assert meta["termination"] == "killed_policy"
    assert not (repo / ".worktrees" / "cpe" / "1-x").exists()


def test_an_implementor_that_changes_its_worktree_is_not_stopped_by_the_unchanged_limit(
    repo: Path, tmp_path: Path
) -> None:
    """The shipped implement scenario writes, edits and tests: every tool call but the test
    runs after an edit changes something, so a limit of 2 does not stop it."""
    with ScriptedModelServer([load_scenario("implement")]) as implementing:
        rig = Rig(repo, implementing, tmp_path / "runs", unchanged_limit=2)
        _, outcome = rig.run(implementor("1", "implementor-1"))
    assert not isinstance(outcome, AgentFailure), outcome
    assert outcome.outcome == "completed"


def test_the_sdk_stops_a_run_at_the_definitions_max_turns(repo: Path, tmp_path: Path) -> None:
    """maxTurns reaches the SDK as max_turns and the CLI under it holds it: a scenario that
    would go on for ever (different calls: no other breaker sees it) ends at the limit, as
    a policy stop that spends an attempt."""
    definition = repo / ".claude" / "agents" / "implementor.md"
    text = definition.read_text()
    assert "maxTurns: 150" in text
    definition.write_text(text.replace("maxTurns: 150", "maxTurns: 3"))
    with ScriptedModelServer([load_scenario("wander")]) as wandering:
        rig = Rig(repo, wandering, tmp_path / "runs")
        _, failure = rig.run(implementor("1", "implementor-1"))
        turns = [r for r in wandering.requests if r.kind == "turn"]
    assert isinstance(failure, AgentFailure)
    assert failure.kind == "failed"
    assert failure.reason == "no progress: the run reached max_turns (3)"
    assert len(turns) == 3
    meta = json.loads((tmp_path / "runs" / "implementor-1" / "runner_metadata.json").read_text())
    assert meta["termination"] == "killed_policy"


def test_a_run_silent_past_its_idle_timeout_is_killed_idle_and_cleaned_up(
    repo: Path, server: ScriptedModelServer, tmp_path: Path
) -> None:
    """The model holds its answer: no message and no tool at work, so the run ends long
    before its duration limit, its processes, worktree and branch gone."""
    rig = Rig(repo, server, tmp_path / "runs", max_agent_duration=600, idle_timeout=3)
    _with_item(rig, "8", "Hang")
    params = implementor("8", "implementor-8")
    _, failure = rig.run(params)
    assert isinstance(failure, AgentFailure)
    assert failure.kind == "timed-out"
    assert "idle_timeout" in str(failure)
    meta = json.loads((tmp_path / "runs" / "implementor-8" / "runner_metadata.json").read_text())
    assert meta["termination"] == "killed_idle"
    assert server.requests, "the CLI reached the model, which held its answer"
    assert not (repo / ".worktrees" / "cpe" / "8-x").exists()
    assert "cpe/8-x" not in git_raw(repo, "branch", "--list")


@pytest.mark.spec("S000-07")
@pytest.mark.spec("S001-14")
def test_cancel_of_an_unknown_session_is_a_no_op(
    repo: Path, server: ScriptedModelServer, tmp_path: Path
) -> None:
    rig = Rig(repo, server, tmp_path / "runs")
    rig.adapter.cancel_agent(SessionId("nobody"))  # no run at all: nothing raises

    async def main() -> tuple[list[str], Any]:
        handle = await rig.adapter.start_agent(implementor())
        chunks = []
        async for chunk in handle.output:
            chunks.append(chunk)
            rig.adapter.cancel_agent(SessionId("nobody"))  # while another run streams
        return chunks, await handle.result

    chunks, result = anyio.run(main)
    # the running session was not touched: it streamed to its end and completed
    assert isinstance(result, ImplementorResult), result
    assert result.outcome == "completed"
    assert len(chunks) == 2
    meta = json.loads((tmp_path / "runs" / "implementor-1" / "runner_metadata.json").read_text())
    assert meta["termination"] == "completed"
    assert not (tmp_path / "runs" / "nobody").exists()
    rig.adapter.cancel_agent(SessionId("implementor-1"))  # it has ended: unknown now, no-op


def process_tree(pid: int | None) -> list[int]:
    """``pid`` and its descendants, as they are now."""
    if pid is None:
        return []
    try:
        leader = psutil.Process(pid)
        return [pid, *(p.pid for p in leader.children(recursive=True))]
    except psutil.NoSuchProcess:
        return []


def _with_item(rig: Rig, wid: str, title: str = "Item") -> None:
    rig.tracker.add_item(wid, "in-progress", title=title)
    rig.state = rig.state.model_copy(update={"work_items": {wid: rig.tracker.work_items[wid]}})


@pytest.mark.spec("S001-32")
@pytest.mark.spec("S000-25")
def test_invalid_structured_output_after_the_sdk_retries_rejects(
    repo: Path, server: ScriptedModelServer, tmp_path: Path
) -> None:
    rig = Rig(repo, server, tmp_path / "runs")
    _with_item(rig, "3")
    _, failure = rig.run(implementor("3", "implementor-3"))
    assert isinstance(failure, AgentFailure)
    assert "error_max_structured_output_retries" in failure.reason
    assert not (repo / ".worktrees" / "cpe" / "3-x").exists()


@pytest.mark.spec("S001-29")
@pytest.mark.spec("S000-23")
def test_a_blocked_outcome_has_no_patch(
    repo: Path, server: ScriptedModelServer, tmp_path: Path
) -> None:
    rig = Rig(repo, server, tmp_path / "runs")
    _with_item(rig, "2")
    _, result = rig.run(implementor("2", "implementor-2"))
    assert isinstance(result, ImplementorResult), result
    assert (result.outcome, result.patch) == ("blocked", None)


@pytest.mark.spec("S001-01")
@pytest.mark.spec("S000-01")
def test_a_failing_setup_command_rejects_and_removes_the_worktree(
    repo: Path, server: ScriptedModelServer, tmp_path: Path
) -> None:
    rig = Rig(repo, server, tmp_path / "runs", setup_command="exit 3")
    with pytest.raises(WorktreeError):
        anyio.run(rig.adapter.start_agent, implementor())
    assert not (repo / ".worktrees" / "cpe" / "1-x").exists()
    assert "cpe/1-x" not in git_raw(repo, "branch", "--list")
    assert [r for r in server.requests if r.kind == "turn"] == []  # no session was created


@pytest.mark.spec("S001-06")
def test_a_missing_agent_definition_rejects_and_cleans_up(
    repo: Path, server: ScriptedModelServer, tmp_path: Path
) -> None:
    (repo / ".claude" / "agents" / "implementor.md").unlink()
    rig = Rig(repo, server, tmp_path / "runs")
    with pytest.raises(AgentDefinitionError):
        anyio.run(rig.adapter.start_agent, implementor())
    assert not (repo / ".worktrees" / "cpe" / "1-x").exists()


@pytest.mark.spec("S001-07")
def test_a_malformed_agent_definition_rejects(
    repo: Path, server: ScriptedModelServer, tmp_path: Path
) -> None:
    (repo / ".claude" / "agents" / "planner.md").write_text("---\ntools: [unclosed\n---\nx\n")
    rig = Rig(repo, server, tmp_path / "runs")
    params = PlannerStartParams(session_id="planner-1", spec_paths=("specs/greeting.md",))
    with pytest.raises(AgentDefinitionError):
        anyio.run(rig.adapter.start_agent, params)


@pytest.mark.spec("S001-08")
@pytest.mark.spec("S000-02")
def test_a_failed_context_fetch_rejects_and_removes_the_worktree(
    repo: Path, server: ScriptedModelServer, tmp_path: Path
) -> None:
    rig = Rig(repo, server, tmp_path / "runs")
    rig.tracker.fail_next("get_work_item_body", RuntimeError("the tracker is down"))
    with pytest.raises(ContextError):
        anyio.run(rig.adapter.start_agent, implementor())
    assert not (repo / ".worktrees" / "cpe" / "1-x").exists()
    assert "cpe/1-x" not in git_raw(repo, "branch", "--list")


@pytest.mark.spec("S001-05")
@pytest.mark.spec("S000-10")
@pytest.mark.spec("S000-11")
@pytest.mark.spec("S000-08")
def test_planner_and_reviewer_work_in_the_repository_root_and_implementor_in_its_worktree(
    repo: Path, server: ScriptedModelServer, tmp_path: Path
) -> None:
    rig = Rig(repo, server, tmp_path / "runs")
    rig.run(PlannerStartParams(session_id="planner-1", spec_paths=("specs/greeting.md",)))
    rig.run(implementor())
    rig.state = rig.state.model_copy(
        update={
            "revisions": {
                "r1": Revision(
                    id="r1", title="Greeting", work_item_id="1", branch="cpe/1-x", head_sha="h"
                )
            }
        }
    )
    rig.run(ReviewerStartParams(session_id="reviewer-1", work_item_id="1", revision_id="r1"))
    cwds = {r.conversation.role: r.conversation.cwd for r in server.requests if r.kind == "turn"}
    assert Path(cwds["planner"]).resolve() == repo.resolve()
    assert Path(cwds["reviewer"]).resolve() == repo.resolve()
    assert Path(cwds["implementor"]).resolve() == (repo / ".worktrees" / "cpe" / "1-x").resolve()


@pytest.mark.spec("S001-39")
@pytest.mark.spec("S001-40")
@pytest.mark.spec("S000-03")
@pytest.mark.spec("S000-28")
@pytest.mark.spec("S000-29")
def test_the_output_stream_is_plain_text_only_and_ends_with_the_run(
    repo: Path, server: ScriptedModelServer, tmp_path: Path
) -> None:
    rig = Rig(repo, server, tmp_path / "runs")
    pending_while_streaming: list[bool] = []

    async def main() -> tuple[list[str], Any]:
        handle = await rig.adapter.start_agent(implementor())
        result = handle.result
        assert isinstance(result, asyncio.Future)
        chunks = []
        async for chunk in handle.output:
            chunks.append(chunk)
            pending_while_streaming.append(not result.done())  # S000-03
        return chunks, await result

    chunks, result = anyio.run(main)
    assert isinstance(result, ImplementorResult)
    assert pending_while_streaming == [True, True]
    assert chunks == [
        "I'll add a small greeting module with a unit test.",
        "The tests pass. The module needs a docstring.",
    ]


def exploding_check(
    command: str, *, worktree: Path | None, config: BashGuardConfig, cwd: Path | None
) -> BashVerdict:
    raise RuntimeError("the guard exploded")


def test_a_guard_that_raises_denies_bash_through_the_real_cli(
    repo: Path, server: ScriptedModelServer, tmp_path: Path
) -> None:
    rig = Rig(repo, server, tmp_path / "runs", bash_check=exploding_check)
    _, result = rig.run(implementor())
    # the implement scenario runs its tests twice with Bash: neither ran
    assert isinstance(result, ImplementorResult), result
    errors = [t.content for r in server.requests for t in r.tool_results if t.is_error]
    assert len(errors) == 2
    assert all("cannot check the command" in e and "the guard exploded" in e for e in errors)
    assert not any("Ran 1 test" in t.content for r in server.requests for t in r.tool_results)
    meta = json.loads((tmp_path / "runs" / "implementor-1" / "runner_metadata.json").read_text())
    assert [d["tool_name"] for d in meta["permission_denials"]] == ["Bash", "Bash"]


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.mark.parametrize("why", ["unreachable", "no credential"])
def test_a_run_the_model_api_fails_is_an_infrastructure_failure(
    repo: Path, server: ScriptedModelServer, tmp_path: Path, why: str
) -> None:
    """The real CLI, its API refused (the port is closed) or no key at all: not the work's
    fault, so the failure says so and names the API's answer."""
    env = {**server.client_env(), "CLAUDE_CODE_MAX_RETRIES": "0"}
    if why == "unreachable":
        env["ANTHROPIC_BASE_URL"] = f"http://127.0.0.1:{_closed_port()}"
    else:
        del env["ANTHROPIC_API_KEY"], env["ANTHROPIC_BASE_URL"]
    rig = Rig(repo, server, tmp_path / "runs", agent_env=env)
    _, failure = rig.run(implementor())
    assert isinstance(failure, AgentFailure), failure
    assert failure.infrastructure
    assert failure.reason.startswith("the model API failed")
    assert ("ECONNREFUSED" if why == "unreachable" else "Not logged in") in failure.reason

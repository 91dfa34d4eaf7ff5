"""What the Claude SDK adapter asks of the CLI and records of a run, seen from the fake ``claude``
CLI (the real adapter and the real SDK; the fake records its argv and every stdin message):
the session options, the bash guard failing closed, cost and usage, the transcript switch, and
a patch that cannot be extracted."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest

from adapters.bash_guard import BashGuardConfig, BashVerdict
from adapters.runtime.sandbox.guard_hook import FILE_MATCHER
from domain.errors import AgentFailure
from domain.models import RunUsage
from domain.results import ImplementorResult
from tests.adapters.runtime.driving import drive_with_usage
from tests.adapters.runtime.fake_sdk import (
    BLOCKED,
    COMPLETED,
    PARAMS,
    WORKTREE,
    fake_adapter,
    gone,
    run,
    run_dir,
)
from tests.adapters.runtime.transcripts import assert_transcript_switch
from tests.fakes.claude_cli_fixture import FakeClaude
from tests.support.git import git_raw, make_repo


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "repo", with_agents=True)


def metadata(tmp_path: Path) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((run_dir(tmp_path) / "runner_metadata.json").read_text())
    return loaded


def flag(argv: list[str], name: str) -> str | None:
    """The value after ``name`` in ``argv`` (None when absent)."""
    return argv[argv.index(name) + 1] if name in argv else None


def stdin_requests(fake_claude: FakeClaude, subtype: str) -> list[dict[str, Any]]:
    return [
        r["stdin"]["request"]
        for r in fake_claude.records()
        if "stdin" in r and (r["stdin"].get("request") or {}).get("subtype") == subtype
    ]


def set_max_turns(repo: Path, line: str) -> None:
    """Replace the implementor definition's ``maxTurns`` line (``""`` removes it)."""
    agent = repo / ".claude" / "agents" / "implementor.md"
    text = agent.read_text()
    assert "maxTurns: 150\n" in text
    agent.write_text(text.replace("maxTurns: 150\n", line))


# ---------------------------------------------------------------------------- session options


@pytest.mark.spec("S001-34")
def test_the_cli_gets_the_agent_no_setting_sources_max_turns_model_and_bypass(
    repo: Path, tmp_path: Path, fake_claude: FakeClaude
) -> None:
    set_max_turns(repo, "maxTurns: 7\n")
    runtime = fake_adapter(
        repo,
        tmp_path,
        fake_claude,
        fake_claude.env("ok", output=BLOCKED),
        model="claude-test-model",
    )
    _, result = run(runtime)
    assert isinstance(result, ImplementorResult), result
    argv = fake_claude.records()[0]["argv"]
    assert flag(argv, "--agent") == "implementor"  # extra_args={"agent": role}
    assert "--setting-sources=" in argv  # setting_sources=[]: no user or project settings
    assert not any(a.startswith("--setting-sources=") and a != "--setting-sources=" for a in argv)
    assert flag(argv, "--max-turns") == "7"  # from the definition's maxTurns
    assert flag(argv, "--model") == "claude-test-model"
    assert flag(argv, "--permission-mode") == "bypassPermissions"
    # the agent it selects is defined inline, in the initialize request
    (initialize,) = stdin_requests(fake_claude, "initialize")
    assert set(initialize["agents"]) == {"implementor"}
    assert "StructuredOutput" in initialize["agents"]["implementor"]["tools"]
    # and the run records what it enforced: the same tools, turns and guard
    meta = json.loads((run_dir(tmp_path) / "runner_metadata.json").read_text())
    effective = meta["effective_policy"]
    assert effective["tools"] == initialize["agents"]["implementor"]["tools"]
    assert effective["max_turns"] == 7
    assert effective["permission_mode"] == "bypassPermissions"
    assert effective["bash_guard"].startswith("deny")
    assert effective["workspace"] == "writable"


@pytest.mark.spec("S001-37")
def test_the_cli_gets_the_definitions_disallowed_tools_and_they_are_not_in_tools(
    repo: Path, tmp_path: Path, fake_claude: FakeClaude
) -> None:
    """The shipped implementor definition denies WebFetch, WebSearch and NotebookEdit: the
    agent the CLI is given denies them too, and its tools do not list them."""
    runtime = fake_adapter(repo, tmp_path, fake_claude, fake_claude.env("ok", output=BLOCKED))
    _, result = run(runtime)
    assert isinstance(result, ImplementorResult), result
    (initialize,) = stdin_requests(fake_claude, "initialize")
    agent = initialize["agents"]["implementor"]
    assert {"WebFetch", "WebSearch", "NotebookEdit"} <= set(agent["disallowedTools"])
    assert not {"WebFetch", "WebSearch", "NotebookEdit"} & set(agent["tools"])
    meta = json.loads((run_dir(tmp_path) / "runner_metadata.json").read_text())
    assert meta["effective_policy"]["disallowed_tools"] == agent["disallowedTools"]


@pytest.mark.spec("S001-35")
def test_a_definition_without_max_turns_sets_no_turn_limit(
    repo: Path, tmp_path: Path, fake_claude: FakeClaude
) -> None:
    set_max_turns(repo, "")
    runtime = fake_adapter(repo, tmp_path, fake_claude, fake_claude.env("ok", output=BLOCKED))
    _, result = run(runtime)
    assert isinstance(result, ImplementorResult), result
    argv = fake_claude.records()[0]["argv"]
    assert "--max-turns" not in argv
    assert "--model" not in argv  # no model configured: the definition's (inherit) applies


# ---------------------------------------------------------------------------- the bash guard


def exploding_check(
    command: str, *, worktree: Path | None, config: BashGuardConfig, cwd: Path | None
) -> BashVerdict:
    raise RuntimeError("the guard exploded")


def test_a_guard_that_raises_denies_the_command_through_the_sdk(
    repo: Path, tmp_path: Path, fake_claude: FakeClaude
) -> None:
    marker = tmp_path / "the-command-ran"
    env = fake_claude.env("ok", output=BLOCKED, bash=f"touch {marker}", bash_run=True)
    runtime = fake_adapter(repo, tmp_path, fake_claude, env, bash_check=exploding_check)
    _, result = run(runtime)
    assert isinstance(result, ImplementorResult), result
    assert not marker.exists()  # the fake runs the command only when the hook allows it
    (answer,) = [
        r["stdin"]["response"]["response"]
        for r in fake_claude.records()
        if r.get("stdin", {}).get("type") == "control_response"
    ]
    decision = answer["hookSpecificOutput"]
    assert decision["permissionDecision"] == "deny"
    assert "RuntimeError: the guard exploded" in decision["permissionDecisionReason"]
    denials = metadata(tmp_path)["permission_denials"]
    assert [d["tool_name"] for d in denials] == ["Bash"]
    transcript = (run_dir(tmp_path) / "transcript.log").read_text()
    assert "denied Bash: cpe bash guard: cannot check the command" in transcript


def test_the_hook_is_registered_to_block_when_it_fails(
    repo: Path, tmp_path: Path, fake_claude: FakeClaude
) -> None:
    runtime = fake_adapter(repo, tmp_path, fake_claude, fake_claude.env("ok", output=BLOCKED))
    _, result = run(runtime)
    assert isinstance(result, ImplementorResult), result
    (initialize,) = stdin_requests(fake_claude, "initialize")
    matchers = initialize["hooks"]["PreToolUse"]
    assert [(m["matcher"], m["onFailure"]) for m in matchers] == [
        ("Bash", "block"),
        (FILE_MATCHER, "block"),  # the file tools' paths, checked by the same hook
    ]


@pytest.mark.spec("S000-05")
def test_a_cli_that_cannot_block_on_hook_failure_is_refused(
    repo: Path, tmp_path: Path, fake_claude: FakeClaude
) -> None:
    env = fake_claude.env("ok", output=BLOCKED, hook_on_failure=False)
    _, failure = run(fake_adapter(repo, tmp_path, fake_claude, env))
    assert isinstance(failure, AgentFailure), failure
    assert failure.kind == "failed"
    assert "on_failure" in failure.reason
    assert stdin_requests(fake_claude, "initialize")
    assert not [r for r in fake_claude.records() if r.get("stdin", {}).get("type") == "user"]
    assert gone(fake_claude.pid())
    assert not (repo / WORKTREE).exists()


# ---------------------------------------------------------------------------- cost and usage


@pytest.mark.parametrize(
    ("mode", "usage"),
    [
        ("ok", RunUsage(cost_usd=0.001, turns=2, input_tokens=10, output_tokens=5)),
        ("error_result", RunUsage(cost_usd=0.002, turns=6, input_tokens=20, output_tokens=8)),
    ],
)
def test_cost_turns_and_tokens_are_recorded_on_the_handle_and_in_the_metadata(
    repo: Path, tmp_path: Path, fake_claude: FakeClaude, mode: str, usage: RunUsage
) -> None:
    runtime = fake_adapter(repo, tmp_path, fake_claude, fake_claude.env(mode, output=BLOCKED))

    async def main() -> RunUsage | None:
        handle = await runtime.start_agent(PARAMS)
        _ = [chunk async for chunk in handle.output]
        try:
            await handle.result
        except AgentFailure:
            assert mode == "error_result"  # a failed run has a cost too
        return handle.usage()

    assert anyio.run(main) == usage
    meta = metadata(tmp_path)
    assert meta["cost_usd"] == usage.cost_usd
    assert meta["num_turns"] == usage.turns
    assert meta["usage"] == {
        "input_tokens": usage.input_tokens,
        "output_tokens": usage.output_tokens,
    }


# ---------------------------------------------------------------------------- transcripts


@pytest.mark.parametrize("enabled", [True, False])
def test_the_human_transcript_follows_the_logging_switch_and_the_normalized_set_is_kept(
    repo: Path, tmp_path: Path, fake_claude: FakeClaude, enabled: bool
) -> None:
    env = fake_claude.env("ok", output=BLOCKED, text="Looking around.")
    runtime = fake_adapter(repo, tmp_path, fake_claude, env, agent_sessions=enabled)

    async def main() -> tuple[str | None, Any]:
        handle = await runtime.start_agent(PARAMS)
        _ = [chunk async for chunk in handle.output]
        return handle.log_file_path, await handle.result

    log_file_path, result = anyio.run(main)
    assert isinstance(result, ImplementorResult), result
    directory = run_dir(tmp_path)
    assert_transcript_switch(directory, log_file_path, enabled, "Looking around.")
    lines = (directory / "runner_transcript.jsonl").read_text().splitlines()
    assert any("Looking around." in line for line in lines)
    final = json.loads((directory / "runner_final_response.json").read_text())
    assert "cannot go on" in json.dumps(final)
    assert metadata(tmp_path)["termination"] == "completed"


# ---------------------------------------------------------------------------- patch extraction


@pytest.mark.spec("S000-05")
def test_a_patch_that_cannot_be_extracted_rejects_with_an_agent_failure(
    repo: Path, tmp_path: Path, fake_claude: FakeClaude
) -> None:
    # An empty repository nested in the worktree makes `git add` (and so the extraction) fail.
    env = fake_claude.env(
        "ok", output=COMPLETED, bash="git init -q sub && touch sub/x", bash_run=True
    )
    _, failure = run(fake_adapter(repo, tmp_path, fake_claude, env))
    assert isinstance(failure, AgentFailure), failure
    assert failure.kind == "failed"
    assert "cannot extract the patch" in failure.reason
    assert metadata(tmp_path)["termination"] == "error"
    assert not (repo / WORKTREE).exists()
    assert "cpe/1-f" not in git_raw(repo, "branch", "--list")


def test_a_cli_that_goes_on_past_its_budget_is_stopped_by_cpe(
    repo: Path, tmp_path: Path, fake_claude: FakeClaude
) -> None:
    """The SDK passes max_budget_usd to the CLI, which checks it after each message; one that
    starts another message past it anyway is stopped from its streamed usage, priced: a
    budget stop (killed_policy, an attempt), its cost recorded."""
    runtime = fake_adapter(
        repo, tmp_path, fake_claude, fake_claude.env("overspend"), max_budget_usd=5.0
    )
    failure, usage = drive_with_usage(runtime, PARAMS)
    assert isinstance(failure, AgentFailure), failure
    assert failure.kind == "failed"
    assert failure.reason.startswith(
        "budget: the run reached [budget] per_run_usd ($5.0) and the CLI went on: stopped by cpe"
    )
    assert usage.cost_usd is not None
    assert usage.cost_usd >= 6.0  # two messages over, the third one too many
    assert usage.model == "claude-sonnet-fake"
    meta = json.loads((run_dir(tmp_path) / "runner_metadata.json").read_text())
    assert meta["termination"] == "killed_policy"

"""Many runs started at once on the Claude SDK runtime all start.

Each run used to execute a launch script written for it a moment before. A run starting its
CLI while another was still writing its own script forked a child holding a writable copy of
that script's descriptor, and executing that script then failed with ``ETXTBSY`` ("Text file
busy"): with 32 fake CLIs started at once, ten tries of ten failed (1 to 8 runs of the 32).
Every run here starts at the same moment, in a thread and an event loop of its own as a
session actor has, and each one must complete; the real CLI's wave mixes in implementors, so
git (worktrees, patches) forks among the starts too."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from adapters.runtime.claude.sdk import ClaudeAdapterConfig, create_claude_adapter
from adapters.scripted_model import ScriptedModelServer, load_scenario
from domain.models import ImplementorStartParams, PlannerStartParams, SessionId, WorkItemId
from domain.ports import SessionLogging
from domain.results import ImplementorResult, PlannerResult
from tests.adapters.runtime.driving import drive_at_once, provider_deps
from tests.adapters.runtime.fake_sdk import fake_adapter, still_running
from tests.fakes.claude_cli_fixture import FakeClaude
from tests.support.git import git_raw, make_repo

AT_ONCE_FAKE = 32
AT_ONCE_REAL = 8


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    files = {"README.md": "demo\n", "specs/a.md": "# A\nA greeting.\n"}
    return make_repo(tmp_path / "repo", files, with_agents=True)


def planners(count: int) -> list[PlannerStartParams]:
    return [
        PlannerStartParams(session_id=SessionId(f"planner-{i}"), spec_paths=("specs/a.md",))
        for i in range(count)
    ]


def implementors(count: int) -> list[ImplementorStartParams]:
    return [
        ImplementorStartParams(
            session_id=SessionId(f"implementor-{i}"),
            work_item_id=WorkItemId("1"),
            branch_name=f"cpe/1-{i}",
        )
        for i in range(count)
    ]


def failures(results: list[Any]) -> list[str]:
    return [repr(r) for r in results if not isinstance(r, PlannerResult | ImplementorResult)]


def assert_nothing_left(repo: Path) -> None:
    assert len(git_raw(repo, "worktree", "list").splitlines()) == 1  # the checkout itself
    assert git_raw(repo, "branch", "--list", "cpe/*") == ""


@pytest.mark.timeout(600)
def test_many_runs_started_at_once_on_fake_clis_all_start_and_complete(
    repo: Path, tmp_path: Path, fake_claude: FakeClaude
) -> None:
    runtime = fake_adapter(
        repo, tmp_path, fake_claude, fake_claude.env("ok", output={"role": "planner"})
    )
    results = drive_at_once(runtime, planners(AT_ONCE_FAKE), timeout=500)
    assert failures(results) == []
    assert len(fake_claude.recorded_pids()) >= AT_ONCE_FAKE  # a CLI really started for each run
    assert still_running(fake_claude.recorded_pids()) == []


@pytest.mark.timeout(600)
def test_a_wave_of_runs_on_the_real_cli_started_at_once_all_complete(
    repo: Path, tmp_path: Path
) -> None:
    book = [load_scenario("planner"), load_scenario("implement")]
    with ScriptedModelServer(book) as server:
        config = ClaudeAdapterConfig(
            repo_root=str(repo),
            default_branch="main",
            max_agent_duration=400,
            logging=SessionLogging(logs_dir=str(tmp_path / "runs")),
            agent_env=server.client_env(),
            isolated_home=True,
            kill_grace=2,
        )
        runtime = create_claude_adapter(config, provider_deps(("1", "in-progress", "Hi", "")))
        wave = [*planners(AT_ONCE_REAL // 2), *implementors(AT_ONCE_REAL // 2)]
        results = drive_at_once(runtime, wave, timeout=500)
    assert failures(results) == []
    assert all(r.create for r in results if isinstance(r, PlannerResult))
    assert all(
        "greeting.py" in (r.patch or "") for r in results if isinstance(r, ImplementorResult)
    )
    assert_nothing_left(repo)
    # What makes the start race-free: the SDK executed the launcher, which only read the
    # run's script; a file that is not executable cannot be executed, busy or not.
    for params in wave:
        script = tmp_path / "runs" / str(params.session_id) / "claude.sh"
        assert script.stat().st_mode & 0o111 == 0, f"{script} is executable"

"""Faults the real CLI will not produce on demand, through the real adapter and the real SDK,
with fake `claude` CLIs that speak the SDK's protocol: a hang, a CLI ignoring SIGTERM, a
grandchild that outlives its parent, a crash, garbage, no result. Whatever happens, the result
is rejected, the output stream ends, and no process of the tree and no worktree is left."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from adapters.runtime.claude_sdk import ClaudeAdapterConfig, create_claude_adapter
from domain.errors import AgentFailure
from domain.models import EngineState, ImplementorStartParams
from domain.ports import RuntimeAdapterDeps, SessionLogging
from domain.results import ImplementorResult
from tests.adapters.runtime.driving import drive
from tests.fakes.claude_cli_fixture import FakeClaude
from tests.fakes.provider import fake_provider
from tests.repos import make_repo

PARAMS = ImplementorStartParams(session_id="implementor-f", work_item_id="1", branch_name="cpe/1-f")
WORKTREE = Path(".worktrees") / "cpe" / "1-f"


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "repo", with_agents=True)


@pytest.fixture
def fake(tmp_path: Path) -> Iterator[FakeClaude]:
    cli = FakeClaude.install(tmp_path / "fake")
    yield cli
    cli.reap()  # nothing should be left; this only keeps a failing test from leaking


def adapter(repo: Path, tmp_path: Path, fake: FakeClaude, env: dict[str, str], **kw: Any) -> Any:
    tracker, provider = fake_provider()
    tracker.add_item("1", "in-progress", title="Fault")
    state = EngineState.model_validate({"work_items": {"1": tracker.work_items["1"]}})
    deps = RuntimeAdapterDeps(
        work_item_reader=provider.work_item_reader,
        revision_reader=provider.revision_reader,
        get_state=lambda: state,
        get_review_history=provider.revision_reader.get_review_history,
    )
    config = ClaudeAdapterConfig(
        repo_root=str(repo),
        default_branch="main",
        max_agent_duration=kw.get("max_agent_duration", 60),
        logging=SessionLogging(logs_dir=str(tmp_path / "runs")),
        cli_path=str(fake.path),
        agent_env=env,
        kill_grace=1,
    )
    return create_claude_adapter(config, deps)


def run(runtime: Any, *, cancel_when: Any = None) -> tuple[list[str], Any]:
    return drive(runtime, PARAMS, cancel_when=cancel_when)


def wait_for_file(path: Path, timeout: float = 30) -> None:
    pause = __import__("threading").Event()  # never set: a bounded pause between checks
    for _ in range(int(timeout / 0.05)):
        if path.exists() and path.read_text().strip():
            return
        pause.wait(0.05)
    raise AssertionError(f"{path} never appeared")


def gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


@pytest.mark.parametrize("mode", ["hang", "ignore_sigterm", "grandchild"])
@pytest.mark.spec("S001-41")
@pytest.mark.spec("S000-30")
def test_cancel_kills_the_whole_tree_and_ends_the_stream(
    repo: Path, tmp_path: Path, fake: FakeClaude, mode: str
) -> None:
    runtime = adapter(repo, tmp_path, fake, fake.env(mode))
    watched = fake.grandchild_pid_file if mode == "grandchild" else fake.pid_file
    chunks, failure = run(runtime, cancel_when=lambda: wait_for_file(watched))
    assert isinstance(failure, AgentFailure)
    assert failure.kind == "cancelled"
    assert isinstance(chunks, list)  # the stream ended
    assert gone(fake.pid())
    if mode == "grandchild":
        assert gone(fake.grandchild_pid())
    assert not (repo / WORKTREE).exists()


@pytest.mark.parametrize("mode", ["hang", "grandchild"])
def test_a_timeout_kills_the_whole_tree(
    repo: Path, tmp_path: Path, fake: FakeClaude, mode: str
) -> None:
    runtime = adapter(repo, tmp_path, fake, fake.env(mode), max_agent_duration=3)
    _, failure = run(runtime)
    assert isinstance(failure, AgentFailure)
    assert failure.kind == "timed-out"
    assert gone(fake.pid())
    if mode == "grandchild":
        assert gone(fake.grandchild_pid())
    assert not (repo / WORKTREE).exists()


@pytest.mark.parametrize(
    ("mode", "fragment"),
    [
        ("crash", "the claude CLI failed"),
        ("garbage", "the claude CLI failed"),
        ("no_result", "ended without a result"),
        ("error_result", "error_max_structured_output_retries"),
    ],
)
@pytest.mark.spec("S000-05")
def test_a_broken_cli_is_a_failed_run_with_nothing_left(
    repo: Path, tmp_path: Path, fake: FakeClaude, mode: str, fragment: str
) -> None:
    runtime = adapter(repo, tmp_path, fake, fake.env(mode, exit_code=3))
    _, failure = run(runtime)
    assert isinstance(failure, AgentFailure), failure
    assert failure.kind == "failed"
    assert fragment in failure.reason
    assert gone(fake.pid())
    assert not (repo / WORKTREE).exists()


@pytest.mark.spec("S001-28")
@pytest.mark.spec("S000-22")
def test_completed_with_no_changes_is_a_failure(
    repo: Path, tmp_path: Path, fake: FakeClaude
) -> None:
    output = {"role": "implementor", "outcome": "completed", "summary": "did nothing"}
    runtime = adapter(repo, tmp_path, fake, fake.env("ok", output=output))
    _, failure = run(runtime)
    assert isinstance(failure, AgentFailure)
    assert "no changes" in failure.reason


@pytest.mark.spec("S001-30")
def test_a_validation_failure_outcome_has_no_patch(
    repo: Path, tmp_path: Path, fake: FakeClaude
) -> None:
    output = {"role": "implementor", "outcome": "validation-failure", "summary": "tests fail"}
    runtime = adapter(repo, tmp_path, fake, fake.env("ok", output=output))
    _, result = run(runtime)
    assert isinstance(result, ImplementorResult)
    assert (result.outcome, result.patch) == ("validation-failure", None)

"""Faults the real CLI will not produce on demand, through the real adapter and the real SDK,
with fake `claude` CLIs that speak the SDK's protocol: a hang, a CLI ignoring SIGTERM, a
grandchild that outlives its parent, a crash (also one that leaves its grandchild running),
garbage, no result. Whatever happens, the result is rejected, the output stream ends, and no
process of the tree and no worktree is left."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from adapters.runtime.process.launcher import stamp_pid
from domain.errors import AgentFailure
from domain.results import ImplementorResult
from tests.adapters.runtime.fake_sdk import (
    WORKTREE,
    fake_adapter,
    gone,
    run,
    still_running,
    wait_for_file,
)
from tests.fakes.claude_cli_fixture import FakeClaude
from tests.support.git import git_raw, make_repo


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "repo", with_agents=True)


adapter = fake_adapter


@pytest.mark.parametrize("mode", ["hang", "ignore_sigterm", "grandchild"])
@pytest.mark.spec("S001-41")
@pytest.mark.spec("S000-30")
def test_cancel_kills_the_whole_tree_and_ends_the_stream(
    repo: Path, tmp_path: Path, fake_claude: FakeClaude, mode: str
) -> None:
    runtime = adapter(repo, tmp_path, fake_claude, fake_claude.env(mode))
    watched = fake_claude.grandchild_pid_file if mode == "grandchild" else fake_claude.pid_file
    chunks, failure = run(runtime, cancel_when=lambda: wait_for_file(watched))
    assert isinstance(failure, AgentFailure)
    assert failure.kind == "cancelled"
    assert isinstance(chunks, list)  # the stream ended
    assert gone(fake_claude.pid())
    if mode == "grandchild":
        assert gone(fake_claude.grandchild_pid())
    assert not (repo / WORKTREE).exists()


@pytest.mark.parametrize("mode", ["hang", "ignore_sigterm", "grandchild"])
@pytest.mark.spec("S000-27")
def test_a_timeout_kills_the_whole_tree(
    repo: Path, tmp_path: Path, fake_claude: FakeClaude, mode: str
) -> None:
    # ignore_sigterm: only the SIGKILL after the grace period can end the CLI
    runtime = adapter(repo, tmp_path, fake_claude, fake_claude.env(mode), max_agent_duration=3)
    chunks, failure = run(runtime)
    assert isinstance(failure, AgentFailure)
    assert failure.kind == "timed-out"
    assert isinstance(chunks, list)  # the stream ended
    started = fake_claude.recorded_pids()  # the CLI's pid, and the grandchild's in that mode
    assert fake_claude.pid() in started
    if mode == "grandchild":
        assert fake_claude.grandchild_pid() in started
    assert still_running(started) == []
    assert not (repo / WORKTREE).exists()
    assert "cpe/1-f" not in git_raw(repo, "branch", "--list")


@pytest.mark.spec("S000-05")
@pytest.mark.spec("S000-09")
def test_a_crashed_cli_leaves_no_grandchild_behind(
    repo: Path, tmp_path: Path, fake_claude: FakeClaude
) -> None:
    # The CLI exits on its own while a command it started still runs: no signal ever reached
    # the CLI, so only killing its process group can end the grandchild.
    runtime = adapter(repo, tmp_path, fake_claude, fake_claude.env("crash_grandchild", exit_code=3))
    _, failure = run(runtime)
    assert isinstance(failure, AgentFailure), failure
    assert (failure.kind, "the claude CLI failed" in failure.reason) == ("failed", True)
    assert gone(fake_claude.pid())
    grandchild = fake_claude.grandchild_pid()
    assert grandchild != fake_claude.pid()
    assert still_running([grandchild]) == []
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
    repo: Path, tmp_path: Path, fake_claude: FakeClaude, mode: str, fragment: str
) -> None:
    runtime = adapter(repo, tmp_path, fake_claude, fake_claude.env(mode, exit_code=3))
    _, failure = run(runtime)
    assert isinstance(failure, AgentFailure), failure
    assert failure.kind == "failed"
    assert fragment in failure.reason
    assert gone(fake_claude.pid())
    assert not (repo / WORKTREE).exists()


@pytest.mark.spec("S001-28")
@pytest.mark.spec("S000-22")
def test_completed_with_no_changes_is_a_failure(
    repo: Path, tmp_path: Path, fake_claude: FakeClaude
) -> None:
    output = {"role": "implementor", "outcome": "completed", "summary": "did nothing"}
    runtime = adapter(repo, tmp_path, fake_claude, fake_claude.env("ok", output=output))
    _, failure = run(runtime)
    assert isinstance(failure, AgentFailure)
    assert "no changes" in failure.reason


@pytest.mark.spec("S001-30")
def test_a_validation_failure_outcome_has_no_patch(
    repo: Path, tmp_path: Path, fake_claude: FakeClaude
) -> None:
    output = {"role": "implementor", "outcome": "validation-failure", "summary": "tests fail"}
    runtime = adapter(repo, tmp_path, fake_claude, fake_claude.env("ok", output=output))
    _, result = run(runtime)
    assert isinstance(result, ImplementorResult)
    assert (result.outcome, result.patch) == ("validation-failure", None)


def _session_leader(*argv: str) -> subprocess.Popen[bytes]:
    """A process in a session (and process group) of its own, like the wrapped claude CLI."""
    return subprocess.Popen(
        [sys.executable, "-c", "import threading; threading.Event().wait(300)", *argv],
        start_new_session=True,
    )


def test_the_reaper_kills_a_group_its_stamped_pid_file_proves_is_an_earlier_runs(
    repo: Path, tmp_path: Path, fake_claude: FakeClaude
) -> None:
    orphan = _session_leader("claude")
    try:
        pidfile = tmp_path / "runs" / "implementor-old" / "cli.pid"
        pidfile.parent.mkdir(parents=True)
        pidfile.write_text(f"{orphan.pid}\n")
        stamp_pid(pidfile, orphan.pid)  # what a run does once its CLI answered
        adapter(repo, tmp_path, fake_claude, fake_claude.env("ok")).reap()
        orphan.wait(60)  # ended (the reaper may have collected its status already)
        assert not psutil.pid_exists(orphan.pid)
        assert not pidfile.exists()
    finally:
        orphan.kill()
        orphan.wait(60)


@pytest.mark.parametrize("stamp", ["12345.0", ""], ids=["other-start-time", "never-stamped"])
def test_the_reaper_leaves_a_process_its_pid_file_does_not_prove_is_ours(
    repo: Path, tmp_path: Path, fake_claude: FakeClaude, stamp: str
) -> None:
    """A recycled pid: a live process, even one whose command line says claude, that started
    at another time than the run's CLI (or a file the run never stamped) is not killed."""
    bystander = _session_leader("--notes", "claude-notes.md")
    try:
        pidfile = tmp_path / "runs" / "implementor-old" / "cli.pid"
        pidfile.parent.mkdir(parents=True)
        pidfile.write_text(f"{bystander.pid} {stamp}\n")
        adapter(repo, tmp_path, fake_claude, fake_claude.env("ok")).reap()
        assert bystander.poll() is None, "a process that is not ours was killed"
        assert psutil.Process(bystander.pid).status() != psutil.STATUS_ZOMBIE
        assert not pidfile.exists()
    finally:
        bystander.kill()
        bystander.wait(60)

"""The Claude SDK adapter over the fake ``claude`` CLI (``tests/fakes/claude_cli.py``): the real
adapter and the real SDK, only the CLI is fake. Shared by the fault and session tests."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import psutil

from adapters.bash_guard import check_bash
from adapters.runtime.claude.sdk import ClaudeAdapter, ClaudeAdapterConfig, create_claude_adapter
from adapters.runtime.sandbox.guard_hook import BashCheck
from domain.models import EngineState, ImplementorStartParams, SessionId, WorkItemId
from domain.ports import RuntimeAdapterDeps, SessionLogging
from tests.adapters.runtime.driving import drive
from tests.fakes.claude_cli_fixture import FakeClaude
from tests.fakes.provider import fake_provider

PARAMS = ImplementorStartParams(
    session_id=SessionId("implementor-f"), work_item_id=WorkItemId("1"), branch_name="cpe/1-f"
)
WORKTREE = Path(".worktrees") / "cpe" / "1-f"
BLOCKED = {"role": "implementor", "outcome": "blocked", "summary": "cannot go on"}
COMPLETED = {"role": "implementor", "outcome": "completed", "summary": "done"}


def fake_adapter(
    repo: Path,
    tmp_path: Path,
    fake_claude: FakeClaude,
    env: dict[str, str],
    *,
    bash_check: BashCheck = check_bash,
    agent_sessions: bool = True,
    **config: Any,
) -> ClaudeAdapter:
    """An adapter on ``repo`` whose CLI is ``fake_claude`` behaving as ``env`` says; its runs go to
    ``tmp_path/runs/<session_id>``. ``config`` overrides ``ClaudeAdapterConfig`` fields."""
    tracker, provider = fake_provider()
    tracker.add_item("1", "in-progress", title="Fault")
    state = EngineState.model_validate({"work_items": {"1": tracker.work_items["1"]}})
    deps = RuntimeAdapterDeps(
        work_item_reader=provider.work_item_reader,
        revision_reader=provider.revision_reader,
        get_state=lambda: state,
        get_review_history=provider.revision_reader.get_review_history,
    )
    settings: dict[str, Any] = {
        "repo_root": str(repo),
        "default_branch": "main",
        "max_agent_duration": 60,
        "logging": SessionLogging(agent_sessions=agent_sessions, logs_dir=str(tmp_path / "runs")),
        "cli_path": str(fake_claude.path),
        "agent_env": env,
        "kill_grace": 1,
    }
    settings.update(config)
    return create_claude_adapter(ClaudeAdapterConfig(**settings), deps, bash_check=bash_check)


def run(runtime: Any, *, cancel_when: Callable[[], object] | None = None) -> tuple[list[str], Any]:
    return drive(runtime, PARAMS, cancel_when=cancel_when)


def run_dir(tmp_path: Path) -> Path:
    return tmp_path / "runs" / str(PARAMS.session_id)


def _wait(condition: Callable[[], bool], timeout: float) -> bool:
    pause = threading.Event()  # never set: a bounded pause between checks
    for _ in range(int(timeout / 0.05)):
        if condition():
            return True
        pause.wait(0.05)
    return condition()


def wait_for_file(path: Path, timeout: float = 30) -> None:
    if not _wait(lambda: path.exists() and bool(path.read_text().strip()), timeout):
        raise AssertionError(f"{path} never appeared")


def gone(pid: int) -> bool:
    """``pid`` has ended (a zombie waiting for its parent has ended too)."""
    try:
        return bool(psutil.Process(pid).status() == psutil.STATUS_ZOMBIE)
    except psutil.NoSuchProcess:
        return True


def still_running(pids: Iterable[int], timeout: float = 30) -> list[int]:
    """Those of ``pids`` still running after waiting up to ``timeout`` for all to end: the
    kill was sent before the result resolved, and its delivery is the kernel's business."""
    pids = list(pids)
    _wait(lambda: all(gone(p) for p in pids), timeout)
    return [p for p in pids if not gone(p)]

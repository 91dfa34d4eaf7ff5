"""``cpe status``'s first line, from the command line: whether an engine holds the state (its
instance lock, held here for real) and how the last one ended (the starts and stops it
journaled); and a run the engine left active shown with its duration up to the stop."""

from __future__ import annotations

import os
import re
from datetime import timedelta
from pathlib import Path

from actors.journal import JOURNAL_NAME, Journal
from actors.journal_file import InstanceLock
from actors.process import ABANDONED
from domain.events import (
    AgentFailed,
    AgentRequested,
    AgentStarted,
    EngineEvent,
    EngineStarted,
    EngineStopped,
)
from domain.models import ImplementorStartParams, SessionId, WorkItemId
from tests.adapters.cli.test_cli import cpe
from tests.adapters.cli.test_status import CONFIG, T0, journal, sections
from tests.support.git import make_repo

AT = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC"
SESSION = SessionId("implementor-0a1b2c3d4e5f")
LEFT_ACTIVE = "agent runs left active when the engine stopped (the next start ends them)"


def status(repo: Path) -> tuple[str, dict[str, list[str]]]:
    result = cpe("status", cwd=repo)
    assert result.returncode == 0, result.stderr
    return result.stdout.splitlines()[0], sections(result.stdout)


def append_unprocessed(state_dir: Path, events: list[EngineEvent]) -> None:
    """Journal ``events`` as an engine's last acts: appended, never processed."""
    store = Journal(state_dir / JOURNAL_NAME)
    try:
        for event in events:
            store.append(event)
    finally:
        store.close()


def a_run(pid: int) -> list[EngineEvent]:
    """An engine started at T0 whose implementor run started a second later."""
    params = ImplementorStartParams(
        session_id=SESSION, work_item_id=WorkItemId("1"), branch_name="cpe/1-greeting"
    )
    return [
        EngineStarted(pid=pid, at=T0),
        AgentRequested(session_id=SESSION, params=params, at=T0),
        AgentStarted(session_id=SESSION, at=T0 + timedelta(seconds=1)),
    ]


def test_status_names_the_process_holding_the_engines_lock_and_since_when(
    tmp_path: Path,
) -> None:
    repo = make_repo(tmp_path / "repo", {"supervisor.toml": CONFIG})
    state_dir = repo / ".cpe"
    journal(state_dir, a_run(os.getpid()))
    lock = InstanceLock(str(state_dir / JOURNAL_NAME))
    lock.acquire()
    try:
        line, shown = status(repo)
    finally:
        lock.release()
    assert line == f"engine running (pid {os.getpid()}, since 2025-01-02 03:04:05 UTC)"
    [active] = shown["active agent runs (duration so far)"]
    assert active.split()[:2] == [SESSION, "implementor"]

    line, shown = status(repo)  # the lock let go, no stop journaled: it died
    assert re.fullmatch(rf"engine not running \(last stop after {AT}, crashed\)", line), line
    [left] = shown[LEFT_ACTIVE]
    assert " running when the engine stopped (" in left


def test_status_after_a_second_ctrl_c_says_interrupted_and_the_runs_duration_stays(
    tmp_path: Path,
) -> None:
    """The forced exit journals the active runs as abandoned, then the interruption: neither is
    processed (the next start does that); the run lasted from its start to the exit."""
    repo = make_repo(tmp_path / "repo", {"supervisor.toml": CONFIG})
    state_dir = repo / ".cpe"
    journal(state_dir, a_run(4242))
    exit_at = T0 + timedelta(seconds=11.1)
    append_unprocessed(
        state_dir,
        [
            AgentFailed(
                session_id=SESSION,
                role="implementor",
                kind="cancelled",
                reason=ABANDONED,
                at=exit_at,
            ),
            EngineStopped(
                how="interrupted", reason="a second Ctrl-C: exited without waiting", at=exit_at
            ),
        ],
    )
    line, shown = status(repo)
    assert line == (
        "engine not running (last stop 2025-01-02 03:04:16 UTC, "
        "interrupted: a second Ctrl-C: exited without waiting)"
    )
    [left] = shown[LEFT_ACTIVE]
    assert left.split()[:2] == [SESSION, "implementor"]
    assert left.endswith("running when the engine stopped (10.1s)"), left
    assert status(repo)[1][LEFT_ACTIVE] == [left]


def test_status_of_a_state_no_engine_ever_used_says_so(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", {"supervisor.toml": CONFIG})
    line, shown = status(repo)
    assert line == "engine not running (never started on this state)"
    assert shown["active agent runs (duration so far)"] == ["(none)"]

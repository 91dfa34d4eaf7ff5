"""`cpe run` following a person's changes on the tracker while agents run: an item set to
`blocked` (or `done`), or given a new open blocker, has its run cancelled within a couple of
polls, its worktree removed and no attempt spent, and the log and `cpe status` say why. The
real `claude` CLI, the scripted model holding every implementor run open."""

from __future__ import annotations

import contextlib
import signal
import sqlite3
import subprocess
from pathlib import Path

from actors.journal import Journal
from adapters.providers.local.provider import DATABASE_NAME, LocalProvider
from adapters.scripted_model import Match, ScriptedModelServer, load_scenario
from tests.adapters.cli.test_cli import cpe
from tests.e2e.running import add_work_item, make_cpe_repo, start_cpe, wait_for, worktrees

SET_BLOCKED = "#1: run cancelled: set to blocked by a person"
GAINED = "#2: run cancelled: it gained an open blocker: #3"


def test_a_persons_change_under_a_running_agent_cancels_it_at_no_cost(
    tmp_path: Path, processes: list[subprocess.Popen[str]]
) -> None:
    repo = make_cpe_repo(tmp_path / "repo")
    for title in ("One", "Two", "Three"):
        add_work_item(repo, title, f"Do {title.lower()}.")
    home = tmp_path / "home"
    home.mkdir()
    book = [load_scenario("hang", match=Match(role="implementor"))]
    status = ""

    def status_says(*texts: str) -> bool:
        nonlocal status
        status = cpe("status", cwd=repo).stdout
        return all(text in status for text in texts)

    with contextlib.ExitStack() as stack:
        server = stack.enter_context(ScriptedModelServer(book))
        log = stack.enter_context((home / "cpe.log").open("a"))
        cpe_run = start_cpe(repo, home, log, server.client_env())
        processes.append(cpe_run)
        assert server.wait_until(lambda s: s.hanging >= 2, timeout=180), "no two runs started"
        assert sorted(p.name for p in worktrees(repo)) == ["1-one", "2-two"]
        # a person, on the tracker: #1 blocked; #2 now waits for #3
        provider = LocalProvider(repo, repo / ".cpe", "main")
        try:
            provider.work_item_writer.transition_status("1", "blocked")
        finally:
            provider.close()
        with sqlite3.connect(repo / ".cpe" / DATABASE_NAME) as db:
            db.execute(
                "INSERT INTO work_item_blockers (work_item_id, blocked_by, position) "
                "VALUES (2, 3, 0)"
            )
        cancelled = wait_for(lambda: status_says(SET_BLOCKED, GAINED), 120)
        # their worktrees are gone while cpe runs on (#3's run may have started meanwhile)
        cleaned = wait_for(
            lambda: not [p for p in worktrees(repo) if p.name.startswith(("1-", "2-"))], 60
        )
        cpe_run.send_signal(signal.SIGTERM)
        assert cpe_run.wait(120) == 0
    log_text = (home / "cpe.log").read_text()
    assert cancelled, status + log_text[-3000:]
    assert cleaned, worktrees(repo)
    assert f'"reason": "{SET_BLOCKED}"' in log_text
    journal = Journal(repo / ".cpe" / "journal.sqlite3")
    try:
        state = journal.replay()
    finally:
        journal.close()
    assert state.attempts.get("1", 0) == 0
    assert state.attempts.get("2", 0) == 0
    reasons = {run.failure_reason for run in state.agent_runs.values() if run.status == "cancelled"}
    assert {SET_BLOCKED, GAINED} <= reasons
    assert worktrees(repo) == []

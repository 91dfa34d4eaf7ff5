"""`cpe run` as a user runs it: a real process on a real repository, the real claude CLI, the
scripted model on loopback. A kill -9 in the middle of an implementor run, then a restart."""

from __future__ import annotations

import contextlib
import signal
import subprocess
from pathlib import Path

import psutil
import pytest

from adapters.runtime.process.launcher import read_pid
from adapters.scripted_model import Match, Scenario, ScriptedModelServer, load_scenario
from tests.e2e.running import (
    add_work_item,
    agent_branches,
    make_cpe_repo,
    revisions,
    start_cpe,
    wait_for,
    work_items,
    worktrees,
)
from tests.support.git import git_raw

# The killed run: it writes a file of its own, then its model never answers again.
WRITE_THEN_HANG = Scenario.model_validate(
    {
        "name": "write_then_hang",
        "description": "an implementor that writes leftover.txt, then hangs",
        "match": {"role": "implementor"},
        "turns": [
            [
                {
                    "tool": "Write",
                    "input": {"file_path": "{cwd}/leftover.txt", "content": "half done\n"},
                }
            ],
            [{"hang": True}],
        ],
    }
)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_cpe_repo(tmp_path / "repo")


def test_kill_9_during_an_implementor_run_then_restart_completes_with_one_revision(
    repo: Path, tmp_path: Path, processes: list[subprocess.Popen[str]]
) -> None:
    with contextlib.ExitStack() as stack:
        _kill_9_then_restart(repo, tmp_path, processes, stack)


def _kill_9_then_restart(
    repo: Path, tmp_path: Path, processes: list[subprocess.Popen[str]], stack: contextlib.ExitStack
) -> None:
    add_work_item(repo, "Greeting", "Add greet(name) with a test.")
    home = tmp_path / "home"
    home.mkdir()
    log = stack.enter_context((home / "cpe.log").open("a"))  # read it when this test fails

    with ScriptedModelServer([WRITE_THEN_HANG]) as first:
        cpe = start_cpe(repo, home, log, first.client_env())
        processes.append(cpe)
        assert first.wait_until(lambda s: s.hanging >= 1, timeout=120), "no implementor started"
        [pidfile] = (repo / ".cpe" / "runs").glob("*/cli.pid")
        orphan = read_pid(pidfile)
        assert orphan is not None
        assert psutil.pid_exists(orphan)
        [killed_worktree] = worktrees(repo)
        assert (killed_worktree / "leftover.txt").exists()  # the run was at work
        cpe.send_signal(signal.SIGKILL)
        cpe.wait(30)
        assert killed_worktree.exists()  # the killed run left its worktree behind

        book = [load_scenario("implement"), load_scenario("approve", match=Match(role="reviewer"))]
        with ScriptedModelServer(book) as second:
            restarted = start_cpe(repo, home, log, second.client_env())
            processes.append(restarted)
            done = wait_for(lambda: [i.status for i in work_items(repo)] == ["done"])
            restarted.send_signal(signal.SIGTERM)
            assert restarted.wait(120) == 0
    assert done, "the work item did not complete after the restart"
    [revision] = revisions(repo)  # exactly one revision for the item
    assert revision.state == "merged"
    assert (repo / ".cpe" / "journal.sqlite3").exists()  # state lives in the repository
    assert not psutil.pid_exists(orphan) or psutil.Process(orphan).status() == "zombie"
    assert worktrees(repo) == [], "no worktree is left, the killed run's included"
    assert set(agent_branches(repo)) <= {revision.branch}, "no branch but the revision's"
    for branch in agent_branches(repo):  # the same name as the killed run's: the revision's
        assert git_raw(repo, "rev-parse", branch).strip() == revision.head_sha
    merged = git_raw(repo, "ls-tree", "-r", "--name-only", "main").split()
    assert "greeting.py" in merged
    assert "leftover.txt" not in merged, "nothing of the killed run reached the revision"

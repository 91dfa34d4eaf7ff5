"""`cpe run`: every ending of a run cleans up while cpe runs on, not only at the next start.
A run past its duration limit is timed out, its CLI's processes killed and its worktree and
branch removed, on every runtime: the Claude SDK and `claude -p` (the real CLI, the scripted
model holding the implementor's request) and `codex exec` (the fake codex holding its turn)."""

from __future__ import annotations

import contextlib
import signal
import subprocess
from pathlib import Path

import pytest

from adapters.scripted_model import Match, ScriptedModelServer, load_scenario
from tests.adapters.cli.test_cli import cpe
from tests.e2e.running import (
    add_work_item,
    agent_branches,
    agent_runs,
    make_cpe_repo,
    start_cpe,
    wait_for,
    worktrees,
)
from tests.e2e.test_cpe_signals import _fake_codex


@pytest.mark.parametrize("runtime", ["claude-sdk", "claude-cli", "codex-cli"])
def test_a_timed_out_run_leaves_no_worktree_or_branch_behind(
    tmp_path: Path, processes: list[subprocess.Popen[str]], runtime: str
) -> None:
    extra = f'[runtime.roles]\nimplementor = "{runtime}"\n'
    if runtime == "codex-cli":  # the fake codex, holding its turn open as the real one would
        # its pid file in its working directory: the sandbox lets it write nowhere else
        codex = _fake_codex(tmp_path / "bin", mode="hang", pid_file=Path("codex.pid"))
        extra += f'[runtime.codex_cli]\ncli_path = "{codex}"\n'
    repo = make_cpe_repo(tmp_path / "repo", extra=extra)
    config = repo / "supervisor.toml"
    text = config.read_text().replace("max_agent_duration = 120", "max_agent_duration = 4")
    config.write_text(text.replace("auto_merge = true", "auto_merge = true\nmax_attempts = 1"))
    add_work_item(repo, "One", "Do one.")
    home = tmp_path / "home"
    home.mkdir()
    book = [load_scenario("hang", match=Match(role="implementor"))]
    status = ""

    def timed_out() -> bool:
        nonlocal status
        status = cpe("status", cwd=repo).stdout
        return "timed-out" in status

    with contextlib.ExitStack() as stack:
        server = stack.enter_context(ScriptedModelServer(book))
        log = stack.enter_context((home / "cpe.log").open("a"))
        cpe_run = start_cpe(repo, home, log, server.client_env())
        processes.append(cpe_run)
        started = (  # (the fake codex writes its pid file at the preflight's --version too)
            wait_for(lambda: bool(worktrees(repo)), 180)
            if runtime == "codex-cli"
            else server.wait_until(lambda s: s.hanging >= 1, timeout=180)
        )
        assert started, "no run started"
        assert [p.name for p in worktrees(repo)] == ["1-one"]
        ended = wait_for(timed_out, 120)
        # while cpe runs on (one attempt: no retry makes a worktree again), nothing is left
        cleaned = wait_for(lambda: not worktrees(repo) and not agent_branches(repo), 60)
        blocked = wait_for(lambda: "blocked" in cpe("status", cwd=repo).stdout, 60)
        cpe_run.send_signal(signal.SIGTERM)
        assert cpe_run.wait(120) == 0
    log_text = (home / "cpe.log").read_text()
    assert ended, status + log_text[-3000:]
    assert cleaned, (worktrees(repo), agent_branches(repo))
    assert blocked
    assert "Event loop is closed" not in log_text
    [run] = [r for r in agent_runs(repo) if r.role == "implementor"]
    assert run.status == "timed-out"

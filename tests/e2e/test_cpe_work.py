"""A person steps in while `cpe run` runs, as they would: `cpe work cancel`, `cpe pause`,
`cpe work retry`, `cpe resume`, `cpe work set-status` from another terminal (real processes,
the control socket), and the same commands with no engine running (journaled for the next
start)."""

from __future__ import annotations

import contextlib
import signal
import subprocess
from pathlib import Path

import pytest

from adapters.scripted_model import Match, Scenario, ScriptedModelServer, load_scenario
from domain.models import AgentRun
from tests.adapters.cli.test_cli import cpe, one_line_error
from tests.e2e.running import (
    add_work_item,
    agent_runs,
    make_cpe_repo,
    start_cpe,
    wait_for,
    work_items,
)

HANG = Scenario.model_validate(
    {
        "name": "hang",
        "description": "an implementor that says what it does, then never answers again",
        "match": {"role": "implementor"},
        "turns": [[{"text": "Looking at the work item."}], [{"hang": True}]],
    }
)


def status_of(repo: Path, wid: str = "1") -> str:
    return {i.id: i.status for i in work_items(repo)}[wid]


def run(repo: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return cpe(*args, "--repo", str(repo))


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    path = make_cpe_repo(tmp_path / "repo")
    add_work_item(path, "Greeting", "Add greet(name) with a test.")
    return path


def test_a_person_cancels_pauses_retries_and_resumes_a_running_engine(
    repo: Path, tmp_path: Path, processes: list[subprocess.Popen[str]]
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    with (home / "cpe.log").open("a") as log, ScriptedModelServer([HANG]) as model:
        engine = start_cpe(repo, home, log, model.client_env())
        processes.append(engine)
        assert model.wait_until(lambda s: s.hanging >= 1, timeout=120), "no implementor ran"

        # set-status of an item with a run in flight: refused, nothing changes
        line = one_line_error(run(repo, "work", "set-status", "1", "pending"), 1)
        assert "cpe work cancel 1" in line
        cancelled = run(repo, "work", "cancel", "1")
        assert cancelled.returncode == 0, cancelled.stderr
        assert "cancelling implementor run" in cancelled.stdout
        assert wait_for(lambda: status_of(repo) == "blocked")
        # The item is blocked at once; its run ends when its process does (later, under load).
        assert wait_for(lambda: agent_runs_now(repo)[0].status != "running")
        [run_] = agent_runs_now(repo)
        assert (run_.status, run_.failure_reason) == ("cancelled", "cancelled by a person")

        assert run(repo, "pause", "--reason", "looking into it").returncode == 0
        status = run(repo, "status").stdout
        assert "dispatch paused by a person" in status
        assert "looking into it" in status
        line = one_line_error(run(repo, "work", "retry", "1"), 1)
        assert "cpe resume" in line
        assert status_of(repo) == "blocked"  # a refused request changed nothing

        resumed = run(repo, "resume")
        assert (resumed.returncode, resumed.stdout) == (0, "dispatch resumed\n")
        model.book = (
            load_scenario("implement"),
            load_scenario("approve", match=Match(role="reviewer")),
        )
        retried = run(repo, "work", "retry", "1")
        assert retried.returncode == 0, retried.stderr
        assert "blocked → in-progress" in retried.stdout
        assert wait_for(lambda: status_of(repo) == "done"), "the retried item did not finish"

        one_line_error(run(repo, "work", "retry", "9"), 1)
        line = one_line_error(run(repo, "work", "cancel", "1"), 1)
        assert "#1 has no active agent run (it is done)" in line
        engine.send_signal(signal.SIGTERM)
        assert engine.wait(120) == 0
    assert not (repo / ".cpe" / "control.sock").exists()


def agent_runs_now(repo: Path) -> list[AgentRun]:
    """The runs as `cpe` commands see them while the engine runs (the journal, read only)."""
    from adapters.cli.common import journal_state  # noqa: PLC0415

    return list(journal_state(repo / ".cpe").agent_runs.values())


def test_requests_with_no_engine_running_are_journaled_for_the_next_start(
    repo: Path, tmp_path: Path, processes: list[subprocess.Popen[str]]
) -> None:
    add_work_item(repo, "Farewell", "Add bye(name).")
    assert run(repo, "pause").returncode == 0
    assert "dispatch paused by a person" in run(repo, "status").stdout
    moved = run(repo, "work", "set-status", "2", "blocked")
    assert moved.returncode == 0, moved.stderr
    assert "pending → blocked" in moved.stdout
    assert status_of(repo, "2") == "blocked"  # the tracker shows it at once
    one_line_error(run(repo, "work", "retry", "2"), 1)  # paused
    line = one_line_error(run(repo, "work", "set-status", "2", "finished"), 2)
    assert "expected one of pending" in line

    home = tmp_path / "home"
    home.mkdir()
    book = [load_scenario("implement"), load_scenario("approve", match=Match(role="reviewer"))]
    with contextlib.ExitStack() as stack:
        log = stack.enter_context((home / "cpe.log").open("a"))
        model = stack.enter_context(ScriptedModelServer(book))
        engine = start_cpe(repo, home, log, model.client_env())
        processes.append(engine)
        # paused from the start: the journaled pause held dispatch, nothing ran
        assert wait_for((repo / ".cpe" / "control.sock").exists)
        assert agent_runs_now(repo) == []
        assert run(repo, "resume").returncode == 0
        assert wait_for(lambda: status_of(repo, "1") == "done")
        assert status_of(repo, "2") == "blocked"  # a person's blocked holds
        engine.send_signal(signal.SIGTERM)
        assert engine.wait(120) == 0
    roles = [r.role for r in agent_runs(repo)]
    assert roles == ["implementor", "reviewer"]

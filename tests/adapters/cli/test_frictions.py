"""What a newcomer met on the command line (issue 35, its smaller things), each as the user meets
it: ``cpe work add`` with an empty title or a long body, ``cpe runs list``, ``cpe replay
--until`` out of range, ``cpe costs`` totals that agree, ``cpe run --help``, ``cpe run`` after an
uncommitted ``cpe init`` and on a person's terminal (its whole log in a file)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest

from adapters.providers.local.provider import LocalProvider
from domain.events import AgentFailed, AgentRequested, AgentStarted, EngineEvent
from domain.models import ImplementorStartParams, ReviewerStartParams, SessionId, WorkItemId
from tests.adapters.cli.test_cli import ROOT, cpe, one_line_error
from tests.adapters.cli.test_status import (
    CONFIG,
    IMPLEMENTOR,
    PLANNER,
    REVIEWER,
    T0,
    Worked,
    journal,
    make_worked,
)
from tests.e2e.running import wait_for
from tests.support.git import git_raw, make_repo


@pytest.fixture
def worked(tmp_path: Path) -> Worked:
    return make_worked(tmp_path)


# ---------------------------------------------------------------------------- cpe work add


def items(repo: Path) -> list[tuple[str, str]]:
    with LocalProvider(repo, repo / ".cpe", "main") as provider:
        reader = provider.work_item_reader
        return [(i.title, reader.get_work_item_body(i.id)) for i in reader.list_work_items()]


def test_work_add_refuses_an_empty_title_and_creates_nothing(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", {"supervisor.toml": CONFIG})
    for title in ("", "   "):
        line = one_line_error(cpe("work", "add", title, cwd=repo), 2)
        assert line == "cpe: work add: the title is empty; expected a few words saying what to do"
    assert items(repo) == []


def test_work_add_reads_a_long_body_from_a_file_or_standard_input(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", {"supervisor.toml": CONFIG})
    body = "## What\n\nA long body, with `code` and\n\n- a list\n" * 40
    spec = tmp_path / "body.md"
    spec.write_text(body)
    assert cpe("work", "add", "From a file", "--body-file", str(spec), cwd=repo).returncode == 0
    piped = subprocess.run(
        [sys.executable, "-m", "adapters.cli", "work", "add", "From stdin", "--body-file", "-"],
        input=body,
        capture_output=True,
        text=True,
        cwd=repo,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)},
        timeout=120,
        check=False,
    )
    assert piped.returncode == 0, piped.stderr
    assert items(repo) == [("From a file", body), ("From stdin", body)]


def test_work_add_with_a_body_file_it_cannot_read_says_so_and_creates_nothing(
    tmp_path: Path,
) -> None:
    repo = make_repo(tmp_path / "repo", {"supervisor.toml": CONFIG})
    missing = tmp_path / "nowhere.md"
    line = one_line_error(cpe("work", "add", "X", "--body-file", str(missing), cwd=repo), 2)
    assert line.startswith(f"cpe: work add: --body-file {missing}: cannot read it: ")
    assert items(repo) == []


# ---------------------------------------------------------------------------- cpe runs list


def test_runs_list_shows_every_run_newest_first(worked: Worked) -> None:
    listed = cpe("runs", "list", cwd=worked.repo)
    assert listed.returncode == 0, listed.stderr
    sessions = [line.split()[0] for line in listed.stdout.splitlines()]
    assert sessions == [REVIEWER, PLANNER, IMPLEMENTOR]
    limited = cpe("runs", "list", "--limit", "1", cwd=worked.repo).stdout.splitlines()
    assert limited[0].split()[0] == REVIEWER
    assert limited[1] == "(2 older runs: --limit 0 lists them all)"


def test_runs_list_on_a_new_repository_says_there_is_none(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", {"supervisor.toml": CONFIG})
    listed = cpe("runs", "list", cwd=repo)
    assert (listed.returncode, listed.stdout) == (0, "no agent runs yet\n"), listed.stderr


# ---------------------------------------------------------------------------- cpe replay


def test_replay_until_a_negative_number_is_a_usage_error(worked: Worked) -> None:
    line = one_line_error(cpe("replay", "--until", "-3", cwd=worked.repo), 2)
    assert "--until -3: expected an event's sequence number (1 is the first event" in line


# ---------------------------------------------------------------------------- cpe costs


def test_costs_totals_are_the_same_whichever_grouping(tmp_path: Path) -> None:
    """Costs whose float sums depend on their order (0.1 + 0.2 + ...): every grouping's total
    line is the same, the exact sum of the runs."""
    repo = make_repo(tmp_path / "repo", {"supervisor.toml": CONFIG})
    events: list[EngineEvent] = []
    costs = [0.1, 0.2, 0.30000000000000004, 1e-5, 0.00004999, 0.123456789, 7.00005] * 3
    for n, cost in enumerate(costs):
        sid = SessionId(f"implementor-{n:012x}")
        wid = WorkItemId(str(n % 4 + 1))
        if n % 2:
            params = ReviewerStartParams(session_id=sid, work_item_id=wid, revision_id="1")
            role = "reviewer"
        else:
            params = ImplementorStartParams(session_id=sid, work_item_id=wid, branch_name="b")
            role = "implementor"
        at = T0 + timedelta(hours=n * 5)  # several days
        events += [
            AgentRequested(session_id=sid, params=params, at=at),
            AgentStarted(session_id=sid, at=at),
            AgentFailed(session_id=sid, role=role, kind="failed", reason="x", cost_usd=cost, at=at),
        ]
    journal(repo / ".cpe", events)
    totals = set()
    for by in ("item", "role", "runtime", "model", "day"):
        shown = cpe("costs", "--by", by, cwd=repo)
        assert shown.returncode == 0, shown.stderr
        totals.add(shown.stdout.splitlines()[-1])
    [total] = totals
    assert total.split()[1:3] == [str(len(costs)), f"{sum(sorted(costs)):.4f}"]


# ---------------------------------------------------------------------------- cpe run


def test_run_help_says_what_the_engine_does(tmp_path: Path) -> None:
    shown = cpe("run", "--help", cwd=tmp_path)
    assert shown.returncode == 0
    assert "Run the engine on the repository until stopped" in shown.stdout
    assert "SIGHUP reloads supervisor.toml" in shown.stdout


def test_run_after_an_uncommitted_init_warns_that_agents_will_not_see_it(tmp_path: Path) -> None:
    """``cpe init`` wrote supervisor.toml and .claude/ and nobody committed them: the agents'
    worktrees of the default branch would not have them. ``cpe run`` says so as it starts."""
    repo = make_repo(tmp_path / "repo", {"README.md": "x\n"})
    assert cpe("init", "--repo", str(repo)).returncode == 0

    def warned() -> list[str]:
        log = tmp_path / "run.log"
        with log.open("w") as out:
            run = subprocess.Popen(
                [sys.executable, "-m", "adapters.cli", "run", "--scripted", "--repo", str(repo)],
                stdout=out,
                stderr=subprocess.STDOUT,
                text=True,
                env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "HOME": str(tmp_path)},
            )
            try:
                # the control socket listens once the start's warnings are said
                listening = "control socket listening"
                assert wait_for(lambda: listening in log.read_text()), log.read_text()
            finally:
                run.send_signal(signal.SIGTERM)
                run.wait(120)
        lines = [json.loads(line) for line in log.read_text().splitlines() if line[:1] == "{"]
        return [line["paths"] for line in lines if str(line["event"]).startswith("not committed")]

    assert warned() == [".claude, supervisor.toml"]
    git_raw(repo, "add", "-A")
    git_raw(repo, "commit", "-qm", "cpe")
    assert warned() == []

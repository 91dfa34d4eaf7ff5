"""What a person watching sees, from real processes: `cpe run --log-format human` tells each
decision in a line, `cpe runs show SESSION --follow` shows what a live run does (its tool calls
and their results, its text) as it does it, and `cpe status --watch` redraws until Ctrl-C."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from adapters.scripted_model import Match, Scenario, ScriptedModelServer, load_scenario
from tests.adapters.cli.test_cli import ROOT
from tests.e2e.running import Reader, add_work_item, make_cpe_repo, start_cpe, wait_for
from tests.e2e.test_cpe_work import agent_runs_now, status_of
from tests.support.git import git_raw

# An implementor that says two things, a turn apart, then never answers again.
TALK_THEN_HANG = Scenario.model_validate(
    {
        "name": "talk_then_hang",
        "description": "an implementor that reports progress, then hangs",
        "match": {"role": "implementor"},
        "turns": [
            [
                {"text": "Reading the work item first."},
                {"tool": "Write", "input": {"file_path": "{cwd}/notes.txt", "content": "x\n"}},
                {"tool": "Bash", "input": {"command": "cat notes.txt"}},
            ],
            [{"text": "Now writing greet(name)."}, {"hang": True}],
        ],
    }
)


def cpe_process(*args: str) -> subprocess.Popen[str]:
    """``cpe ARGS`` as a person runs it in another terminal, its output read as it comes."""
    return subprocess.Popen(
        [sys.executable, "-m", "adapters.cli", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        cwd=ROOT,
        env={"PATH": os.environ["PATH"], "PYTHONPATH": str(ROOT), "LANG": "C.UTF-8"},
    )


def test_a_person_follows_a_live_run_and_reads_the_engines_decisions(
    tmp_path: Path, processes: list[subprocess.Popen[str]]
) -> None:
    repo = make_cpe_repo(tmp_path / "repo")
    add_work_item(repo, "Greeting", "Add greet(name).")
    home = tmp_path / "home"
    home.mkdir()
    with (home / "cpe.log").open("a") as log, ScriptedModelServer([TALK_THEN_HANG]) as model:
        engine = start_cpe(repo, home, log, model.client_env(), args=["--log-format", "human"])
        processes.append(engine)
        assert wait_for(lambda: [r.status for r in agent_runs_now(repo)] == ["running"])
        [run] = agent_runs_now(repo)

        follower = cpe_process("runs", "show", run.session_id, "--follow", "--repo", str(repo))
        processes.append(follower)
        assert follower.stdout is not None
        followed = Reader(follower.stdout)
        assert followed.wait_for("assistant: Now writing greet(name)."), followed.text
        # what it did from the start, its tool calls and their results, not only its prose
        start = followed.lines.index("assistant: Reading the work item first.")
        write, bash, wrote, ran = followed.lines[start + 1 : start + 5]
        assert (write, bash) == ("tool Write: notes.txt (2 chars)", "tool Bash: cat notes.txt")
        assert wrote.startswith("tool result: File created successfully at: notes.txt")
        assert ran == "tool result: x", followed.text
        assert follower.poll() is None  # still following: the run goes on

        watcher = cpe_process("status", "--watch", "--repo", str(repo))
        processes.append(watcher)
        assert watcher.stdout is not None
        watched = Reader(watcher.stdout)
        assert wait_for(lambda: watched.text.count("Ctrl-C ends") >= 2), watched.text
        assert "#1    in-progress" in watched.text
        watcher.send_signal(signal.SIGINT)
        assert watcher.wait(60) == 0

        cancel = subprocess.run(
            [sys.executable, "-m", "adapters.cli", "work", "cancel", "1", "--repo", str(repo)],
            capture_output=True,
            text=True,
            cwd=ROOT,
            env={"PATH": os.environ["PATH"], "PYTHONPATH": str(ROOT)},
            timeout=120,
            check=False,
        )
        assert cancel.returncode == 0, cancel.stderr
        assert follower.wait(120) == 0
        followed.join()
        assert "run ended: " in followed.text
        assert "cancelled" in followed.lines[-2]
        assert followed.lines[-1] == "  why: cancelled by a person"
        assert wait_for(lambda: status_of(repo) == "blocked")
        engine.send_signal(signal.SIGTERM)
        assert engine.wait(120) == 0
    console = (home / "cpe.log").read_text()
    for decision in (
        "#1 'Greeting' seen (pending)",
        f"#1 'Greeting': implementor dispatched, attempt 1 ({run.session_id})",
        "#1 pending → in-progress: an implementor run was requested",
        f"a person cancelled run {run.session_id}",
        f"#1: implementor {run.session_id} cancelled: cancelled by a person",
        "#1 in-progress → blocked: its run was cancelled",
        "stopping: signal SIGTERM",
    ):
        assert decision in console, console
    for line in console.splitlines():  # human lines, not JSON
        assert (line[2:3], line[8:10]) == (":", "  "), line
        assert not line.startswith("{")


def test_the_json_log_format_stays_json_lines(
    tmp_path: Path, processes: list[subprocess.Popen[str]]
) -> None:
    repo = make_cpe_repo(tmp_path / "repo")
    add_work_item(repo, "Greeting", "Add greet(name) with a test.")
    home = tmp_path / "home"
    home.mkdir()
    book = [load_scenario("implement"), load_scenario("approve", match=Match(role="reviewer"))]
    with (home / "cpe.log").open("a") as log, ScriptedModelServer(book) as model:
        engine = start_cpe(repo, home, log, model.client_env(), args=["--log-format", "json"])
        processes.append(engine)
        assert wait_for(lambda: status_of(repo) == "done")
        engine.send_signal(signal.SIGTERM)
        assert engine.wait(120) == 0
    text = (home / "cpe.log").read_text()
    lines = [json.loads(line) for line in text.splitlines()]
    assert {"agent dispatched", "status changed", "shutdown complete"} <= {
        line["event"] for line in lines
    }
    # the dashboard's address is logged, its token is not: it is in a file only we can read
    [listening] = [line for line in lines if line["event"] == "dashboard listening"]
    assert listening["url"].startswith("http://127.0.0.1:")
    token_file = repo / ".cpe" / "dashboard-token"
    assert listening["actions_need"] == f"the token in {token_file}"
    assert token_file.stat().st_mode & 0o777 == 0o600
    token = token_file.read_text().strip()
    assert len(token) >= 32
    assert token not in text


def test_a_skipped_spec_is_told_once_per_version_not_at_every_start(
    tmp_path: Path, processes: list[subprocess.Popen[str]]
) -> None:
    """The console says a spec is skipped when it first sees that version; a restart on the
    same journal does not say it again, but tells a newly broken spec."""
    repo = make_cpe_repo(tmp_path / "repo")
    home = tmp_path / "home"
    home.mkdir()

    def commit_empty_spec(name: str) -> None:
        (repo / "specs").mkdir(exist_ok=True)
        (repo / "specs" / name).write_text("")
        git_raw(repo, "add", "specs")
        git_raw(repo, "commit", "-qm", f"an empty spec {name}")

    def run_until(log_path: Path, line: str) -> None:
        with log_path.open("w") as log, ScriptedModelServer([]) as model:
            engine = start_cpe(repo, home, log, model.client_env(), args=["--log-format", "human"])
            processes.append(engine)
            assert wait_for(lambda: line in log_path.read_text()), log_path.read_text()
            engine.send_signal(signal.SIGTERM)
            assert engine.wait(120) == 0, log_path.read_text()

    commit_empty_spec("empty.md")
    first, second = home / "first.log", home / "second.log"
    run_until(first, "spec specs/empty.md skipped: ")
    commit_empty_spec("other.md")
    run_until(second, "spec specs/other.md skipped: ")
    assert first.read_text().count("spec specs/empty.md skipped") == 1, first.read_text()
    assert "specs/empty.md" not in second.read_text(), second.read_text()

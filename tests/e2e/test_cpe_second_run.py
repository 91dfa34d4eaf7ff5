"""A second `cpe run` on a repository a first one is running on: typed in another terminal by
mistake. It is refused (exit 65, naming the first's pid) before it touches anything: the first
engine's pipeline goes on, its journal is not set aside, no attempt is charged, and the work
finishes as if nothing had happened. The real `claude` CLI, the scripted model, a pipeline the
test holds open."""

from __future__ import annotations

import contextlib
import fcntl
import os
import signal
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from actors.journal import Journal
from adapters.scripted_model import Match, ScriptedModelServer, load_scenario
from tests.e2e.running import add_work_item, make_cpe_repo, start_cpe, wait_for, work_items

# The pipeline: says it runs (its pid), then blocks on the test's lock of the gate file until
# the test lets go of it, then passes.
HELD = (
    "import fcntl, os, pathlib, sys\n"
    "started, gate = pathlib.Path(sys.argv[1]), sys.argv[2]\n"
    "started.write_text(str(os.getpid()))\n"
    "fcntl.flock(os.open(gate, os.O_RDONLY), fcntl.LOCK_SH)\n"
)


def _attempts(repo: Path) -> dict[str, int]:
    journal = Journal(repo / ".cpe" / "journal.sqlite3")
    try:
        return dict(journal.replay().attempts)
    finally:
        journal.close()


@pytest.mark.parametrize("args", [(), ("--new-journal",)], ids=["plain", "new-journal"])
def test_a_second_cpe_run_is_refused_before_it_touches_the_first_ones_state(
    tmp_path: Path, processes: list[subprocess.Popen[str]], args: tuple[str, ...]
) -> None:
    held, started, gate = tmp_path / "held.py", tmp_path / "started", tmp_path / "gate"
    held.write_text(HELD)
    gate_lock = os.open(gate, os.O_CREAT | os.O_RDWR)
    fcntl.flock(gate_lock, fcntl.LOCK_EX)  # every pipeline run waits until it is let go
    pipeline = f'pipeline_command = ["{sys.executable}", "{held}", "{started}", "{gate}"]'
    repo = make_cpe_repo(tmp_path / "repo")
    config = repo / "supervisor.toml"
    config.write_text(config.read_text().replace("pipeline_command = []", pipeline))
    add_work_item(repo, "Greeting", "Add greet(name) with a test.")
    journal = repo / ".cpe" / "journal.sqlite3"
    home = tmp_path / "home"
    home.mkdir()
    book = [load_scenario("implement"), load_scenario("approve", match=Match(role="reviewer"))]
    with contextlib.ExitStack() as stack:
        # Let go of the gate whatever happens: a failed test leaves no pipeline waiting.
        stack.callback(lambda: fcntl.flock(gate_lock, fcntl.LOCK_UN))
        server = stack.enter_context(ScriptedModelServer(book))
        log = stack.enter_context((home / "first.log").open("a"))
        first = start_cpe(repo, home, log, server.client_env())
        processes.append(first)
        # A pipeline of the first engine's is running (the default branch's or the revision's).
        assert wait_for(lambda: started.exists() and started.read_text().strip() != "", 240), (
            home / "first.log"
        ).read_text()[-3000:]
        pipeline_pid = int(started.read_text())
        journal_inode = os.stat(journal).st_ino

        second = subprocess.run(
            [str(first.args[0]), "run", "--repo", str(repo), *args],
            cwd=home,
            env={"PATH": os.environ["PATH"], "HOME": str(home), "LANG": "C.UTF-8",
                 **server.client_env()},
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )  # fmt: skip
        said = second.stdout + second.stderr
        assert second.returncode == 65, said
        assert f"in use by another cpe (pid {first.pid})" in said
        assert "killing a pipeline" not in said
        assert "set aside" not in said
        assert psutil.pid_exists(pipeline_pid), "the first engine's pipeline was killed"
        assert os.stat(journal).st_ino == journal_inode, "the journal was set aside"

        fcntl.flock(gate_lock, fcntl.LOCK_UN)  # the pipelines go on
        done = wait_for(lambda: [i.status for i in work_items(repo)] == ["done"], 240)
        first.send_signal(signal.SIGTERM)
        assert first.wait(120) == 0
        assert done, (home / "first.log").read_text()[-3000:]
    os.close(gate_lock)
    assert _attempts(repo) == {"1": 1}  # the one run, and nothing charged for the second cpe

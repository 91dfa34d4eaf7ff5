"""`cpe run` with the sandbox around its agents' commands: a kill -9 while a sandboxed command
runs (one that even left the agent's process group), then a restart. The reaper's kill of the
run's group ends the sandbox, and everything in it, and the restart sweeps its private files."""

from __future__ import annotations

import contextlib
import json
import signal
import subprocess
from pathlib import Path

import psutil

from adapters.scripted_model import Match, Scenario, ScriptedModelServer, load_scenario
from tests.e2e.running import add_work_item, make_cpe_repo, start_cpe, wait_for, work_items

# The killed run: a command in the background (one process of it in a session of its own), then
# its model never answers again.
SLEEPERS = "touch started && (setsid sleep 3600 &) && exec sleep 3601"
BACKGROUND_THEN_HANG = Scenario.model_validate(
    {
        "name": "background_then_hang",
        "match": {"role": "implementor"},
        "turns": [
            [
                {
                    "tool": "Bash",
                    "input": {
                        "command": SLEEPERS,
                        "description": "Start the watchers",
                        "run_in_background": True,
                    },
                }
            ],
            [{"hang": True}],
        ],
    }
)


def sleepers() -> list[psutil.Process]:
    found = []
    for process in psutil.process_iter(["cmdline"]):
        if (process.info.get("cmdline") or [])[:2] in (["sleep", "3600"], ["sleep", "3601"]):
            found.append(process)
    return found


def test_kill_9_during_a_sandboxed_command_then_restart_leaves_nothing_of_it(
    tmp_path: Path, processes: list[subprocess.Popen[str]]
) -> None:
    repo = make_cpe_repo(tmp_path / "repo")
    add_work_item(repo, "Greeting", "Add greet(name) with a test.")
    home = tmp_path / "home"
    home.mkdir()
    with contextlib.ExitStack() as stack:
        log = stack.enter_context((home / "cpe.log").open("a"))
        with ScriptedModelServer([BACKGROUND_THEN_HANG]) as first:
            cpe = start_cpe(repo, home, log, first.client_env())
            processes.append(cpe)
            assert first.wait_until(lambda s: s.hanging >= 1, timeout=120), "no run started"
            assert wait_for(lambda: len(sleepers()) == 2, 120), "the command did not start"
            left = sleepers()
            [run] = (repo / ".cpe" / "runs").glob("implementor-*")
            meta = json.loads((run / "runner_metadata.json").read_text())
            assert meta["effective_policy"]["os_sandbox"]["kind"] == "bubblewrap"
            assert (repo / ".cpe" / "sandbox" / run.name / "tmp").is_dir()
            cpe.send_signal(signal.SIGKILL)
            cpe.wait(30)
            assert all(p.is_running() for p in left)  # a kill -9 leaves them running

        book = [load_scenario("implement"), load_scenario("approve", match=Match(role="reviewer"))]
        with ScriptedModelServer(book) as second:
            restarted = start_cpe(repo, home, log, second.client_env())
            processes.append(restarted)
            done = wait_for(lambda: [i.status for i in work_items(repo)] == ["done"])
            restarted.send_signal(signal.SIGTERM)
            assert restarted.wait(120) == 0
    assert done, "the work item did not complete after the restart"
    _, alive = psutil.wait_procs(left, timeout=60)
    assert alive == [], "a process of the killed run's sandbox survived the restart"
    assert not (repo / ".cpe" / "sandbox" / run.name).exists()

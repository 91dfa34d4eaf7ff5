"""`cpe run` on a repository whose tests fail on the default branch already (the package is not
installed, collection fails): the pipeline runs on the default branch first, the log and
`cpe status` say it is red, and a revision failing the same check is reviewed instead of being
sent back, with no attempt spent on it, and is not merged automatically. The real `claude` CLI,
the scripted model."""

from __future__ import annotations

import contextlib
import signal
import subprocess
from pathlib import Path

from actors.journal import Journal
from adapters.scripted_model import Match, ScriptedModelServer, load_scenario
from tests.adapters.cli.test_cli import cpe
from tests.e2e.running import (
    add_work_item,
    make_cpe_repo,
    revisions,
    start_cpe,
    wait_for,
    work_items,
)
from tests.support.git import git_raw

RED = (
    'pipeline_command = ["python3", "-c", '
    "\"import sys; print('E   ModuleNotFoundError: No module named greeting'); sys.exit(2)\"]"
)


def test_a_red_default_branch_is_reported_and_not_charged_to_the_implementor(
    tmp_path: Path, processes: list[subprocess.Popen[str]]
) -> None:
    repo = make_cpe_repo(tmp_path / "repo")
    config = repo / "supervisor.toml"
    config.write_text(config.read_text().replace("pipeline_command = []", RED))
    git_raw(repo, "commit", "-qam", "a pipeline that fails everywhere")
    add_work_item(repo, "Greeting", "Add greet(name) with a test.")
    home = tmp_path / "home"
    home.mkdir()
    book = [load_scenario("implement"), load_scenario("approve", match=Match(role="reviewer"))]
    status = ""

    def approved() -> bool:
        nonlocal status
        status = cpe("status", cwd=repo).stdout
        return [i.status for i in work_items(repo)] == ["approved"]

    with contextlib.ExitStack() as stack:
        server = stack.enter_context(ScriptedModelServer(book))
        log = stack.enter_context((home / "cpe.log").open("a"))
        cpe_run = start_cpe(repo, home, log, server.client_env())
        processes.append(cpe_run)
        done = wait_for(approved, 240)
        cpe_run.send_signal(signal.SIGTERM)
        assert cpe_run.wait(120) == 0
    log_text = (home / "cpe.log").read_text()
    assert done, status + log_text[-3000:]
    assert "default branch pipeline: red at" in status
    assert "No module named greeting" in status
    assert "reviewed, not charged to the implementor" in status
    assert '"the default branch\'s pipeline is red"' in log_text
    [revision] = revisions(repo)
    assert (revision.state, revision.pipeline.status) == ("open", "failure")  # not merged
    journal = Journal(repo / ".cpe" / "journal.sqlite3")
    try:
        assert dict(journal.replay().attempts) == {"1": 1}  # the one run that did the work
    finally:
        journal.close()

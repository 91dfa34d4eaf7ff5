"""`cpe run` through a model outage: the model API's port is closed, then it answers again.

Runs that fail because the model API cannot be reached are not the work's fault: they spend no
attempt, and after a few in a row dispatch pauses (with a growing pause and one probe run after
it), saying why in the log and in `cpe status`; once the model answers, the work resumes by
itself. The real `claude` CLI, the scripted model on a port that is first closed."""

from __future__ import annotations

import contextlib
import signal
import socket
import subprocess
from pathlib import Path

from actors.journal import Journal
from adapters.scripted_model import Match, ScriptedModelServer, load_scenario
from tests.adapters.cli.test_cli import cpe
from tests.e2e.running import add_work_item, make_cpe_repo, start_cpe, wait_for, work_items

BREAKER = "[breaker]\nfailures = 2\npause_initial = 2\npause_max = 4\n"


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _attempts(repo: Path) -> dict[str, int]:
    journal = Journal(repo / ".cpe" / "journal.sqlite3")
    try:
        return dict(journal.replay().attempts)
    finally:
        journal.close()


def test_an_unreachable_model_pauses_dispatch_spends_no_attempt_and_work_resumes_by_itself(
    tmp_path: Path, processes: list[subprocess.Popen[str]]
) -> None:
    repo = make_cpe_repo(tmp_path / "repo", extra=BREAKER)
    add_work_item(repo, "Greeting", "Add greet(name) with a test.")
    home = tmp_path / "home"
    home.mkdir()
    port = _free_port()
    model = {
        "ANTHROPIC_BASE_URL": f"http://127.0.0.1:{port}",
        "ANTHROPIC_API_KEY": "scripted-model",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "CLAUDE_CODE_MAX_RETRIES": "0",  # the CLI's own retries would only make this slower
    }
    status = ""

    def paused() -> bool:
        nonlocal status
        status = cpe("status", cwd=repo).stdout
        return "dispatch paused" in status

    with contextlib.ExitStack() as stack:
        log = stack.enter_context((home / "cpe.log").open("a"))
        cpe_run = start_cpe(repo, home, log, model)
        processes.append(cpe_run)
        assert wait_for(paused, 180), (home / "cpe.log").read_text()[-3000:]
        assert "ECONNREFUSED" in status
        assert "no attempt is spent" in status or "probe" in status
        assert _attempts(repo).get("1", 0) == 0  # none of it was the work's fault
        # Waiting for the model, or in the one probe run a short pause lets through under load:
        # never failed, never blocked.
        assert [i.status for i in work_items(repo)] in (["pending"], ["in-progress"])
        log_text = (home / "cpe.log").read_text()
        assert '"dispatch paused"' in log_text
        assert '"failure_class": "infrastructure"' in log_text

        book = [load_scenario("implement"), load_scenario("approve", match=Match(role="reviewer"))]
        server = stack.enter_context(ScriptedModelServer(book, port=port))
        done = wait_for(lambda: [i.status for i in work_items(repo)] == ["done"], 240)
        cpe_run.send_signal(signal.SIGTERM)
        assert cpe_run.wait(120) == 0
        assert done, (home / "cpe.log").read_text()[-3000:]
        assert server.requests, "the model was asked once it answered"
    assert _attempts(repo).get("1", 0) == 1  # the one run that did the work

"""`cpe run` while the model API has a bad day, as the running agents see it.

The real `claude` CLI retries a failing model API by itself (ten tries over about three
minutes) and says so on its stream; cpe reads those retries while the run goes on. A model API
that refuses connections pauses dispatch within seconds and frees the retrying run's slot, no
attempt spent; once it answers again the work resumes by itself. A subscription whose usage
window is spent holds that model account until the window's reset, then the work resumes,
the item's attempts untouched. The scripted model plays the API, with its faults."""

from __future__ import annotations

import contextlib
import signal
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from actors.journal import Journal
from adapters.scripted_model import Fault, Match, Quota, ScriptedModelServer, load_scenario
from domain.events import AgentSignalled
from tests.adapters.cli.test_cli import cpe
from tests.e2e.running import add_work_item, make_cpe_repo, start_cpe, wait_for, work_items

BOOK = [load_scenario("implement"), load_scenario("approve", match=Match(role="reviewer"))]


class Status:
    """``cpe status`` of a repository with one work item, looked at until it says something."""

    def __init__(self, repo: Path) -> None:
        add_work_item(repo, "Greeting", "Add greet(name) with a test.")
        self.repo = repo
        self.text = ""

    def says(self, *texts: str) -> bool:
        self.text = cpe("status", cwd=self.repo).stdout
        return all(text in self.text for text in texts)


def _journal(repo: Path) -> Journal:
    return Journal(repo / ".cpe" / "journal.sqlite3")


def _attempts(repo: Path) -> dict[str, int]:
    journal = _journal(repo)
    try:
        return dict(journal.replay().attempts)
    finally:
        journal.close()


def _signals(repo: Path) -> list[AgentSignalled]:
    journal = _journal(repo)
    try:
        return [e.event for e in journal.entries() if isinstance(e.event, AgentSignalled)]
    finally:
        journal.close()


@pytest.mark.parametrize("runtime", ["claude-sdk", "claude-cli"])
def test_a_model_api_refusing_connections_pauses_dispatch_and_frees_the_retrying_run(
    tmp_path: Path, processes: list[subprocess.Popen[str]], runtime: str
) -> None:
    breaker = "[breaker]\noutage_after = 3\npause_initial = 4\npause_max = 8\n"
    roles = f'[runtime.roles]\nimplementor = "{runtime}"\nreviewer = "{runtime}"\n'
    repo = make_cpe_repo(tmp_path / "repo", extra=breaker + roles)
    home = tmp_path / "home"
    home.mkdir()
    status = Status(repo)

    with contextlib.ExitStack() as stack:
        server = stack.enter_context(ScriptedModelServer(BOOK))
        server.refuse_connections()  # the CLI's own retries are left as they are: ten
        log = stack.enter_context((home / "cpe.log").open("a"))
        cpe_run = start_cpe(repo, home, log, server.client_env())
        processes.append(cpe_run)
        paused = "dispatch paused: the model API is unreachable (no answer"
        assert wait_for(lambda: status.says(paused, "no attempt is spent"), 120), (
            status.text + (home / "cpe.log").read_text()[-3000:]
        )
        assert _attempts(repo).get("1", 0) == 0
        retries = [s for s in _signals(repo) if s.signal.kind == "retrying"]
        assert retries, "the CLI's retries reached cpe while the run went on"
        assert {s.signal.cause for s in retries} == {"unreachable"}
        # The run was cancelled while its CLI still retried: it did not hold its slot until the
        # CLI gave up (ten retries) or the idle limit.
        assert max(s.signal.attempt or 0 for s in retries) < 10
        log_text = (home / "cpe.log").read_text()
        assert "cancelled to free its slot while the model API is down" in log_text
        assert '"dispatch paused"' in log_text

        server.accept_connections()
        done = wait_for(lambda: [i.status for i in work_items(repo)] == ["done"], 300)
        cpe_run.send_signal(signal.SIGTERM)
        assert cpe_run.wait(120) == 0
        assert done, status.text + (home / "cpe.log").read_text()[-3000:]
    assert _attempts(repo) == {"1": 1}  # only the run that did the work


def test_a_spent_usage_window_holds_the_account_until_its_reset_then_work_resumes(
    tmp_path: Path, processes: list[subprocess.Popen[str]]
) -> None:
    repo = make_cpe_repo(tmp_path / "repo", extra="[runtime.quota]\nmargin = 0\n")
    home = tmp_path / "home"
    home.mkdir()
    status = Status(repo)

    with contextlib.ExitStack() as stack:
        server = stack.enter_context(ScriptedModelServer(BOOK))
        reset = (datetime.now(UTC) + timedelta(seconds=40)).replace(microsecond=0)
        server.set_quota(Quota.used(0.3, 0.2))
        server.fail(Fault.usage_limit(reset, window="five_hour", times=1))
        # A subscription login (the claude CLI reads the usage headers only then).
        env = {**server.client_env(), "CLAUDE_CODE_OAUTH_TOKEN": "scripted-oauth-token"}
        log = stack.enter_context((home / "cpe.log").open("a"))
        cpe_run = start_cpe(repo, home, log, env, without=("ANTHROPIC_API_KEY",))
        processes.append(cpe_run)
        held = "dispatch paused for anthropic: rate-limited: 5-hour spent until"
        assert wait_for(lambda: status.says(held, "model accounts"), 120), (
            status.text + (home / "cpe.log").read_text()[-3000:]
        )
        assert _attempts(repo).get("1", 0) == 0
        done = wait_for(lambda: [i.status for i in work_items(repo)] == ["done"], 300)
        cpe_run.send_signal(signal.SIGTERM)
        assert cpe_run.wait(120) == 0
        assert done, status.text + (home / "cpe.log").read_text()[-3000:]
        assert "5-hour" in status.text
    journal = _journal(repo)
    try:
        runs = sorted(journal.replay().agent_runs.values(), key=lambda r: r.requested_at or reset)
    finally:
        journal.close()
    implementors = [run for run in runs if run.role == "implementor"]
    first, *later = implementors
    assert first.failure_class == "infrastructure"
    assert "hit your 5-hour limit" in (first.failure_reason or "")
    assert later, "the work resumed after the reset"
    assert all(run.requested_at is not None and run.requested_at >= reset for run in later)
    assert _attempts(repo) == {"1": 1}

"""The merge queue on GitHub: a real ``cpe run`` with ``[provider] kind = "github"`` against the
fake GitHub (which answers ``mergeable``, ``POST /merges`` and refuses a conflicting merge with
405 as GitHub does), a fake CI running the repository's check on every pull request head, the
real ``claude`` CLI and the scripted model.

Two items implemented at once edit the same line: the first pull request lands; the second
conflicts with the new default branch, goes back to its implementor with the conflicting file
in its prompt at no attempt's cost, and lands after the re-run. The rename pair (one renames a
function, the other calls the old name) passes apart and fails together: the second is tested
on top of the first, sent back with the failing check, and lands fixed. Every commit the
default branch has been at passes the check."""

from __future__ import annotations

import contextlib
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from actors.journal import Journal
from adapters.scripted_model import Match, ScriptedModelServer, load_scenario
from tests.e2e.github_loop import TOKEN, TOKEN_ENV, FakeCI, clone_for_cpe, tracked_files
from tests.e2e.queue_loop import CHECK, OLD, SENT_BACK, implementor, rename_book
from tests.e2e.running import make_cpe_repo, start_cpe, wait_for
from tests.fakes.github import FakeGitHub
from tests.support.git import git, isolate_git

pytestmark = pytest.mark.timeout(900)


SAME_LINE = [
    implementor("1", {"app.py": "GREETING = 'hello, world'\n"}, sent_back=True),
    implementor("2", {"app.py": "GREETING = 'hello, world'\nFRENCH = 'bonjour'\n"}, sent_back=True),
    implementor("1", {"app.py": "GREETING = 'hello, world'\n"}),
    implementor("2", {"app.py": "GREETING = 'bonjour'\n"}),
]


@pytest.fixture
def github(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeGitHub]:
    isolate_git(monkeypatch)
    with FakeGitHub(tmp_path / "github", tokens={TOKEN: "cpe-bot"}) as fake:
        project = make_cpe_repo(tmp_path / "project")
        (project / "supervisor.toml").unlink()
        (project / "check.py").write_text(CHECK)
        (project / "app.py").write_text("GREETING = 'hello'\n")
        (project / "lib.py").write_text(OLD)
        git(project, "add", "-A")
        git(project, "commit", "-qm", "the project and its check")
        fake.seed(tracked_files(project), "the project")
        yield fake


# Each pair: the book of implementors, and what the re-run's prompt must be told.
PAIRS = {"same-line": (SAME_LINE, "app.py"), "rename": (rename_book()[:-1], "failed (unittest)")}


@pytest.mark.parametrize("pair", sorted(PAIRS))
def test_two_items_that_collide_both_land_on_github_the_second_after_a_free_rerun(
    tmp_path: Path, github: FakeGitHub, processes: list[subprocess.Popen[str]], pair: str
) -> None:
    implementors, told = PAIRS[pair]
    start = github.default_head()
    for title in ("First change", "Second change"):
        github.add_issue(title, f"{title}.", user="cpe-bot")
    repo = clone_for_cpe(github, tmp_path)
    book = [*implementors, load_scenario("approve", match=Match(role="reviewer"))]
    home = tmp_path / "home"
    home.mkdir()

    def landed() -> bool:
        with github.lock:
            pulls = list(github.pulls.values())
        return len(pulls) == 2 and all(p.merged for p in pulls)

    def both_implemented() -> bool:
        # No pull request is checked, so none lands, before both first runs asked the model:
        # the two runs overlap, as the pair needs, however the machine schedules them.
        played = {r.scenario for r in server.requests}
        return {"implement-1", "implement-2"} <= played

    with contextlib.ExitStack() as stack:
        server = stack.enter_context(ScriptedModelServer(book))
        check = [sys.executable, "-B", "check.py"]
        stack.enter_context(FakeCI(github, check, start_when=both_implemented))
        log = stack.enter_context((home / "cpe.log").open("a"))
        cpe_run = start_cpe(repo, home, log, {**server.client_env(), TOKEN_ENV: TOKEN})
        processes.append(cpe_run)
        done = wait_for(landed, 400)
        cpe_run.send_signal(signal.SIGTERM)
        assert cpe_run.wait(120) == 0
    said = (home / "cpe.log").read_text()[-5000:]
    assert done, said
    with github.lock:
        issues = {i.number: i.state for i in github.issues.values() if not i.is_pull}
    assert issues == {1: "closed", 2: "closed"}, said
    again = [
        r.conversation.prompt
        for r in server.requests
        if r.scenario in ("implement-1-again", "implement-2-again") and r.conversation
    ]
    assert again, said  # the one landing second was sent back
    assert SENT_BACK in again[0]
    assert told in again[0]
    journal = Journal(repo / ".cpe" / "journal.sqlite3")
    try:
        assert dict(journal.replay().attempts) == {"1": 1, "2": 1}
    finally:
        journal.close()
    # Every commit the default branch has been at since passes the check.
    final = tmp_path / "final"
    git(tmp_path, "clone", "--quiet", str(github.git.path), str(final))
    commits = git(final, "rev-list", "--first-parent", f"{start}..HEAD").split()
    assert len(commits) == 2
    for commit in commits:
        git(final, "checkout", "--quiet", commit)
        result = subprocess.run(
            [sys.executable, "-B", "check.py"], cwd=final, capture_output=True, check=False
        )
        assert result.returncode == 0, (commit, result.stderr)
    assert "<<<<<<<" not in (final / "app.py").read_text()

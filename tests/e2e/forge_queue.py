"""The merge queue on a forge's fake (``test_github_merge_queue.py``,
``test_gitlab_merge_queue.py``): two items implemented at once that collide, landed through
the queue by a real ``cpe run``, the forge's CI running the repository's check on every head.

Two pairs: *same-line* (both edit one line: the second conflicts with the new default branch,
goes back to its implementor with the conflicting file in its prompt at no attempt's cost, and
lands after the re-run) and *rename* (``queue_loop.py``: they pass apart and fail together; the
second is tested on top of the first, sent back with the failing check, and lands fixed).
Every commit the default branch has been at passes the check."""

from __future__ import annotations

import contextlib
import signal
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from actors.journal import Journal
from adapters.scripted_model import Match, ScriptedModelServer, load_scenario
from tests.e2e.crash import Crash
from tests.e2e.forge_loop import CommitCI, tracked_files
from tests.e2e.queue_loop import CHECK, OLD, SENT_BACK, implementor, rename_book
from tests.e2e.running import make_cpe_repo, start_cpe, wait_for
from tests.support.git import git

SAME_LINE = [
    implementor("1", {"app.py": "GREETING = 'hello, world'\n"}, sent_back=True),
    implementor("2", {"app.py": "GREETING = 'hello, world'\nFRENCH = 'bonjour'\n"}, sent_back=True),
    implementor("1", {"app.py": "GREETING = 'hello, world'\n"}),
    implementor("2", {"app.py": "GREETING = 'bonjour'\n"}),
]
# Each pair: the book of implementors, and what the re-run's prompt must be told.
PAIRS = {"same-line": (SAME_LINE, "app.py"), "rename": (rename_book()[:-1], "failed (unittest)")}
TITLES = ("First change", "Second change")


def project_files(scratch: Path) -> dict[str, bytes]:
    """What the forge's repository holds: a cpe project, its check, the app and the library."""
    project = make_cpe_repo(scratch / "project")
    (project / "supervisor.toml").unlink()
    (project / "check.py").write_text(CHECK)
    (project / "app.py").write_text("GREETING = 'hello'\n")
    (project / "lib.py").write_text(OLD)
    git(project, "add", "-A")
    git(project, "commit", "-qm", "the project and its check")
    return tracked_files(project)


@dataclass(frozen=True)
class QueueForge:
    """What the pair needs of a forge's fake: the clone cpe works in (its ``supervisor.toml``
    naming the forge) and the environment its token is in; the fake's bare repository and
    default branch's head; whether both revisions landed; the items' states (number ->
    closed or not); and the forge's CI for a check command, starting when a condition holds."""

    repo: Path
    env: Mapping[str, str]
    git_dir: Path
    default_head: Callable[[], str]
    landed: Callable[[], bool]
    items_closed: Callable[[], dict[int, bool]]
    ci: Callable[[Sequence[str], Callable[[], bool]], CommitCI]


def land_the_colliding_pair(
    base: Path,
    forge: QueueForge,
    pair: str,
    processes: list[subprocess.Popen[str]],
    *,
    crash: Crash | None = None,
    trace: Path | None = None,
) -> None:
    """Runs the ``pair`` through the queue to both landings, and checks what must hold. With
    ``crash``, ``cpe run`` is first killed there (it must get there), then restarted on the
    same state; with ``trace``, the crashpoints passed are written to it."""
    implementors, told = PAIRS[pair]
    start = forge.default_head()
    book = [*implementors, load_scenario("approve", match=Match(role="reviewer"))]
    home = base / "home"
    home.mkdir()
    check = [sys.executable, "-B", "check.py"]

    def both_implemented() -> bool:
        # No revision is checked, so none lands, before both first runs asked the model: the
        # two runs overlap, as the pair needs, however the machine schedules them.
        played = {r.scenario for r in server.requests}
        return {"implement-1", "implement-2"} <= played

    with contextlib.ExitStack() as stack:
        server = stack.enter_context(ScriptedModelServer(book))
        stack.enter_context(forge.ci(check, both_implemented))
        log = stack.enter_context((home / "cpe.log").open("a"))
        env = {**server.client_env(), **forge.env}
        if trace is not None:
            env["CPE_CRASH_TRACE"] = str(trace)
        if crash is not None:
            killed = start_cpe(forge.repo, home, log, {**env, "CPE_CRASH_AT": str(crash)})
            processes.append(killed)
            wait_for(lambda: killed.poll() is not None or forge.landed(), 400)
            assert killed.poll() == -signal.SIGKILL, f"{crash} was not reached"
        cpe_run = start_cpe(forge.repo, home, log, env)
        processes.append(cpe_run)
        done = wait_for(forge.landed, 400)
        cpe_run.send_signal(signal.SIGTERM)
        assert cpe_run.wait(120) == 0
    said = (home / "cpe.log").read_text()[-5000:]
    assert done, said
    assert forge.items_closed() == {1: True, 2: True}, said
    again = [
        r.conversation.prompt
        for r in server.requests
        if r.scenario in ("implement-1-again", "implement-2-again") and r.conversation
    ]
    assert again, said  # the one landing second was sent back
    assert SENT_BACK in again[0]
    assert told in again[0]
    journal = Journal(forge.repo / ".cpe" / "journal.sqlite3")
    try:
        assert dict(journal.replay().attempts) == {"1": 1, "2": 1}
        assert journal.intents("pending") == []
    finally:
        journal.close()
    # Every commit the default branch has been at since passes the check.
    final = base / "final"
    git(base, "clone", "--quiet", str(forge.git_dir), str(final))
    commits = git(final, "rev-list", "--first-parent", f"{start}..HEAD").split()
    assert len(commits) == 2
    for commit in commits:
        git(final, "checkout", "--quiet", commit)
        result = subprocess.run(check, cwd=final, capture_output=True, check=False)
        assert result.returncode == 0, (commit, result.stderr)
    assert "<<<<<<<" not in (final / "app.py").read_text()

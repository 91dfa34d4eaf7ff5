"""The local pipeline: a real command on a revision's head in a throwaway worktree, and the
provider's runner thread that keeps ``list_revisions`` reporting it without ever waiting for it.

Commands that must stay running while the test looks at them connect to a ``Gate`` (a loopback
socket): the test learns the command started by accepting, and ends it by sending a byte, so no
test sleeps or guesses how long a run takes.
"""

from __future__ import annotations

import os
import select
import shutil
import socket
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from adapters.providers.git import GitRepo
from adapters.providers.local import LocalPipeline, LocalProvider
from adapters.providers.local.pipeline import PID_FILE, remove_workdir
from adapters.providers.local.provider import DATABASE_NAME
from adapters.runtime.process.launcher import stamp_pid
from adapters.runtime.workspace.worktrees import WorktreeManager
from domain.errors import ConfigError
from domain.models import Revision
from tests.support.git import Repo, isolate_git, make_patch

WAIT = 60.0  # generous: a loaded 2-core machine is slow, never this slow

TESTS = "from app import answer\n\n\ndef test_answer():\n    assert answer() == 42\n"
FILES = {"app.py": "def answer():\n    return 42\n", "test_app.py": TESTS}

GATE_SCRIPT = """
import os, socket, subprocess, sys
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
conn = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
conn.sendall(f"{os.getcwd()}\\n{child.pid}\\n".encode())
answer = conn.recv(1)
sys.exit(0 if answer == b"0" else 1)
"""


class Gate:
    """A command that reports its cwd and a child's pid, then waits for the test's verdict."""

    def __init__(self) -> None:
        self._server = socket.create_server(("127.0.0.1", 0))
        self._server.settimeout(WAIT)
        self._accepted: list[socket.socket] = []
        self.command = [sys.executable, "-c", GATE_SCRIPT, str(self._server.getsockname()[1])]

    def started(self) -> tuple[socket.socket, Path, int]:
        """Wait for the command to connect: its connection, working directory and child pid."""
        conn, _ = self._server.accept()
        self._accepted.append(conn)
        conn.settimeout(WAIT)
        with conn.makefile("r") as reader:
            cwd, pid = reader.readline().strip(), int(reader.readline())
        return conn, Path(cwd), pid

    def close(self) -> None:
        for conn in self._accepted:
            conn.close()
        self._server.close()


@pytest.fixture
def gate() -> Iterator[Gate]:
    opened = Gate()
    yield opened
    opened.close()


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Repo:
    isolate_git(monkeypatch)
    return Repo.create(tmp_path / "repo", FILES)


def dies(pid: int) -> bool:
    """Wait (on a pidfd, no polling) until ``pid`` has exited; False if it outlives ``WAIT``."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    try:
        readable, _, _ = select.select([fd], [], [], WAIT)
    finally:
        os.close(fd)
    return bool(readable)


def worktrees(repo: Repo) -> list[str]:
    listing = repo.git("worktree", "list", "--porcelain").splitlines()
    return [line for line in listing if line.startswith("worktree ")]


# ------------------------------------------------------------------ LocalPipeline.run


def test_passing_command_succeeds_on_the_commit_in_a_removed_worktree(
    repo: Repo, tmp_path: Path
) -> None:
    pipeline = LocalPipeline([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"], WAIT)
    result = pipeline.run(GitRepo(repo.root), repo.head(), log_path=tmp_path / "run.log")
    assert result.status == "success", result.reason
    assert "1 passed" in result.reason
    assert worktrees(repo) == [f"worktree {repo.root}"]
    assert repo.git("status", "--porcelain", "--untracked-files=all") == ""


def test_failing_command_reports_the_tail_of_its_log(repo: Repo, tmp_path: Path) -> None:
    script = "for i in range(100): print(f'line {i:03}')\nraise SystemExit(3)"
    result = LocalPipeline([sys.executable, "-c", script], WAIT, excerpt_lines=10).run(
        GitRepo(repo.root), repo.head(), log_path=tmp_path / "run.log"
    )
    assert result.status == "failure"
    assert "exited with status 3" in result.reason
    assert "line 099" in result.reason
    assert "line 090" in result.reason
    assert "line 089" not in result.reason
    assert "line 000" in (tmp_path / "run.log").read_text()  # the whole log is kept


def test_shell_command_string_runs_through_the_shell(repo: Repo, tmp_path: Path) -> None:
    result = LocalPipeline("test -f app.py && echo found-it", WAIT).run(
        GitRepo(repo.root), repo.head(), log_path=tmp_path / "run.log"
    )
    assert (result.status, result.reason) == ("success", "found-it")


def test_command_runs_outside_the_checkout_without_the_daemons_secrets(
    repo: Repo, tmp_path: Path, gate: Gate, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CPE_TEST_SECRET_TOKEN", "hunter2")
    script = "import os; print(sorted(k for k in os.environ if 'SECRET' in k), os.environ['CI'])"
    result = LocalPipeline([sys.executable, "-c", script], WAIT).run(
        GitRepo(repo.root), repo.head(), log_path=tmp_path / "run.log"
    )
    assert result.reason == "[] true"
    with ThreadPoolExecutor(1) as pool:
        running = pool.submit(
            LocalPipeline(gate.command, WAIT).run,
            GitRepo(repo.root),
            repo.head(),
            log_path=tmp_path / "gate.log",
        )
        conn, cwd, _ = gate.started()
        assert not cwd.is_relative_to(repo.root)
        assert Repo(cwd).head() == repo.head()
        conn.sendall(b"0")
        assert running.result(timeout=WAIT).status == "success"
    assert not cwd.exists()


def test_timeout_kills_the_whole_process_tree(repo: Repo, tmp_path: Path, gate: Gate) -> None:
    pipeline = LocalPipeline(gate.command, timeout=5, kill_grace=WAIT)
    with ThreadPoolExecutor(1) as pool:
        running = pool.submit(
            pipeline.run, GitRepo(repo.root), repo.head(), log_path=tmp_path / "run.log"
        )
        conn, cwd, child = gate.started()  # then never answer
        result = running.result(timeout=WAIT)
    assert result.status == "failure"
    assert "timed out after 5s" in result.reason
    assert conn.recv(1) == b""  # the command is dead
    assert dies(child)
    assert not cwd.exists()


def test_cancel_stops_a_run(repo: Repo, tmp_path: Path, gate: Gate) -> None:
    cancel = threading.Event()
    with ThreadPoolExecutor(1) as pool:
        running = pool.submit(
            LocalPipeline(gate.command, WAIT).run,
            GitRepo(repo.root),
            repo.head(),
            log_path=tmp_path / "run.log",
            cancel=cancel,
        )
        conn, _, child = gate.started()
        cancel.set()
        assert running.result(timeout=WAIT).status == "cancelled"
    assert conn.recv(1) == b""
    assert dies(child)


def test_checkouts_never_fail_while_the_worktree_reaper_prunes_beside_them(
    repo: Repo, tmp_path: Path
) -> None:
    """A ``git worktree prune`` in the middle of a ``worktree add`` deletes the record the add
    is writing, and the add fails: the startup reaper's prunes did that to a revision's run. The
    pipeline and the reaper take one lock per repository, so none of these checkouts fails."""
    manager = WorktreeManager(repo.root, "main")
    pipeline = LocalPipeline(["true"], WAIT)
    stop = threading.Event()

    def reap() -> int:
        rounds = 0
        while not stop.is_set():
            manager.reap()
            rounds += 1
        return rounds

    with ThreadPoolExecutor(1) as pool:
        reaping = pool.submit(reap)
        try:
            results = [
                pipeline.run(GitRepo(repo.root), repo.head(), log_path=tmp_path / f"{n}.log")
                for n in range(40)
            ]
        finally:
            stop.set()
        assert reaping.result(timeout=WAIT) > 0
    assert [r.reason for r in results if r.status != "success"] == []
    assert worktrees(repo) == [f"worktree {repo.root}"]


FAIL_ONCE_GIT = """#!/bin/sh
# git, except that the first 'worktree add' fails as a prune from another process makes it fail
if [ "$3" = worktree ] && [ "$4" = add ] && [ ! -e "{marker}" ]; then
    : > "{marker}"
    echo "fatal: could not create directory of '.git/worktrees/checkout'" >&2
    exit 128
fi
exec {git} "$@"
"""


def test_a_checkout_another_process_broke_is_tried_again(
    repo: Repo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No lock holds back another process's prune (``git gc`` runs one): a failed checkout is
    tried again after a moment, and the run goes on."""
    real_git = shutil.which("git")
    assert real_git is not None
    wrapper = tmp_path / "bin"
    wrapper.mkdir()
    marker = tmp_path / "failed-once"
    (wrapper / "git").write_text(FAIL_ONCE_GIT.format(marker=marker, git=real_git))
    (wrapper / "git").chmod(0o755)
    monkeypatch.setenv("PATH", f"{wrapper}{os.pathsep}{os.environ['PATH']}")
    result = LocalPipeline(["true"], WAIT).run(
        GitRepo(repo.root), repo.head(), log_path=tmp_path / "run.log"
    )
    assert marker.exists()  # the first try did fail
    assert result.status == "success", result.reason
    assert worktrees(repo) == [f"worktree {repo.root}"]


def test_a_checkout_that_keeps_failing_is_the_runs_failure_naming_why(
    repo: Repo, tmp_path: Path
) -> None:
    result = LocalPipeline(["true"], WAIT).run(
        GitRepo(repo.root), "0" * 40, log_path=tmp_path / "run.log"
    )
    assert result.status == "failure"
    assert result.reason.startswith("could not check out 000000000000: git worktree failed")
    assert "git worktree failed" in (tmp_path / "run.log").read_text()


def test_an_empty_command_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match=r"pipeline\.command"):
        LocalPipeline("  ", 10)


# ------------------------------------------------------------------ the provider's runner


class Revisions:
    def __init__(self, repo: Repo, provider: LocalProvider, tmp_path: Path) -> None:
        self.repo, self.provider, self.tmp_path = repo, provider, tmp_path
        self.count = 0

    def create(self, answer: int, branch: str = "cpe/1-answer") -> Revision:
        item = self.provider.work_item_writer.create_work_item("Answer", "B")
        return self.provider.revision_writer.create_from_patch(
            item, branch, "Answer", "", self.patch(answer)
        )

    def patch(self, answer: int) -> str:
        self.count += 1
        return make_patch(
            self.repo.root,
            self.tmp_path / f"p{self.count}",
            # The comment makes every patch a change, even one that keeps the answer.
            lambda r: r.write(
                "app.py", f"def answer():  # patch {self.count}\n    return {answer}\n"
            ),
        )

    def listed(self) -> Revision:
        [revision] = self.provider.revision_reader.list_revisions()
        return revision


def pytest_pipeline() -> LocalPipeline:
    return LocalPipeline([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"], WAIT)


def test_without_a_pipeline_revisions_report_none(repo: Repo, tmp_path: Path) -> None:
    with LocalProvider(repo.root, tmp_path / "state") as provider:
        Revisions(repo, provider, tmp_path).create(42)
        assert provider.revision_reader.list_revisions()[0].pipeline.status == "none"


def test_new_heads_are_tested_and_reported_with_their_log(repo: Repo, tmp_path: Path) -> None:
    with LocalProvider(repo.root, tmp_path / "state", pipeline=pytest_pipeline()) as provider:
        revisions = Revisions(repo, provider, tmp_path)
        revision = revisions.create(42)
        assert provider.wait_for_pipelines(WAIT)
        passed = revisions.listed().pipeline
        assert passed.status == "success"
        assert "1 passed" in (passed.reason or "")
        provider.revision_writer.update_from_patch(revision.id, revisions.patch(7))
        assert provider.wait_for_pipelines(WAIT)
        failed = revisions.listed().pipeline
    assert failed.status == "failure"
    assert "1 failed" in (failed.reason or "")
    assert "assert 7 == 42" in (failed.reason or "")
    assert failed.url is not None
    assert failed.url.startswith("file://")
    assert "assert 7 == 42" in Path(failed.url.removeprefix("file://")).read_text()


def test_listing_never_waits_for_a_run(repo: Repo, tmp_path: Path, gate: Gate) -> None:
    pipeline = LocalPipeline(gate.command, WAIT)
    with LocalProvider(repo.root, tmp_path / "state", pipeline=pipeline) as provider:
        revisions = Revisions(repo, provider, tmp_path)
        revisions.create(42)
        conn, _, _ = gate.started()
        with ThreadPoolExecutor(1) as pool:
            listed = pool.submit(revisions.listed).result(timeout=WAIT)
        assert listed.pipeline.status == "pending"
        conn.sendall(b"0")
        assert provider.wait_for_pipelines(WAIT)
        assert revisions.listed().pipeline.status == "success"


def test_a_newer_head_cancels_the_run_of_the_old_one(
    repo: Repo, tmp_path: Path, gate: Gate
) -> None:
    with LocalProvider(
        repo.root, tmp_path / "state", pipeline=LocalPipeline(gate.command, WAIT)
    ) as provider:
        revisions = Revisions(repo, provider, tmp_path)
        revision = revisions.create(42)
        old_run, _, _ = gate.started()
        updated = provider.revision_writer.update_from_patch(revision.id, revisions.patch(43))
        assert old_run.recv(1) == b""  # killed
        new_run, _, _ = gate.started()
        new_run.sendall(b"0")
        assert provider.wait_for_pipelines(WAIT)
        listed = revisions.listed()
    assert listed.head_sha == updated.head_sha
    assert listed.pipeline.status == "success"


def test_the_head_the_merge_queue_tests_runs_before_revisions_queued_earlier(
    repo: Repo, tmp_path: Path, gate: Gate
) -> None:
    """Trial of issue 39: 200 items made revisions faster than the pipeline ran them, and the
    merge queue's head waited behind every one of them (12 minutes, 90 approved items, nothing
    landed). The queue's run goes first; the others keep their order."""
    with LocalProvider(
        repo.root, tmp_path / "state", pipeline=LocalPipeline(gate.command, WAIT)
    ) as provider:
        writer = provider.revision_writer
        assert writer is not None
        revisions = Revisions(repo, provider, tmp_path)
        revisions.create(42, "cpe/1-busy")
        busy, _, _ = gate.started()  # the runner is busy: what follows is queued
        landing = revisions.create(42, "cpe/2-lands")
        earlier = revisions.create(42, "cpe/3-earlier")
        later = revisions.create(42, "cpe/4-later")
        repo.commit("main moves on", {"NOTES.md": "moved\n"})
        tested = writer.update_branch(landing.id).revision.head_sha  # queued last
        assert tested != landing.head_sha
        busy.sendall(b"0")
        order = []
        for _ in range(3):
            conn, cwd, _ = gate.started()
            order.append(Repo(cwd).head())
            conn.sendall(b"0")
        assert provider.wait_for_pipelines(WAIT)
    assert order == [tested, earlier.head_sha, later.head_sha]


def test_the_merge_queues_run_still_goes_first_after_a_restart(
    repo: Repo, tmp_path: Path, gate: Gate
) -> None:
    state = tmp_path / "state"
    with LocalProvider(repo.root, state, pipeline=LocalPipeline(gate.command, WAIT)) as provider:
        writer = provider.revision_writer
        assert writer is not None
        revisions = Revisions(repo, provider, tmp_path)
        busy = revisions.create(42, "cpe/1-busy")
        gate.started()  # cancelled by the stop, run again at the next start
        landing = revisions.create(42, "cpe/2-lands")
        earlier = revisions.create(42, "cpe/3-earlier")
        repo.commit("main moves on", {"NOTES.md": "moved\n"})
        tested = writer.update_branch(landing.id).revision.head_sha
    with LocalProvider(repo.root, state, pipeline=LocalPipeline(gate.command, WAIT)) as provider:
        order = []
        for _ in range(3):
            conn, cwd, _ = gate.started()
            order.append(Repo(cwd).head())
            conn.sendall(b"0")
        assert provider.wait_for_pipelines(WAIT)
    assert order == [tested, busy.head_sha, earlier.head_sha]


@pytest.mark.parametrize("earlier", [False, True])
def test_a_runs_own_leftovers_are_killed_without_blaming_an_earlier_run(
    repo: Repo, tmp_path: Path, earlier: bool
) -> None:
    """Trial of issue 39: each stop of cpe during a pipeline run warned "killing a pipeline an
    earlier run left" about the run it had just cancelled (its group, SIGKILLed a moment
    before, not all gone yet). Only what an earlier cpe left is warned about."""
    workdir = tmp_path / "workdir"
    workdir.mkdir()
    sleeper = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(600)"], start_new_session=True
    )
    try:
        stamp_pid(workdir / PID_FILE, sleeper.pid)
        with capture_logs() as logged:
            remove_workdir(GitRepo(repo.root), workdir, earlier=earlier)
        assert sleeper.wait(timeout=WAIT) is not None  # killed either way
    finally:
        sleeper.kill()
        sleeper.wait()
    warned = [e for e in logged if e["event"] == "killing a pipeline an earlier run left"]
    assert len(warned) == (1 if earlier else 0)
    assert not workdir.exists()


def test_close_cancels_a_run_and_the_next_start_runs_it_again(
    repo: Repo, tmp_path: Path, gate: Gate
) -> None:
    state = tmp_path / "state"
    with LocalProvider(repo.root, state, pipeline=LocalPipeline(gate.command, WAIT)) as provider:
        Revisions(repo, provider, tmp_path).create(42)
        first, cwd, _ = gate.started()
    assert first.recv(1) == b""
    assert not cwd.exists()
    with LocalProvider(repo.root, state, pipeline=LocalPipeline(gate.command, WAIT)) as provider:
        again, _, _ = gate.started()
        again.sendall(b"0")
        assert provider.wait_for_pipelines(WAIT)
        assert provider.revision_reader.list_revisions()[0].pipeline.status == "success"


FLAKY = """
import pathlib, sys
runs = pathlib.Path(sys.argv[1])
runs.write_text(runs.read_text() + "run\\n" if runs.exists() else "run\\n")
sys.exit(1 if runs.read_text().count("run") == 1 else 0)  # only the first run fails
"""


def test_an_update_that_leaves_a_red_head_as_it_was_runs_its_pipeline_again(
    repo: Repo, tmp_path: Path
) -> None:
    """Asked to fix a red run, the implementor changed nothing: the failure may not be the
    code's (a flaky test, a checkout that failed), so the same head is tested again instead
    of going straight back to the implementor red."""
    runs = tmp_path / "runs"
    pipeline = LocalPipeline([sys.executable, "-c", FLAKY, str(runs)], WAIT)
    with LocalProvider(repo.root, tmp_path / "state", pipeline=pipeline) as provider:
        revisions = Revisions(repo, provider, tmp_path)
        item = provider.work_item_writer.create_work_item("Answer", "B")
        patch = revisions.patch(42)
        revision = provider.revision_writer.create_from_patch(item, "cpe/1-a", "A", "", patch)
        assert provider.wait_for_pipelines(WAIT)
        assert revisions.listed().pipeline.status == "failure"
        updated = provider.revision_writer.update_from_patch(revision.id, patch)
        assert updated.head_sha == revision.head_sha
        assert updated.pipeline.status == "pending"  # as the writer answers: not red again
        assert provider.wait_for_pipelines(WAIT)
        assert revisions.listed().pipeline.status == "success"
        # A green head is not run again by an update that leaves it as it was
        provider.revision_writer.update_from_patch(revision.id, patch)
        assert provider.wait_for_pipelines(WAIT)
        assert revisions.listed().pipeline.status == "success"
    assert runs.read_text().count("run") == 2


def _crashed_run(repo: Repo, state: Path, table: str, key: tuple[object, object]) -> Path:
    """What a crash in the middle of a run leaves: its row ``running`` (``table`` names the
    table and its two key columns) and its work directory with a checkout."""
    leftover = state.parent / "leftover"
    repo.git("worktree", "add", "--quiet", "--detach", str(leftover / "checkout"), "HEAD")
    with sqlite3.connect(state / DATABASE_NAME) as conn:
        conn.execute(
            f"INSERT INTO {table}, status, worktree_path, queued_at) "
            "VALUES (?, ?, 'running', ?, 'then')",
            (*key, str(leftover)),
        )
    return leftover


def test_a_run_interrupted_by_a_crash_is_cleaned_up_and_rerun(repo: Repo, tmp_path: Path) -> None:
    state = tmp_path / "state"
    with LocalProvider(repo.root, state) as provider:
        revision = Revisions(repo, provider, tmp_path).create(42)
    leftover = _crashed_run(
        repo,
        state,
        "pipeline_runs (revision_id, head_sha",
        (int(revision.id), revision.head_sha),
    )
    with LocalProvider(repo.root, state, pipeline=pytest_pipeline()) as provider:
        assert provider.wait_for_pipelines(WAIT)
        assert provider.revision_reader.list_revisions()[0].pipeline.status == "success"
    assert not leftover.exists()
    assert worktrees(repo) == [f"worktree {repo.root}"]


# ------------------------------------------------------------------ the baseline


def test_the_default_branch_is_tested_first_and_reported_as_the_baseline(
    repo: Repo, tmp_path: Path
) -> None:
    """A red default branch, then a revision that fails the same check: both name it."""
    red = LocalPipeline(
        [sys.executable, "-c", "import sys; print('collection error'); sys.exit(2)"], WAIT
    )
    with LocalProvider(repo.root, tmp_path / "state", pipeline=red, baseline=True) as provider:
        reader = provider.revision_reader
        assert provider.wait_for_pipelines(WAIT)
        baseline = reader.baseline()
        assert baseline is not None
        assert baseline.sha == repo.head()
        assert baseline.pipeline.status == "failure"
        assert baseline.pipeline.failed_checks == (red.name,)
        assert "collection error" in (baseline.pipeline.reason or "")
        assert baseline.pipeline.url is not None
        Revisions(repo, provider, tmp_path).create(42)
        assert provider.wait_for_pipelines(WAIT)
        [revision] = reader.list_revisions()
    assert revision.pipeline.status == "failure"
    assert revision.pipeline.failed_checks == baseline.pipeline.failed_checks
    assert worktrees(repo) == [f"worktree {repo.root}"]


def test_the_baseline_follows_the_default_branch(repo: Repo, tmp_path: Path) -> None:
    with LocalProvider(
        repo.root, tmp_path / "state", pipeline=pytest_pipeline(), baseline=True
    ) as provider:
        reader = provider.revision_reader
        assert provider.wait_for_pipelines(WAIT)
        first = reader.baseline()
        assert first is not None
        assert first.pipeline.status == "success"
        assert first.pipeline.failed_checks == ()
        repo.write("app.py", "def answer():\n    return 41\n")
        repo.git("commit", "-qam", "break it")
        moved = reader.baseline()  # seen by the poller: queued, pending until it has run
        assert moved is not None
        assert (moved.sha, moved.pipeline.status) == (repo.head(), "pending")
        assert provider.wait_for_pipelines(WAIT)
        after = reader.baseline()
    assert after is not None
    assert (after.sha, after.pipeline.status) == (repo.head(), "failure")


def test_without_a_baseline_or_a_pipeline_there_is_none(repo: Repo, tmp_path: Path) -> None:
    with LocalProvider(repo.root, tmp_path / "a", pipeline=pytest_pipeline()) as provider:
        assert provider.revision_reader.baseline() is None
    with LocalProvider(repo.root, tmp_path / "b", baseline=True) as provider:
        assert provider.revision_reader.baseline() is None


def test_a_baseline_run_interrupted_by_a_crash_is_cleaned_up_and_rerun(
    repo: Repo, tmp_path: Path
) -> None:
    state = tmp_path / "state"
    pipeline = pytest_pipeline()
    with LocalProvider(repo.root, state):
        pass  # the database, no run yet
    leftover = _crashed_run(
        repo, state, "baseline_runs (head_sha, command", (repo.head(), pipeline.name)
    )
    with LocalProvider(repo.root, state, pipeline=pipeline, baseline=True) as provider:
        assert provider.wait_for_pipelines(WAIT)
        baseline = provider.revision_reader.baseline()
    assert baseline is not None
    assert baseline.pipeline.status == "success"
    assert not leftover.exists()
    assert worktrees(repo) == [f"worktree {repo.root}"]

"""The crash suite's harness: the demo's loop as real ``cpe run`` processes, killed at a named
crashpoint, restarted on the same state, and checked for what must hold after any crash."""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType

import psutil

from actors.journal import Journal
from adapters.cli.demo import FEATURES, TEST_COMMAND
from adapters.demo.book import ITEM_ONE_TITLE, ITEM_TWO_TITLE, demo_book
from adapters.demo.sample import create_sample_repo
from adapters.runtime.process.launcher import live_group
from adapters.scripted_model import ScriptedModelServer
from adapters.scripted_model.scenario import Scenario
from adapters.support.crashpoints import POINTS
from domain.events import StatusTransitioned
from tests.e2e.running import CPE, revisions, wait_for, work_items
from tests.support.git import git_raw

CRASH_TIMEOUT = 240.0  # seconds for a run to reach its crashpoint (the loop takes ~15 s)
FINISH_TIMEOUT = 180.0  # seconds for a restarted run to finish the loop
CI_SUBSET = 4  # points the default run covers, chosen by the commit; make crash-all runs all


@dataclass(frozen=True)
class Crash:
    """Die at the ``nth`` hit of ``point``."""

    point: str
    nth: int = 1

    def __str__(self) -> str:
        return self.point if self.nth == 1 else f"{self.point}:{self.nth}"


# Points of the hosted systems, each covered by its own cases below.
ELSEWHERE = ("github.", "gitlab.", "linear.", "jira.", "tracker.")
# Points only a landing that has to bring a revision up to date reaches: the merge queue's loop
# (``QueueLoop``) covers them, the demo's (one item after the other) does not.
QUEUE_POINTS = ("local.update.after_ref",)


def cases() -> list[Crash]:
    """On the local provider: every registered point but GitHub's own and the queue's at its
    first hit, and the hits that matter beyond the first: the first event from outside (the
    first append is the engine's ``EngineStarted``), the first implementor's and the first
    reviewer's terminal events (the planner's is the first hit)."""
    return [
        *(
            Crash(point)
            for point in POINTS
            if not point.startswith(ELSEWHERE) and point not in QUEUE_POINTS
        ),
        Crash("journal.after_append", 2),  # the first is the engine's own start; this a poll's
        Crash("session.before_terminal", 2),
        Crash("session.after_terminal", 2),
        Crash("session.after_terminal", 3),
        Crash("local.pipeline.after_start", 2),  # the first is the default branch's (baseline)
        # The second item's approval, merge and done: a restart there once wrote done twice.
        Crash("write.PostReview.after", 2),
        Crash("write.MergeRevision.after", 2),
        Crash("local.merge.after_ref", 2),
        Crash("write.TransitionStatus.after", 6),
    ]


def github_cases() -> list[Crash]:
    """On GitHub: the points around every provider write, and GitHub's own inside them; the
    second issue's too (the first has no blocker to link)."""
    return [
        *(Crash(p) for p in POINTS if p.startswith(("write.", "github."))),
        Crash("github.item.after_issue", 2),
    ]


# GitLab's points the GitLab loop does not reach: a landing that has to rebase (the merge queue
# on GitLab, tests/e2e/test_gitlab_merge_queue.py), and an issue's description or labels edited
# or the issue closed by a plan (the demo's planner only creates): a process is killed there by
# tests/adapters/providers/gitlab/test_gitlab_crashes.py, which checks it covers these.
GITLAB_QUEUE_POINTS = ("gitlab.update.after_rebase",)
GITLAB_TRACKER_POINTS = ("gitlab.issue.after_update",)


def gitlab_cases() -> list[Crash]:
    """On GitLab: the points around every provider write, and GitLab's own inside them the
    GitLab loop reaches (tests/e2e/test_gitlab_loop.py runs them; ``after_link`` on Premium,
    blocking links being a Premium feature); the second issue's too (the first has no
    blocker)."""
    elsewhere = (*GITLAB_QUEUE_POINTS, *GITLAB_TRACKER_POINTS)
    return [
        *(Crash(p) for p in POINTS if p.startswith(("write.", "gitlab.")) and p not in elsewhere),
        Crash("gitlab.issue.after_create", 2),
    ]


def gitlab_queue_cases() -> list[Crash]:
    """On GitLab's merge queue: the rebase that brings the second merge request up to date."""
    return [Crash(point) for point in GITLAB_QUEUE_POINTS]


def gitlab_tracker_cases() -> list[Crash]:
    """On the GitLab tracker alone (tests/adapters/providers/gitlab/test_gitlab_crashes.py): a
    plan's edit or closing of an issue."""
    return [Crash(point) for point in GITLAB_TRACKER_POINTS]


def tracker_cases() -> list[Crash]:
    """The points of the trackers that keep work items only (Linear's, Jira's) and of the
    comment cpe leaves on such an item (``tracker.``): each provider's own crash test kills a
    process at its points and checks it covers them; the comment's is the loops' on those
    trackers."""
    return [Crash(p) for p in POINTS if p.startswith(("linear.", "jira.", "tracker."))]


def queue_cases() -> list[Crash]:
    """On the merge queue's loop (two items at once, the second sent back and landed after):
    every step of a landing, the second item's included."""
    return [
        *(Crash(point) for point in QUEUE_POINTS),
        Crash("write.UpdateBranch.before"),
        Crash("write.UpdateBranch.after", 2),  # the second item's: its branch is updated
        Crash("write.MergeRevision.before", 2),
        Crash("write.MergeRevision.after", 2),
        Crash("local.merge.after_ref", 2),
    ]


def selected(all_cases: Sequence[Crash], subset: int = CI_SUBSET) -> list[Crash]:
    """All cases with ``CPE_CRASH_ALL=1`` (``make crash-all``); otherwise ``subset`` of them
    chosen by the checkout's commit, so that every case runs as commits go by."""
    if os.environ.get("CPE_CRASH_ALL") == "1":
        return list(all_cases)
    try:
        commit = git_raw(Path(__file__).resolve().parents[2], "rev-parse", "HEAD").strip()
    except Exception:
        commit = "0"
    start = int(hashlib.sha256(commit.encode()).hexdigest(), 16) % len(all_cases)
    return [all_cases[(start + i) % len(all_cases)] for i in range(subset)]


class Loop:
    """The demo's sample repository, the scripted model, and ``cpe run`` on them (``repo``: a
    repository prepared already, with ``env`` for its provider; default: the local sample)."""

    finish_timeout = FINISH_TIMEOUT

    def __init__(
        self,
        base: Path,
        repo: Path | None = None,
        env: Mapping[str, str] = MappingProxyType({}),
        book: Sequence[Scenario] | None = None,
    ):
        self.base = base
        if repo is None:
            repo = create_sample_repo(base / "sample")
            # A setup command, so that its crashpoint is reached and the reaper finds it
            toml = repo / "supervisor.toml"
            toml.write_text(
                toml.read_text().replace('setup_command = ""', 'setup_command = "true"')
            )
            git_raw(repo, "commit", "-qam", "a setup command")
        self.repo = repo
        self.env = dict(env)
        self.home = base / "home"
        self.home.mkdir()
        self.trace = base / "crash-trace"
        self.server = ScriptedModelServer(list(book or demo_book())).start()
        self.log_path = base / "cpe.log"
        self.processes: list[subprocess.Popen[str]] = []

    def start(self, crash: Crash | None = None, *, trace: bool = False) -> subprocess.Popen[str]:
        env = {
            "PATH": os.environ["PATH"],
            "HOME": str(self.home),
            "LANG": "C.UTF-8",
            **self.server.client_env(),
            **self.env,
        }
        if crash is not None:
            env["CPE_CRASH_AT"] = str(crash)
        if trace:
            env["CPE_CRASH_TRACE"] = str(self.trace)
        with self.log_path.open("a") as log:
            log.write(f"\n===== cpe run (crash at {crash}) =====\n")
            process = subprocess.Popen(
                [str(CPE), "run", "--repo", str(self.repo)],
                cwd=self.home,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                text=True,
            )
        self.processes.append(process)
        return process

    def crash_at(self, crash: Crash) -> None:
        """Run until ``crash`` kills the process; fail if the loop ends without reaching it."""
        process = self.start(crash)
        died = wait_for(lambda: process.poll() is not None or self.done(), CRASH_TIMEOUT)
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            process.wait(120)
        assert died, f"{crash}: neither crashed nor finished in {CRASH_TIMEOUT:g} s\n{self.tail()}"
        assert process.returncode == -signal.SIGKILL, (
            f"{crash}: the loop ended (exit {process.returncode}) without reaching the point\n"
            + self.tail()
        )

    def finish(self, *, trace: bool = False) -> None:
        """Run until the loop is done, then stop with SIGTERM; it must exit 0."""
        process = self.start(trace=trace)
        done = wait_for(lambda: self.done() or process.poll() is not None, self.finish_timeout)
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
        code = process.wait(120)
        assert done, f"the loop did not finish: {self.state()}\n{self.tail()}"
        assert self.done(), (
            f"cpe run exited {code} before the loop finished: {self.state()}\n{self.tail()}"
        )
        assert code == 0, f"cpe run exited {code} after a clean stop\n{self.tail()}"

    def done(self) -> bool:
        items = work_items(self.repo)
        return len(items) >= 2 and all(i.status == "done" for i in items)

    def state(self) -> str:
        items = ", ".join(f"#{i.id} {i.status}" for i in work_items(self.repo))
        revs = revisions(self.repo)
        listed = ", ".join(f"{r.id} {r.state} {r.pipeline.status}" for r in revs)
        # A red pipeline's reason (its log's last lines): why an item went round, at a glance
        reasons = "".join(
            f"\nrevision {r.id}'s pipeline: {r.pipeline.reason}"
            for r in revs
            if r.pipeline.status == "failure"
        )
        return f"work items: {items or 'none'}; revisions: {listed or 'none'}{reasons}"

    def tail(self, lines: int = 60) -> str:
        text = self.log_path.read_text(errors="replace") if self.log_path.exists() else ""
        return "\n".join(text.splitlines()[-lines:])

    def close(self) -> None:
        for process in self.processes:
            if process.poll() is None:
                process.kill()
                process.wait(30)
        self.server.close()

    # ------------------------------------------------------------------ the invariants

    def check_invariants(self) -> None:
        repo = self.repo
        items = work_items(repo)
        titles = sorted(i.title for i in items)
        assert titles == sorted([ITEM_ONE_TITLE, ITEM_TWO_TITLE]), f"planned once: {titles}"
        assert all(i.status == "done" for i in items), self.state()
        revs = revisions(repo)
        by_item = sorted(r.work_item_id or "" for r in revs)
        assert by_item == sorted(i.id for i in items), f"one revision per item: {self.state()}"
        assert all(r.state == "merged" for r in revs), self.state()
        merges = git_raw(repo, "log", "--merges", "--format=%s", "main").splitlines()
        for rev in revs:
            mine = [m for m in merges if m.startswith(f"Merge revision #{rev.id} ")]
            assert len(mine) <= 1, f"revision {rev.id} merged {len(mine)} times: {merges}"
        for path, needles in FEATURES.items():
            text = git_raw(repo, "show", f"main:{path}")
            for needle in needles:
                assert needle in text, f"main's {path} lacks {needle!r}"
        greet = git_raw(repo, "show", "main:greetings/greet.py")
        assert greet.count("def greet(") == 1, greet
        assert greet.count("def greet_all(") == 1, greet
        self._check_tests_pass()
        journal = Journal(repo / ".cpe" / "journal.sqlite3")
        try:
            pending = journal.intents("pending")
            done = [
                entry.event.work_item_id
                for entry in journal.entries()
                if isinstance(entry.event, StatusTransitioned) and entry.event.to == "done"
            ]
        finally:
            journal.close()
        assert pending == [], f"intents left pending: {[i.key for i in pending]}"
        # Every write once: each item was moved to done by one transition, not two.
        assert sorted(done) == sorted(i.id for i in items), f"done transitions: {done}"
        listed = git_raw(repo, "worktree", "list", "--porcelain").splitlines()
        trees = [line for line in listed if line.startswith("worktree ")]
        assert trees == [f"worktree {repo}"], f"worktrees left: {trees}"
        self._check_no_process_left()

    def _check_tests_pass(self) -> None:
        with tempfile.TemporaryDirectory(prefix="cpe-crash-check-") as tmp:
            checkout = Path(tmp) / "main"
            git_raw(self.repo, "worktree", "add", "--detach", str(checkout), "main")
            try:
                result = subprocess.run(
                    TEST_COMMAND,
                    cwd=checkout,
                    capture_output=True,
                    text=True,
                    timeout=300,
                    check=False,
                )
            finally:
                git_raw(self.repo, "worktree", "remove", "--force", str(checkout))
        assert result.returncode == 0, f"main's tests fail:\n{result.stdout}{result.stderr}"

    def _ours(self, pidfile: Path) -> bool:
        """A pipeline work directory of this test's repository (the system temporary directory
        is shared: other test runs on the machine have pipelines of their own there)."""
        try:
            gitdir = (pidfile.parent / "checkout" / ".git").read_text()
        except OSError:
            return False
        return str(self.repo.resolve()) in gitdir

    def _check_no_process_left(self) -> None:
        state = self.repo / ".cpe"
        for pidfile in [
            *state.glob("runs/*/*.pid"),
            *filter(self._ours, Path(tempfile.gettempdir()).glob("cpe-pipeline-*/pipeline.pid")),
        ]:
            assert live_group(pidfile) is None, f"{pidfile} names a live process group"
        left = []
        for process in psutil.process_iter(["pid", "cwd", "cmdline"]):
            cwd = process.info.get("cwd") or ""
            if cwd.startswith(str(self.base)) and process.pid != os.getpid():
                left.append(f"{process.pid} {process.info.get('cmdline')}")
        assert not left, f"processes left in the test's directories: {left}"


class QueueLoop(Loop):
    """The merge queue's loop: the rename pair (``tests.e2e.queue_loop``) implemented at once;
    the one landing second is tested merged with the first, sent back, and landed."""

    def __init__(self, base: Path):
        from tests.e2e.queue_loop import OLD, RENAME_TITLES, queue_repo, rename_book  # noqa: PLC0415

        repo = queue_repo(base / "repo", {"lib.py": OLD}, RENAME_TITLES)
        self.start_sha = git_raw(repo, "rev-parse", "main").strip()
        super().__init__(base, repo, book=rename_book())

    def check_invariants(self) -> None:
        from tests.e2e.queue_loop import red_commits  # noqa: PLC0415

        repo = self.repo
        assert [i.status for i in work_items(repo)] == ["done", "done"], self.state()
        revs = revisions(repo)
        assert sorted(r.work_item_id or "" for r in revs) == ["1", "2"], self.state()
        assert all(r.state == "merged" for r in revs), self.state()
        landed = git_raw(repo, "rev-list", "--first-parent", f"{self.start_sha}..main").split()
        assert len(landed) == 2, f"each revision merged once: {landed}"
        assert red_commits(repo, self.start_sha, self.base) == []
        journal = Journal(repo / ".cpe" / "journal.sqlite3")
        try:
            pending = journal.intents("pending")
            attempts = dict(journal.replay().attempts)
        finally:
            journal.close()
        assert pending == [], f"intents left pending: {[i.key for i in pending]}"
        assert attempts == {"1": 1, "2": 1}, f"an attempt spent on a landing: {attempts}"
        listed = git_raw(repo, "worktree", "list", "--porcelain").splitlines()
        trees = [line for line in listed if line.startswith("worktree ")]
        assert trees == [f"worktree {repo}"], f"worktrees left: {trees}"
        self._check_no_process_left()

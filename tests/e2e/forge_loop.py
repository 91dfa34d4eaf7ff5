"""What the whole loop on a forge needs whichever forge it is (``github_loop.py``,
``gitlab_loop.py``): the sample's files to seed a fake with, the loop's settings, a CI that tests
each open head on a checkout of exactly that commit, the loop itself with what must hold on the
forge's default branch and locally after it, and what it cost the forge in requests."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Self

from actors.journal import Journal
from adapters.cli.demo import FEATURES
from adapters.demo.sample import PIPELINE_COMMAND
from tests.e2e.crash import Loop
from tests.support.git import git

WRITES = ("POST", "PATCH", "PUT", "DELETE")
# supervisor.toml's sections after a forge's [provider]: the loop's pace and limits.
LOOP_SETTINGS = """
[workflow]
auto_merge = true
retry_backoff_initial = 0.2
retry_backoff_max = 1
[pollers]
work_items_interval = 0.5
revisions_interval = 0.5
specs_interval = 0.5
[runtime]
max_agent_duration = 120
[dashboard]
listen = "127.0.0.1:0"
"""


def isolate_git_for_a_benchmark() -> None:
    """A benchmark's git (it runs outside pytest, where ``isolate_git`` would): the machine's
    configuration shut out, commits by "Bench"."""
    os.environ.update(GIT_CONFIG_GLOBAL=os.devnull, GIT_CONFIG_NOSYSTEM="1")
    for role in ("AUTHOR", "COMMITTER"):
        os.environ[f"GIT_{role}_NAME"] = "Bench"
        os.environ[f"GIT_{role}_EMAIL"] = "bench@example.invalid"


def tracked_files(repo: Path) -> dict[str, bytes]:
    names = git(repo, "ls-files", "-z").split("\0")
    return {name: (repo / name).read_bytes() for name in names if name}


class CommitCI:
    """A CI on a fake forge: every open head (``heads``) is tested once, the sample's tests run
    on a checkout of exactly that commit of the bare repository at ``git_dir``, and the result
    (``success`` or ``failure``) is ``report``ed; ``starting`` is told first. A forge's CI
    subclasses it and says how heads are found and results reported there."""

    def __init__(
        self,
        git_dir: Path,
        command: Sequence[str] | None = None,
        *,
        start_when: Callable[[], bool] = lambda: True,
    ) -> None:
        self.git_dir = git_dir
        # CI reports nothing until this holds (a test that needs runs to overlap holds landings).
        self.start_when = start_when
        # What the CI runs in a checkout of the head: the sample's tests by default.
        self.command = list(command or [sys.executable, *PIPELINE_COMMAND[1:]])
        self.checked: dict[str, str] = {}  # head sha -> conclusion
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="fake-ci", daemon=True)

    def heads(self) -> list[str]:
        raise NotImplementedError

    def starting(self, sha: str) -> None:
        """A run of ``sha`` begins."""

    def report(self, sha: str, conclusion: str) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(60)

    def _run(self) -> None:
        while not self._stop.wait(0.2):
            if not self.start_when():
                continue
            for sha in self.heads():
                if sha not in self.checked:
                    self.starting(sha)
                    self.checked[sha] = self._test(sha)
                    self.report(sha, self.checked[sha])

    def _test(self, sha: str) -> str:
        with tempfile.TemporaryDirectory(prefix="fake-ci-") as scratch:
            tree = Path(scratch)
            archive = subprocess.run(
                ["git", "-C", str(self.git_dir), "archive", sha],
                capture_output=True,
                check=True,
                timeout=60,
            ).stdout
            subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True, timeout=60)
            done = subprocess.run(
                self.command, cwd=tree, capture_output=True, timeout=120, check=False
            )
        return "success" if done.returncode == 0 else "failure"


class ForgeLoop(Loop):
    """The crash suite's loop on a forge's fake: ``repo`` a clone of the fake's repository (at
    ``git_dir``), ``ci`` running on its heads while the loop lives. ``meanwhile`` is called
    while it waits for the loop to end (a forge's ``done`` calls it)."""

    finish_timeout = 300.0  # under a minute on an idle machine, several times that when loaded

    def __init__(
        self, base: Path, repo: Path, env: Mapping[str, str], git_dir: Path, ci: CommitCI
    ) -> None:
        super().__init__(base, repo, env)
        self.git_dir = git_dir
        self.ci = ci.__enter__()
        self.meanwhile: Callable[[], object] = lambda: None

    def close(self) -> None:
        try:
            super().close()
        finally:
            self.ci.__exit__(None, None, None)

    def timed_run(self) -> float:
        """Runs the loop to its end, checks it and closes it: the seconds the run took (what
        the benchmarks measure)."""
        started = time.monotonic()
        try:
            self.finish()
            seconds = time.monotonic() - started
            self.check_invariants()
        finally:
            self.close()
        return seconds

    def check_the_default_branch(self, head: str) -> None:
        """A clone of the forge's repository is at ``head``, passes the sample's tests and has
        both features, each once."""
        checkout = self.base / "final"
        git(self.base, "clone", "--quiet", str(self.git_dir), str(checkout))
        assert git(checkout, "rev-parse", "HEAD") == head
        final = subprocess.run(
            [sys.executable, *PIPELINE_COMMAND[1:]], cwd=checkout, capture_output=True, check=False
        )
        assert final.returncode == 0, final.stderr
        for path, needles in FEATURES.items():
            text = (checkout / path).read_text()
            assert all(needle in text for needle in needles), path
            assert text.count("def greet(") <= 1, text

    def check_nothing_left(self) -> None:
        """No intent left pending in the journal, no worktree, no process of the loop."""
        journal = Journal(self.repo / ".cpe" / "journal.sqlite3")
        try:
            pending = journal.intents("pending")
        finally:
            journal.close()
        assert pending == [], f"intents left pending: {[i.key for i in pending]}"
        listed = git(self.repo, "worktree", "list", "--porcelain").splitlines()
        trees = [line for line in listed if line.startswith("worktree ")]
        assert trees == [f"worktree {self.repo}"], f"worktrees left: {trees}"
        self._check_no_process_left()


@dataclass(frozen=True)
class Counts:
    """What a loop cost a forge: every request, those counted against the rate limit (on
    GitHub all but 304s; on GitLab every one), the content-creating writes, and the 304s."""

    requests: int
    counted: int
    writes: int
    not_modified: int = 0

    @classmethod
    def of(cls, requests: Sequence[Any]) -> Counts:
        """From a fake's recorded requests (each with ``method``, ``status``, ``counted``)."""
        return cls(
            len(requests),
            sum(1 for r in requests if r.counted),
            sum(1 for r in requests if r.method in WRITES),
            sum(1 for r in requests if r.status == 304),
        )

"""The local pipeline: the repository's test command, run on one commit in a throwaway worktree.

This module is the plain logic (check out, run with a timeout, kill the whole process tree, keep the
log, clean up); ``adapters.providers.local.pipeline_runner`` decides when it runs. The command runs
in a detached worktree in the system temp directory — outside the user's checkout, so their tools
never see it — in a process group of its own, so a timeout or a cancel kills everything it started.
Its environment is built from an allowlist: it runs code an agent wrote, and must not see the
daemon's credentials; nor cpe's own virtual environment (``own_venv``): the command's ``python`` is
the project's, never cpe's with cpe's packages.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import structlog

from adapters.providers.git import GitRepo
from adapters.runtime.process.launcher import kill_group, live_group, stamp_pid
from adapters.runtime.process.own_venv import own_program_in, without_own_venv
from adapters.support.crashpoints import crashpoint
from adapters.support.worktree_lock import worktree_lock
from domain.errors import ConfigError, ProviderError

PipelineOutcome = Literal["success", "failure", "cancelled"]

# What a test command plausibly needs from the daemon's environment; nothing that could be a
# credential.
ENV_ALLOWLIST = (
    "PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LANGUAGE", "LC_ALL", "LC_CTYPE", "TZ",
    "TMPDIR", "TEMP", "TMP", "TERM", "VIRTUAL_ENV", "SYSTEMROOT",
)  # fmt: skip

WORKDIR_PREFIX = "cpe-pipeline-"
# Seconds before each further try of a checkout that failed (another process's prune in the way)
CHECKOUT_RETRY_WAITS = (0.5, 2.0)
PID_FILE = "pipeline.pid"  # in the workdir: the test command's pid and start time

_log = structlog.get_logger(__name__)


@dataclass(frozen=True)
class PipelineResult:
    status: PipelineOutcome
    reason: str
    log_path: Path


class LocalPipeline:
    """Runs ``command`` (a shell string, or an argv list run without a shell) with a timeout.

    ``env`` is added to the allowlisted environment. ``kill_grace`` is how long the command gets
    between SIGTERM and SIGKILL. The reason of a result is a log excerpt: the last
    ``excerpt_lines`` lines (at most ``excerpt_chars`` characters).
    """

    def __init__(
        self,
        command: str | Sequence[str],
        timeout: float,
        *,
        env: Mapping[str, str] | None = None,
        kill_grace: float = 5.0,
        excerpt_lines: int = 40,
        excerpt_chars: int = 4000,
    ) -> None:
        if not command or (isinstance(command, str) and not command.strip()):
            raise ConfigError("the pipeline command is empty", key_path="pipeline.command")
        if timeout <= 0:
            raise ConfigError("must be positive", key_path="pipeline.timeout")
        self.command = command
        self.timeout = timeout
        # The check's name, as a revision's failure and the default branch's are compared by.
        self.name = command if isinstance(command, str) else shlex.join(command)
        self._env = dict(env or {})
        self._kill_grace = kill_grace
        self._excerpt_lines = excerpt_lines
        self._excerpt_chars = excerpt_chars

    @property
    def display(self) -> str:
        return self.command if isinstance(self.command, str) else shlex.join(self.command)

    @staticmethod
    def make_workdir() -> Path:
        return Path(tempfile.mkdtemp(prefix=WORKDIR_PREFIX))

    def run(
        self,
        repo: GitRepo,
        sha: str,
        *,
        log_path: Path,
        workdir: Path | None = None,
        cancel: threading.Event | None = None,
        extra_env: Mapping[str, str] | None = None,
    ) -> PipelineResult:
        """Check ``sha`` out into ``workdir`` (made if None), run the command, clean up."""
        workdir = workdir or self.make_workdir()
        checkout = workdir / "checkout"
        log_path.parent.mkdir(parents=True, exist_ok=True)
        try:
            if cancel is not None and cancel.is_set():
                return PipelineResult("cancelled", "cancelled", log_path)
            error = _check_out(repo, sha, checkout, cancel or threading.Event())
            if cancel is not None and cancel.is_set():
                return PipelineResult("cancelled", "cancelled", log_path)
            if error is not None:
                log_path.write_text(f"{error}\n")
                return PipelineResult(
                    "failure", f"could not check out {sha[:12]}: {error}", log_path
                )
            return self._execute(checkout, log_path, cancel, extra_env or {})
        finally:
            remove_workdir(repo, workdir, earlier=False)

    def _execute(
        self,
        checkout: Path,
        log_path: Path,
        cancel: threading.Event | None,
        extra_env: Mapping[str, str],
    ) -> PipelineResult:
        env = pipeline_env()
        env.update({"CI": "true", **self._env, **extra_env})
        started = time.monotonic()
        with log_path.open("wb") as log:
            log.write(f"$ {self.display}\n".encode())
            log.flush()
            try:
                proc = subprocess.Popen(
                    self.command,
                    shell=isinstance(self.command, str),
                    cwd=checkout,
                    env=env,
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,  # its own process group: kill the whole tree
                )
            except OSError as exc:
                log.write(f"{exc}\n".encode())
                return PipelineResult("failure", f"could not start {self.display}: {exc}", log_path)
            # A kill -9 of cpe leaves the group running: the next start's recovery kills the
            # group this file proves is ours (pid and start time), then removes the workdir.
            stamp_pid(checkout.parent / PID_FILE, proc.pid)
            crashpoint("local.pipeline.after_start")
            ending = self._wait(proc, started, cancel)
        elapsed = time.monotonic() - started
        if ending == "cancelled":
            return PipelineResult("cancelled", "cancelled", log_path)
        if ending == "timed-out":
            head = f"{self.display} timed out after {self.timeout:g}s"
            return PipelineResult("failure", self._reason(head, log_path), log_path)
        if proc.returncode == 0:
            # The last line is usually the summary ("12 passed in 3.1s"); the header line means
            # the command printed nothing.
            last = _tail(log_path, 1, self._excerpt_chars).strip()
            if not last or last == f"$ {self.display}":
                last = f"passed in {elapsed:.1f}s"
            return PipelineResult("success", last, log_path)
        head = f"{self.display} exited with status {proc.returncode} after {elapsed:.1f}s"
        return PipelineResult("failure", self._reason(head, log_path), log_path)

    def _wait(
        self, proc: subprocess.Popen[bytes], started: float, cancel: threading.Event | None
    ) -> Literal["exited", "timed-out", "cancelled"]:
        ending: Literal["exited", "timed-out", "cancelled"] = "exited"
        while True:
            remaining = started + self.timeout - time.monotonic()
            if remaining <= 0:
                ending = "timed-out"
                break
            try:
                # Wake up now and then to notice a cancel (a newer head, a shutdown).
                proc.wait(timeout=min(remaining, 0.2))
                break
            except subprocess.TimeoutExpired:
                if cancel is not None and cancel.is_set():
                    ending = "cancelled"
                    break
        if ending != "exited":
            _signal_group(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=self._kill_grace)
            except subprocess.TimeoutExpired:
                _signal_group(proc.pid, signal.SIGKILL)
                proc.wait()
        # Whatever the leader left running in its group (a server a test forgot) goes too.
        _signal_group(proc.pid, signal.SIGKILL)
        return ending

    def _reason(self, head: str, log_path: Path) -> str:
        tail = _tail(log_path, self._excerpt_lines, self._excerpt_chars)
        return f"{head}; last lines of the log:\n{tail}" if tail.strip() else head


def pipeline_env() -> dict[str, str]:
    """The allowlisted part of our environment the command gets, cpe's own venv taken off."""
    return without_own_venv({k: v for k, v in os.environ.items() if k in ENV_ALLOWLIST})


def missing_program_warning(command: str | Sequence[str]) -> str | None:
    """One line when ``command`` (an argv list) names a program the pipeline's PATH does not
    have (``python`` on a system with only ``python3``): every pipeline would fail, and the
    default branch would read red; else None. A shell line is left to the shell."""
    if isinstance(command, str) or not command:
        return None
    program = command[0]
    if "/" in program or shutil.which(program, path=pipeline_env().get("PATH", os.defpath)):
        return None
    return (
        f"the pipeline command's program {program!r} is not on the PATH the pipeline gets "
        "(cpe's own environment is not on it): every pipeline would fail; name your project's "
        "interpreter in pipeline_command ([provider.local] in supervisor.toml), e.g. "
        '["python3", "-m", "pytest", "-q"] or [".venv/bin/python", "-m", "pytest", "-q"]'
    )


def own_python_warning(command: str | Sequence[str]) -> str | None:
    """One line when ``command`` would run a program of cpe's own virtual environment (its
    ``python``) on the PATH the pipeline gets: what, why, what to do; else None."""
    program = own_program_in(command, pipeline_env().get("PATH", os.defpath))
    if program is None:
        return None
    return (
        f"the pipeline command runs {program}, from cpe's own virtual environment: your tests "
        "would import cpe's packages, not your project's; name your project's interpreter in "
        "pipeline_command ([provider.local] in supervisor.toml)"
    )


def _check_out(
    repo: GitRepo, sha: str, checkout: Path, cancel: threading.Event
) -> ProviderError | None:
    """Check ``sha`` out at ``checkout`` (detached); None when done, else git's last error.

    Under the repository's worktree lock, so this process's own prunes (the startup reaper's,
    a removal's) wait for it; a failed try is tried again after a moment, for the prunes of
    other processes (``git gc`` runs one) that no lock here holds back.
    """
    error: ProviderError | None = None
    for wait in (0.0, *CHECKOUT_RETRY_WAITS):
        if error is not None:
            _log.warning(
                "cannot check out a pipeline's commit; trying again",
                sha=sha,
                error=str(error),
                wait=wait,
            )
            if cancel.wait(wait):
                return error
        with worktree_lock(repo.root):
            if error is not None:  # what the failed try made, if anything
                shutil.rmtree(checkout, ignore_errors=True)
                repo.run_status("worktree", "prune")
            try:
                # Hooks off: the user's post-checkout hook has no business in a throwaway tree.
                repo.run(
                    "-c", "core.hooksPath=/dev/null", "worktree", "add", "--detach", "--force",
                    str(checkout), sha,
                )  # fmt: skip
            except ProviderError as exc:
                error = exc
            else:
                return None
    return error


def remove_workdir(repo: GitRepo, workdir: Path, *, earlier: bool = True) -> None:
    """Remove a pipeline's worktree and its directory; safe on a half-made or missing one.
    A test command still running there is killed first: one an earlier cpe left (``earlier``,
    said as a warning), or what a run that just ended left of its group (its own leftovers,
    killed a moment ago and not all gone yet: nothing to warn about)."""
    group = live_group(workdir / PID_FILE)
    if group is not None:
        if earlier:
            _log.warning("killing a pipeline an earlier run left", pgid=group, workdir=str(workdir))
        kill_group(group, grace=5.0)
    checkout = workdir / "checkout"
    with worktree_lock(repo.root):
        if repo.run_status("worktree", "remove", "--force", "--force", str(checkout)).status != 0:
            shutil.rmtree(checkout, ignore_errors=True)
            repo.run_status("worktree", "prune")
    shutil.rmtree(workdir, ignore_errors=True)


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):  # the group is already gone
        os.killpg(pgid, sig)


def _tail(path: Path, lines: int, chars: int) -> str:
    with path.open("rb") as log:
        log.seek(0, os.SEEK_END)
        size = log.tell()
        log.seek(max(0, size - chars * 4))
        data = log.read().decode("utf-8", "replace")
    text = "\n".join(data.rstrip("\n").split("\n")[-lines:])
    return text[-chars:]

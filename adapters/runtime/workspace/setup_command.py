"""The worktree setup command (``[runtime] setup_command``): run, cancel, and found again.

It runs in a process group of its own (a ``yarn install`` spawns children), so a timeout or a
cancel kills the whole tree. Its pid and start time go to a pid file under
``.worktrees/.setup-pids/`` while it runs: a ``kill -9`` of cpe leaves the command running, and
the next start's reaper (``reap_setups``) kills the group that file proves is an earlier run's
(never a recycled pid) before it removes the worktree.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

import structlog

from actors.crashpoints import crashpoint
from adapters.runtime.process.launcher import kill_group, live_group, stamp_pid
from domain.errors import WorktreeError

log = structlog.get_logger("cpe.runtime.setup")

PID_DIR = ".setup-pids"  # under .worktrees/
_OUTPUT_TAIL = 2000
_POLL = 0.2  # seconds between looks at a cancel while the command runs


def pid_file(worktrees_dir: Path, branch: str) -> Path:
    return worktrees_dir / PID_DIR / (branch.replace("/", "--") + ".pid")


def run_setup_command(
    command: Sequence[str] | str,
    cwd: Path,
    env: Mapping[str, str],
    timeout: float,
    *,
    pidfile: Path,
    cancel: threading.Event | None = None,
    what: str = "setup command",
) -> None:
    """Run the setup command (or another workspace hook, named by ``what``); a failure, a
    timeout or a cancel raises ``WorktreeError`` with the output's tail, once the command's
    whole process group is gone."""
    argv: str | list[str] = command if isinstance(command, str) else list(command)
    with tempfile.TemporaryFile() as output:
        try:
            # shell=True for a string: the operator wrote a shell command in supervisor.toml.
            proc = subprocess.Popen(
                argv,
                shell=isinstance(argv, str),
                cwd=cwd,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=output,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        except OSError as exc:
            raise WorktreeError(f"{what} {argv!r} could not start: {exc}") from exc
        pidfile.parent.mkdir(parents=True, exist_ok=True)
        stamp_pid(pidfile, proc.pid)
        crashpoint("worktree.setup_started")
        try:
            ending = _wait(proc, timeout, cancel)
            if ending != "exited":
                log.info(f"stopping the {what}", why=ending, command=str(argv), pgid=proc.pid)
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
            kill_group(proc.pid, grace=0)  # what it left running in its group goes too
        finally:
            pidfile.unlink(missing_ok=True)
        output.seek(0)
        tail = output.read().decode("utf-8", errors="replace")[-_OUTPUT_TAIL:]
    if ending == "cancelled":
        raise WorktreeError(f"{what} {argv!r} cancelled with its run")
    if ending == "timed-out":
        raise WorktreeError(f"{what} {argv!r} timed out after {timeout}s; output tail:\n{tail}")
    if proc.returncode != 0:
        raise WorktreeError(
            f"{what} {argv!r} failed (exit {proc.returncode}); output tail:\n{tail}"
        )


def _wait(proc: subprocess.Popen[bytes], timeout: float, cancel: threading.Event | None) -> str:
    deadline = time.monotonic() + timeout
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return "timed-out"
        try:
            proc.wait(timeout=min(left, _POLL))
        except subprocess.TimeoutExpired:
            if cancel is not None and cancel.is_set():
                return "cancelled"
        else:
            return "exited"


def reap_setups(worktrees_dir: Path) -> list[int]:
    """Kill the setup commands an earlier cpe left running (their pid files prove it); the
    process group ids killed."""
    killed = []
    directory = worktrees_dir / PID_DIR
    for pidfile in sorted(directory.glob("*.pid")) if directory.is_dir() else []:
        group = live_group(pidfile)
        if group is not None:
            log.warning("killing a setup command an earlier run left", pgid=group)
            kill_group(group, grace=5.0)
            killed.append(group)
        pidfile.unlink(missing_ok=True)
    return killed

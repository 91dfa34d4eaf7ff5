"""Running one agent CLI: its own process group, no input, captured and streamed output, a
wall-clock and an idle timeout, and a stop that leaves no process of the group behind.

The CLI starts in a new session (``start_new_session=True``: it leads its own process group)
with stdin from ``/dev/null`` (or a file), never a pipe: nothing further can reach it
(S003-06). Two reader threads copy stdout and stderr line by line to their log files and, at
the same time, to a callback (S003-07). A watcher thread enforces the timeouts; ``stop`` sends
SIGTERM to the group, waits the grace, then SIGKILL (S003-11). Exit status maps to the
termination (docs/contract.md): 0 → ``completed``, anything else → ``error``, unless the run was
killed, whose reason wins (S003-08, S004-11).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Literal

import psutil

from adapters.runtime.artifacts.store import Termination
from adapters.runtime.process.launcher import group_members, kill_group, live_group

__all__ = [
    "PIDFILE",
    "LineCallback",
    "ProcessHandle",
    "ProcessOutcome",
    "group_members",
    "kill_group",
    "live_group",
    "start_process",
]

PIDFILE = "runner.pid"  # in the run's directory while its process group may be alive

Stream = Literal["stdout", "stderr"]
LineCallback = Callable[[Stream, str], None]
KillReason = Literal["killed_timeout", "killed_idle", "killed_policy"]


@dataclass(frozen=True)
class ProcessOutcome:
    termination: Termination
    exit_code: int | None
    reason: str | None
    started_at: datetime
    ended_at: datetime
    cancelled_at: datetime | None
    stdout_path: Path
    stderr_path: Path


class ProcessHandle:
    """A started CLI. ``wait`` blocks until it has ended and its group is gone."""

    def __init__(
        self,
        process: subprocess.Popen[bytes],
        *,
        stdout_path: Path,
        stderr_path: Path,
        on_line: LineCallback | None,
        wall_timeout: float | None,
        idle_timeout: float | None,
        kill_grace: float,
        pidfile: Path | None = None,
    ) -> None:
        self.process = process
        self.pidfile = pidfile
        self.pid = process.pid  # == its process group id (a new session)
        self.started_at = datetime.now(UTC)
        self.stdout_path = stdout_path
        self.stderr_path = stderr_path
        self.kill_grace = kill_grace
        self._on_line = on_line
        self._wall_timeout = wall_timeout
        self._idle_timeout = idle_timeout
        self._lock = threading.Lock()
        self._last_output = time.monotonic()
        self._started = time.monotonic()
        self._tools_running: set[str] = set()  # a tool at work is activity, however silent
        self._kill: tuple[KillReason, str] | None = None
        self._cancelled_at: datetime | None = None
        self._wake = threading.Event()
        self._done = threading.Event()
        self._outcome: ProcessOutcome | None = None
        self._readers = [
            threading.Thread(target=self._read, args=(name, pipe, path), daemon=True)
            for name, pipe, path in (
                ("stdout", process.stdout, stdout_path),
                ("stderr", process.stderr, stderr_path),
            )
        ]
        for reader in self._readers:
            reader.start()
        self._watcher = threading.Thread(target=self._watch, daemon=True)
        self._watcher.start()

    # ------------------------------------------------------------------ public

    def stop(self, reason: KillReason = "killed_policy", detail: str = "stopped") -> None:
        """Kill the group (SIGTERM, grace, SIGKILL); returns at once, ``wait`` tells the end."""
        with self._lock:
            if self._kill is None and self._outcome is None:
                self._kill = (reason, detail)
                self._cancelled_at = datetime.now(UTC)
        self._wake.set()

    def wait(self, timeout: float | None = None) -> ProcessOutcome:
        if not self._done.wait(timeout):
            raise TimeoutError(f"process {self.pid} still running")
        assert self._outcome is not None
        return self._outcome

    def tool_started(self, tool_id: str) -> None:
        """A tool call began: the run is busy (a test suite can be silent for minutes), so
        the idle timeout waits until it ends."""
        with self._lock:
            self._tools_running.add(tool_id)

    def tool_ended(self, tool_id: str) -> None:
        with self._lock:
            self._tools_running.discard(tool_id)
            self._last_output = time.monotonic()

    @property
    def done(self) -> bool:
        return self._done.is_set()

    # ------------------------------------------------------------------ threads

    def _read(self, name: Stream, pipe: IO[bytes] | None, path: Path) -> None:
        assert pipe is not None
        with path.open("ab") as log, pipe:
            for raw in iter(pipe.readline, b""):
                self._last_output = time.monotonic()
                log.write(raw)
                log.flush()
                if self._on_line is not None:
                    try:
                        self._on_line(name, raw.decode("utf-8", "replace").rstrip("\r\n"))
                    except Exception:
                        with contextlib.suppress(Exception):
                            log.write(b"[cpe: the line callback failed]\n")

    def _watch(self) -> None:
        try:
            while self.process.poll() is None:
                kill = self._due()
                if kill is not None:
                    self._terminate_group()
                    break
                self._wake.wait(self._next_check())
                self._wake.clear()
            self.process.wait()
            self._sweep()
            for reader in self._readers:  # a process that escaped the group may hold a pipe
                reader.join(timeout=max(self.kill_grace, 5.0))
        finally:
            if self.pidfile is not None:
                with contextlib.suppress(OSError):
                    self.pidfile.unlink(missing_ok=True)
            self._outcome = self._conclude()
            self._done.set()

    def _due(self) -> tuple[KillReason, str] | None:
        with self._lock:
            if self._kill is not None:
                return self._kill
            now = time.monotonic()
            kill: tuple[KillReason, str] | None = None
            if self._wall_timeout is not None and now - self._started >= self._wall_timeout:
                kill = ("killed_timeout", f"exceeded the {self._wall_timeout:g}s timeout")
            elif (
                self._idle_timeout is not None
                and not self._tools_running
                and now - self._last_output >= self._idle_timeout
            ):
                kill = ("killed_idle", f"no output or tool activity for {self._idle_timeout:g}s")
            if kill is not None:
                self._kill, self._cancelled_at = kill, datetime.now(UTC)
            return kill

    def _next_check(self) -> float:
        now = time.monotonic()
        waits = [0.5]
        if self._wall_timeout is not None:
            waits.append(self._started + self._wall_timeout - now)
        if self._idle_timeout is not None:
            waits.append(self._last_output + self._idle_timeout - now)
        return max(0.01, min(waits))

    def _terminate_group(self) -> None:
        members = [p for p in group_members(self.pid) if p.pid != self.pid]
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pid, signal.SIGTERM)
        deadline = time.monotonic() + self.kill_grace
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=self.kill_grace)
        _, alive = psutil.wait_procs(members, timeout=max(0.0, deadline - time.monotonic()))
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pid, signal.SIGKILL)
        for process in alive:
            with contextlib.suppress(psutil.Error):
                process.kill()
        self.process.wait()
        psutil.wait_procs(alive, timeout=self.kill_grace)

    def _sweep(self) -> None:
        """After the leader ended: whatever of its group is left goes too (S004: nothing
        outlives a run, whatever its end)."""
        kill_group(self.pid, self.kill_grace)

    def _conclude(self) -> ProcessOutcome:
        code = self.process.returncode
        termination: Termination
        if self._kill is not None:
            termination, reason = self._kill
        elif code == 0:
            termination, reason = "completed", None
        else:
            termination, reason = "error", f"exit code {code}"
        return ProcessOutcome(
            termination=termination,
            exit_code=code,
            reason=reason,
            started_at=self.started_at,
            ended_at=datetime.now(UTC),
            cancelled_at=self._cancelled_at,
            stdout_path=self.stdout_path,
            stderr_path=self.stderr_path,
        )


def start_process(
    argv: Sequence[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    log_dir: Path,
    on_line: LineCallback | None = None,
    stdin: Path | None = None,
    wall_timeout: float | None = None,
    idle_timeout: float | None = None,
    kill_grace: float = 5.0,
) -> ProcessHandle:
    """Start ``argv`` with exactly ``env``; raises ``OSError`` when it cannot start (S003-12)."""
    log_dir.mkdir(parents=True, exist_ok=True)
    with (stdin or Path(os.devnull)).open("rb") as source:
        process = subprocess.Popen(
            list(argv),
            cwd=cwd,
            env=dict(env),
            stdin=source,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
            close_fds=True,
        )
    # The startup reaper's clue, should the daemon die before the run ends.
    pidfile: Path | None = log_dir / PIDFILE
    try:
        started = psutil.Process(process.pid).create_time()
    except psutil.Error:
        started = 0.0
    try:
        (log_dir / PIDFILE).write_text(f"{process.pid} {started!r}\n")
    except OSError:
        pidfile = None
    return ProcessHandle(
        process,
        stdout_path=log_dir / "stdout.log",
        stderr_path=log_dir / "stderr.log",
        on_line=on_line,
        wall_timeout=wall_timeout,
        idle_timeout=idle_timeout,
        kill_grace=kill_grace,
        pidfile=pidfile,
    )

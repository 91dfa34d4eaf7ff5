"""Whether an engine runs on a state directory, and how the last one ended: ``cpe status``'s
first line.

The engine's instance lock says whether one runs: ``cpe run`` holds an exclusive ``flock`` on
``<journal>.lock`` from its start to its stop, the kernel drops it when the process dies (even
by ``kill -9``), and the holder writes its pid into the file when it takes it. While it runs,
``cpe run`` touches the file at every watchdog tick (``alive``), so the file's time is when the
holder was last known alive. The journal says how the last engine ended (``EngineState.engine``,
from its ``EngineStarted`` and ``EngineStopped``): a start with no stop after it, and no engine
holding the lock, was a crash, which came after the last sign of life of that engine (its last
event, or its last tick).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from actors.journal import JOURNAL_NAME
from actors.journal_file import InstanceLock
from domain.models import EngineProcess

TIME_FORMAT = "%Y-%m-%d %H:%M:%S UTC"


@dataclass(frozen=True)
class LockFile:
    """The engine's lock file: whether a process holds the lock now, the pid the last holder
    wrote (None: not written yet), and the file's time (its taking, or its last tick)."""

    held: bool
    pid: int | None
    touched: datetime


def _lock_path(state_dir: Path) -> Path:
    path = InstanceLock(str(state_dir / JOURNAL_NAME)).path
    assert path is not None  # a journal on disk has one
    return path


def read_lock(state_dir: Path) -> LockFile | None:
    """The engine's lock file in ``state_dir``, or None when there is none (no engine ran).

    Whether it is held is seen with a shared lock, tried once and let go at once: this never
    waits and writes nothing. A ``cpe run``, or a request journaled while no engine runs,
    taking the lock in that instant finds it busy and tries again (both wait for a holder of a
    moment)."""
    try:
        fd = os.open(_lock_path(state_dir), os.O_RDONLY)
    except OSError:  # none yet (or not ours to read: then nothing can be said)
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            fcntl.flock(fd, fcntl.LOCK_UN)
            held = False
        except BlockingIOError:
            held = True
        written = os.pread(fd, 32, 0).decode(errors="replace").partition(" ")[0].strip()
        touched = datetime.fromtimestamp(os.fstat(fd).st_mtime, UTC)
        return LockFile(held, int(written) if written.isdecimal() else None, touched)
    finally:
        os.close(fd)


def alive(state_dir: Path) -> None:
    """The running engine's tick: the lock file's time says it was alive now (after a
    ``kill -9``, ``cpe status`` tells when it was last seen alive)."""
    with contextlib.suppress(OSError):  # a state directory gone or read-only: the engine says so
        os.utime(_lock_path(state_dir))


@dataclass(frozen=True)
class EngineStatus:
    """``line``: whether an engine runs and since when, or how the last one ended.
    ``stopped_at``: when no engine runs, when the last one stopped as far as is known (a run it
    left active lasted until then); None while one runs, or when none ever ran."""

    line: str
    running: bool
    stopped_at: datetime | None = None


def engine_status(
    lock: LockFile | None, engine: EngineProcess | None, last_event: datetime | None
) -> EngineStatus:
    """The status from the engine's ``lock`` file, the journal's record of the last
    ``engine``, and when the last event the engine journaled was written."""
    if lock is not None and lock.held:
        since = lock.touched  # it took the lock then, and has not journaled its start yet
        if engine is not None and engine.pid == lock.pid and engine.stopped_at is None:
            since = engine.started_at or since
        pid = "?" if lock.pid is None else str(lock.pid)
        return EngineStatus(f"engine running (pid {pid}, since {_at(since)})", running=True)
    if engine is not None and engine.stopped_at is not None and engine.how is not None:
        reason = " ".join(engine.reason.split())[:200]
        how = f"{engine.how}: {reason}" if reason else engine.how
        line = f"engine not running (last stop {_at(engine.stopped_at)}, {how})"
        return EngineStatus(line, running=False, stopped_at=engine.stopped_at)
    signs = [last_event] if last_event is not None else []
    if lock is not None and engine is not None and lock.pid == engine.pid:
        signs.append(lock.touched)  # its last tick
    if not signs:
        return EngineStatus("engine not running (never started on this state)", running=False)
    seen = max(signs)
    if engine is not None:  # started, and never said it stopped: it died
        line = f"engine not running (last stop after {_at(seen)}, crashed)"
    else:  # a journal from before engines journaled their starts and stops
        line = f"engine not running (its last event {_at(seen)})"
    return EngineStatus(line, running=False, stopped_at=seen)


def _at(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime(TIME_FORMAT)

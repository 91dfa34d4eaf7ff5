"""The journal's file on disk: the checks before an engine opens it (a lost journal is not
silently replaced; the state directory takes a new file), what sqlite's errors on it mean (a
disk that refuses a write, a damaged file, and what to do about each), and the lock that keeps
one engine per journal (``InstanceLock``)."""

from __future__ import annotations

import fcntl
import os
import sqlite3
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

from domain.errors import JournalError, JournalInUseError, JournalIOError


def check_journal(path: Path, *, start_over: bool = False) -> Path | None:
    """Refuse to start on a journal that was lost: missing or holding no event while agent runs
    of an earlier engine are on disk (``runs/`` beside it). Starting afresh would plan the specs
    again and forget every attempt; the journal cannot be rebuilt from the tracker alone.

    With ``start_over`` (``cpe run --new-journal``) the journal files are set aside (renamed
    with a ``.old-<time>`` suffix) and a new one is started; returns where they went."""
    _writable_directory(path.parent)
    worked = any((path.parent / "runs").glob("*"))
    if start_over:
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
        moved = None
        for suffix in ("", "-wal", "-shm"):
            old = Path(f"{path}{suffix}")
            if old.exists():
                moved = old.rename(Path(f"{path}.old-{stamp}{suffix}"))
        return moved
    if not worked:
        return None
    if _holds_no_event(path):
        raise JournalError(
            f"{path}: the journal is missing or empty, but agent runs of an earlier engine are "
            f"in {path.parent / 'runs'}; starting afresh would plan the specs again. Restore "
            "the journal, or start over deliberately with cpe run --new-journal"
        )
    return None


def _holds_no_event(path: Path) -> bool:
    """Whether the journal at ``path`` is missing or holds no event; read only, it changes
    nothing (a damaged one is left to ``Journal`` to report)."""
    if not path.exists() or (path.stat().st_size == 0 and not Path(f"{path}-wal").exists()):
        return True
    try:
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            return db.execute("SELECT MAX(seq) FROM events").fetchone()[0] is None
        finally:
            db.close()
    except sqlite3.Error as exc:
        return "no such table" in str(exc)


def _writable_directory(directory: Path) -> None:
    """``JournalIOError`` naming ``directory`` unless it is (or can be made) a directory that
    takes a new file: the disk is full, it is read-only, or a file is in the way."""
    try:
        directory.mkdir(parents=True, exist_ok=True)
        probe = directory / f".cpe-write-check-{os.getpid()}"
        probe.write_bytes(b"ok")
        probe.unlink()
    except OSError as exc:
        raise JournalIOError(
            f"{directory}: the state directory cannot be written: {exc.strerror or exc}"
        ) from None


# sqlite's words for a disk that refuses a write (SQLITE_FULL, SQLITE_IOERR, SQLITE_READONLY,
# SQLITE_CANTOPEN): freeing space or fixing the path fixes them, unlike a damaged file.
_IO_WORDS = ("disk is full", "disk i/o error", "readonly database", "unable to open")


def journal_error(message: str, exc: sqlite3.Error) -> JournalError:
    """``exc`` as the journal error it is: ``JournalIOError`` when the disk refused."""
    kind = JournalIOError if any(w in str(exc).lower() for w in _IO_WORDS) else JournalError
    advice = ""
    if isinstance(exc, sqlite3.DatabaseError) and any(w in str(exc) for w in _DAMAGED_WORDS):
        advice = (
            " (the journal is damaged: restore it from a backup, or start over deliberately "
            "with cpe run --new-journal, which sets this one aside)"
        )
    return kind(f"{message}: {exc}{advice}")


# What sqlite says of a file that is not, or no longer, a database it can read.
_DAMAGED_WORDS = ("not a database", "malformed", "corrupt")


ENGINE_HOLDER = "engine"  # the lock file's word after the pid when an engine holds it


class InstanceLock:
    """One engine per journal: an exclusive ``flock`` on ``<journal>.lock``, held from start to
    stop (the kernel drops it when the process dies, even by ``kill -9``). A second engine on
    the same state would assign the same sequence numbers and do the same work twice."""

    def __init__(self, journal_path: str):
        # an in-memory journal is this process's alone: nothing to lock
        self.path = None if journal_path == ":memory:" else Path(f"{journal_path}.lock")
        self._fd: int | None = None

    def acquire(self, wait: float = 0.0, *, engine: bool = False) -> None:
        """Take the lock, trying for up to ``wait`` seconds; ``JournalError`` naming the
        holder's pid when another process (or another engine of this one) has it. ``engine``:
        the holder is an engine (``cpe run``), which the lock file says after its pid: the wait
        is for a short-lived holder (a request journaled while no engine runs), so another
        engine's hold is refused at once rather than waited on."""
        if self.path is None or self._fd is not None:  # held already: by whoever built us
            return
        _writable_directory(self.path.parent)  # a file in the way, a read-only or full disk
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:  # another user's lock file, a read-only or full disk
            raise JournalIOError(
                f"{self.path}: cannot open the lock file that keeps one engine per state "
                f"directory: {exc.strerror or exc}"
            ) from exc
        deadline = time.monotonic() + wait
        pause = threading.Event()  # never set: a bounded pause between two tries
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                pid, _, role = os.pread(fd, 32, 0).decode(errors="replace").partition(" ")
                if time.monotonic() < deadline and role.strip() != ENGINE_HOLDER:
                    pause.wait(0.05)
                    continue
                holder = pid.strip() or "unknown"
                os.close(fd)
                raise JournalInUseError(
                    f"{self.path.with_suffix('')}: in use by another cpe (pid {holder}); one "
                    "engine per state directory"
                ) from None
        os.ftruncate(fd, 0)
        role = f" {ENGINE_HOLDER}" if engine else ""
        os.pwrite(fd, f"{os.getpid()}{role}\n".encode(), 0)
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing the descriptor drops the lock
            self._fd = None

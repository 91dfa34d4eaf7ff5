"""The no-progress breaker's second half: an implementor whose tool calls change nothing in
its worktree, ``limit`` of them in a row, is stopped (the first half, the same tool call
repeated, is counted where each runtime reads its tool calls).

What counts as a change is what ``git status`` sees (files added, changed, removed; ignored
files are not work) and, for each file it lists, its size and modification time, so a further
edit of an already changed file counts too. A run is charged from its first tool call: reading
the code before the first edit counts, so the default limit leaves room for that.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
from pathlib import Path

__all__ = ["ProgressWatch", "worktree_fingerprint"]


def worktree_fingerprint(worktree: Path) -> str | None:
    """A digest of the worktree's changes against its HEAD; None when git cannot say."""
    try:
        done = subprocess.run(
            ["git", "status", "--porcelain=v1", "-z", "--untracked-files=all", "--no-renames"],
            cwd=worktree,
            capture_output=True,
            timeout=60,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    if done.returncode != 0:
        return None
    digest = hashlib.sha256(done.stdout)
    for entry in done.stdout.split(b"\0"):
        if len(entry) < 4:
            continue
        try:
            stat = os.lstat(worktree / os.fsdecode(entry[3:]))
        except OSError:
            continue  # removed: the status line says so
        digest.update(f"\0{stat.st_size}:{stat.st_mtime_ns}".encode())
    return digest.hexdigest()


class ProgressWatch:
    """Counts an implementor's tool calls since its worktree last changed."""

    def __init__(self, worktree: Path, limit: int | None) -> None:
        self.worktree = worktree
        self.limit = limit
        self.last: str | None = None
        self.unchanged = 0

    def tool_call(self) -> str | None:
        """One more tool call: why the run makes no progress, once it reaches the limit."""
        if self.limit is None:
            return None
        now = worktree_fingerprint(self.worktree)
        if now is None:
            return None  # no verdict without git's
        if self.last is not None and now != self.last:
            self.unchanged = 0
        self.last = now
        self.unchanged += 1
        if self.unchanged > self.limit:
            return f"no progress: {self.limit} tool calls in a row changed nothing in the worktree"
        return None

"""One lock per repository for ``git worktree add``, ``remove`` and ``prune``, in this process.

The runtime's worktrees (``adapters.runtime.workspace.worktrees``) and the local pipeline's
checkouts (``adapters.providers.local.pipeline``) both add and remove worktrees of the user's
repository, and the startup reaper prunes them: they share this lock, so neither imports the
other.
"""

from __future__ import annotations

import os
import threading

_WORKTREE_LOCKS_GUARD = threading.Lock()
_WORKTREE_LOCKS: dict[str, threading.Lock] = {}


def worktree_lock(root: str | os.PathLike[str]) -> threading.Lock:
    """The lock every ``git worktree add``, ``remove`` and ``prune`` on the repository at
    ``root`` takes in this process (one per repository, shared by every caller).

    Git does not serialise them: a prune while an add is under way deletes the record the add is
    writing (``.git/worktrees/<name>``, or ``.git/worktrees`` itself once it looks empty), and
    the add fails ("could not create directory of '.git/worktrees/checkout'"). A pipeline's
    checkout racing the startup reaper's prune failed a revision's tests that way.
    """
    key = os.path.realpath(root)
    with _WORKTREE_LOCKS_GUARD:
        return _WORKTREE_LOCKS.setdefault(key, threading.Lock())

"""The isolated ``CODEX_HOME`` of one codex run, placed where codex 0.169.0 accepts it.

Why the place matters. At every start codex makes its helper aliases (``codex-linux-sandbox``,
``apply_patch``: links to its own binary) in a private directory under ``CODEX_HOME`` and puts
that directory first on ``PATH``. It refuses to when ``CODEX_HOME`` lies under the temporary
directory as Rust's ``std::env::temp_dir()`` reads it, ``$TMPDIR`` or else ``/tmp`` (a ``PATH``
entry in a shared temporary directory is what it guards against), warns "Refusing to create
helper binaries under temporary dir" and goes on without them. Its Linux sandbox then breaks
wherever a system ``bwrap`` older than 0.9.0 is on ``PATH`` (Debian 12, Ubuntu 22.04; every
Flatpak user has one): such a bwrap has no ``--argv0``, so codex tells it to exec the helper by
its alias name, and every command fails with ``bwrap: execvp codex-linux-sandbox: No such file
or directory`` (``sandbox.py`` turns that into the run's failure). Without a system bwrap
codex runs its bundled one, which needs no alias.

So an isolated home (the demo's, the tests': their state directory is under ``/tmp``) goes to
the first of these places that is not under codex's temporary directory:

1. ``<state_dir>/homes/<run_id>/.codex``, the run's own state, kept with it (the run's ``HOME``
   is ``<state_dir>/homes/<run_id>``, see ``adapters/runtime/cli/cli_runtime.py``).
2. A private directory (``mkdtemp``: 0700, a name nobody can guess) in ``$XDG_CACHE_HOME/cpe/
   codex-homes`` (``~/.cache/cpe/codex-homes``), or else in ``/var/tmp`` (on every Linux,
   and not what codex calls temporary; a home of ours there is no more exposed than in the
   cache), removed when the run ends (codex's session log is kept with the run's artifacts,
   ``run.py``). A run holds an ``flock`` on its home's lock file while it lives; a home
   whose lock nobody holds belongs to a run whose cpe was killed, and the next home made in the
   same place removes it (codex cleans its own alias directories that way).
3. None: the state directory anyway, marked ``accepted=False``; codex will not make its
   helpers there, and the run's metadata says so.

The user's own codex home (``~/.codex``) is never used for an isolated run.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

import structlog

__all__ = ["CodexHome", "codex_home_of", "default_roots", "under_codex_temp_dir"]

log = structlog.get_logger("cpe.runtime.codex_home")

PREFIX = "cpe-codex-home-"  # every home cpe makes outside a state directory is named so
LOCK = ".cpe-codex-home.lock"  # held (flock) by the run using the home


def under_codex_temp_dir(path: Path, env: Mapping[str, str]) -> bool:
    """Whether codex, started with ``env``, takes ``path`` for a place under the temporary
    directory: its canonical ``CODEX_HOME`` compared, component by component, with
    ``std::env::temp_dir()`` (``$TMPDIR`` as given, else ``/tmp``; an empty ``TMPDIR`` is a
    prefix of every path there)."""
    temp = env.get("TMPDIR", "/tmp")
    return not temp or path.resolve().is_relative_to(temp)


def codex_home_of(env: Mapping[str, str]) -> Path | None:
    """The ``CODEX_HOME`` codex started with ``env`` uses: ``$CODEX_HOME``, else
    ``$HOME/.codex``; None when the environment names neither."""
    if env.get("CODEX_HOME"):
        return Path(env["CODEX_HOME"])
    return Path(env["HOME"]) / ".codex" if env.get("HOME") else None


def default_roots() -> tuple[Path, ...]:
    """Where homes go when the state directory will not do (rule 2 of the module docstring)."""
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return (Path(cache) / "cpe" / "codex-homes", Path("/var/tmp"))


@dataclass
class CodexHome:
    """One run's ``CODEX_HOME``: ``removable`` homes are deleted by :meth:`release`."""

    path: Path
    removable: bool
    accepted: bool
    _lock: IO[bytes] | None = field(default=None, repr=False)

    @classmethod
    def isolated(
        cls,
        state_dir: Path,
        run_id: str,
        env: Mapping[str, str],
        roots: Sequence[Path] | None = None,
    ) -> CodexHome:
        """The home of run ``run_id`` for a codex started with ``env`` (its ``TMPDIR``)."""
        kept = Path(state_dir) / "homes" / run_id / ".codex"
        if not under_codex_temp_dir(kept, env):
            kept.mkdir(parents=True, exist_ok=True)
            return cls(kept, removable=False, accepted=True)
        for root in default_roots() if roots is None else roots:
            if under_codex_temp_dir(root, env):
                continue
            try:
                return cls._make(root, run_id)
            except OSError as exc:
                log.warning("cannot make a codex home here", root=str(root), error=str(exc))
        log.warning(
            "every place for an isolated codex home is under the temporary directory: codex "
            "will not create its helpers, and with a system bubblewrap its commands fail",
            home=str(kept),
            tmpdir=env.get("TMPDIR", "/tmp"),
        )
        kept.mkdir(parents=True, exist_ok=True)
        return cls(kept, removable=False, accepted=False)

    @classmethod
    def _make(cls, root: Path, run_id: str) -> CodexHome:
        root.mkdir(mode=0o700, parents=True, exist_ok=True)
        sweep(root)
        # Made under a hidden name, locked, then renamed: a sweep never sees it unlocked.
        hidden = Path(tempfile.mkdtemp(prefix=f".{PREFIX}{run_id}-", dir=root))
        lock = (hidden / LOCK).open("ab")
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            path = hidden.with_name(hidden.name[1:])
            hidden.rename(path)
        except OSError:
            lock.close()
            shutil.rmtree(hidden, ignore_errors=True)
            raise
        return cls(path, removable=True, accepted=True, _lock=lock)

    def release(self) -> None:
        """The run is over: remove a removable home, then let its lock go. Idempotent."""
        if self.removable and self._lock is not None:
            shutil.rmtree(self.path, ignore_errors=True)
            if self.path.exists():
                log.warning("could not remove a codex home", home=str(self.path))
        if self._lock is not None:
            self._lock.close()
            self._lock = None


def sweep(root: Path) -> list[Path]:
    """Remove the homes in ``root`` that no live run holds (their cpe was killed); the ones
    removed. Only directories of ours: named ``PREFIX…``, owned by this user, not links."""
    removed: list[Path] = []
    uid = os.getuid()
    for entry in root.glob(f"{PREFIX}*"):
        with contextlib.suppress(OSError):
            info = entry.lstat()
            if not entry.is_dir() or entry.is_symlink() or info.st_uid != uid:
                continue
            with (entry / LOCK).open("rb") as lock:
                try:
                    fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    continue  # a live run's
                shutil.rmtree(entry)
                removed.append(entry)
    return removed

"""Where secrets live on disk, and the reads that reach them without naming them.

The guard denies every word that names a protected path (a fragment such as ``.ssh`` or
``.claude/.credentials.json`` anywhere in it). A command can still reach one without naming it:

- by sweeping a directory that holds one: ``grep -r token ~/.config``, ``rg key /root``,
  ``tar czf x.tgz ~``, ``find / -name '*.json' -exec cat {} +`` (:func:`sweeps` says which
  commands read whole trees);
- by a glob that expands into one: ``cat ~/.config/*/hosts.yml``, ``cat /etc/*``;
- through a symlink or ``..`` that resolves into one;
- through the main repository's ``.git``: a linked worktree's ``.git`` is a file naming
  ``<repo>/.git/worktrees/<name>``, and everything else in ``<repo>/.git`` (its ``config`` can
  carry a remote's token or an ``http.extraheader``; its refs are every branch's) is outside
  the worktree's own files: ``cat ../../../.git/config``, ``cat /repo/.git/config``;
- through any repository's git directory, whatever the agent runs in (a linked worktree, the
  main checkout a planner or reviewer runs in, or no repository the guard recognises): its
  ``config`` (and a submodule's, a worktree's ``config.worktree``, a ``credentials`` file a
  credential helper was pointed at) is denied wherever a path resolves to it, ``..`` and links
  followed: ``cat .git/config``, ``head -5 ../../.git/config``, a glob such as
  ``cat ../.git/conf*`` or a tree read whole such as ``grep -r url .git``. A linked worktree's
  own ``.git`` file (``gitdir: …``) holds no secret and stays readable.

A *location* is a protected path made concrete: absolute fragments as they are (``/etc/shadow``,
``/proc/*/environ``), the others under each home directory (the daemon user's, ``/root``, every
``/home/*``, and ``~`` as the shell would expand it).
"""

from __future__ import annotations

import contextlib
import os
import posixpath
import pwd
import re
from collections.abc import Sequence
from fnmatch import fnmatchcase
from pathlib import Path

from adapters.bash_guard.checks import scan, words
from adapters.bash_guard.words import Dyn, Word

__all__ = [
    "HOME_MARK",
    "Locations",
    "Secrets",
    "default_homes",
    "glob_root",
    "home_relative",
    "main_git_dir",
    "sweeps",
]

HOME_MARK = "/\0home"  # what a leading ~ or $HOME becomes: no real path can be it
_GLOB_CHARS = re.compile(r"[*?\[]")
_HOME_VARIABLES = frozenset({"$HOME", "${HOME}"})
# files of a git directory that can hold credentials: its config (a token in a remote's URL,
# an http.extraheader, a credential helper's command), the per-worktree config, a store file
_GIT_DIR_SECRETS = ("config", "config.worktree", "credentials")


def default_homes() -> tuple[str, ...]:
    """The home directories whose credential stores the guard protects by location: the
    user's own (from the password database: an agent's ``HOME`` may be a throwaway one), the
    current ``HOME``, ``/root`` and every ``/home/*``."""
    homes = [os.path.expanduser("~"), "/root", "/home/*"]
    with contextlib.suppress(KeyError, OSError):
        homes.insert(0, pwd.getpwuid(os.getuid()).pw_dir)
    return tuple(dict.fromkeys(posixpath.normpath(h) for h in homes if h))


def main_git_dir(worktree: str) -> tuple[str, str] | None:
    """``(common_dir, own_gitdir)`` of a linked worktree (its ``.git`` is a ``gitdir:`` file),
    resolved; None for a main checkout or anything git would not read."""
    try:
        text = Path(worktree, ".git").read_text(encoding="utf-8", errors="replace")
    except OSError:  # a directory (a main checkout), or no .git at all
        return None
    match = re.match(r"gitdir:\s*(.+?)\s*$", text)
    if match is None:
        return None
    own = os.path.realpath(posixpath.join(worktree, match.group(1)))
    try:
        common = Path(own, "commondir").read_text(encoding="utf-8").strip()
    except OSError:
        common = "../.."
    return os.path.realpath(posixpath.join(own, common)), own


class Locations:
    """Every protected location, and the tests a path, a glob or a swept directory must pass."""

    def __init__(self, fragments: Sequence[str], homes: Sequence[str]) -> None:
        self.locations: list[tuple[str, str]] = []  # (fragment, absolute pattern)
        for fragment in fragments:
            if fragment.startswith("/"):
                self.locations.append((fragment, posixpath.normpath(fragment)))
                continue
            for home in (*homes, HOME_MARK):
                self.locations.append((fragment, posixpath.join(home, fragment.strip("/"))))

    def inside(self, path: str) -> str | None:
        """The fragment whose location ``path`` is, or lies in."""
        for fragment, pattern in self.locations:
            if _at_or_under(path, pattern):
                return fragment
        return None

    def under(self, directory: str) -> str | None:
        """The fragment of a location that lies in ``directory`` (or is it)."""
        for fragment, pattern in self.locations:
            if _at_or_under(directory, pattern) or _holds(directory, pattern):
                return fragment
        return None


class Secrets:
    """The protected locations and, in a linked worktree, the main repository's ``.git``: what
    a path, a glob's directory or a directory a command reads whole must not reach."""

    def __init__(self, fragments: Sequence[str], homes: Sequence[str], root: str | None) -> None:
        self.locations = Locations(fragments, homes)
        self.main_git = main_git_dir(root) if root is not None else None

    def judge(self, path: str, *, glob: bool = False, sweeping: str | None = None) -> str | None:
        """Why ``path`` (resolved; :data:`HOME_MARK` for a home) may not be reached, or None.
        ``glob``: the word is a glob, whose directory is searched; ``sweeping``: the command
        (named) reads everything under the path."""
        fragment = self.locations.inside(path)
        if fragment is not None:
            return f"reaches {fragment}, a protected credential or secret path"
        reason = self._main(path, path)
        if reason is None and glob:
            root = glob_root(path)
            held = self.locations.under(root)
            if held is not None:
                return f"a glob in {shown(root)} can reach {held}, a protected path"
            reason = self._main(root, path, holding=True)
        if reason is None and sweeping is not None:
            held = self.locations.under(path)
            if held is not None:
                return (
                    f"{sweeping} reads everything in {shown(path)}, which holds {held}, a "
                    "protected credential or secret path"
                )
            reason = self._main(path, path, holding=True)
        if reason is None:
            reason = _git_secret(path, glob=glob)
        if reason is None and sweeping is not None and _holds_git_secrets(path):
            reason = (
                f"{sweeping} reads everything in {shown(path)}, a git directory whose config "
                "can hold credentials"
            )
        return reason

    def _main(self, path: str, said: str, *, holding: bool = False) -> str | None:
        """``path`` is in the main repository's ``.git`` (or, ``holding``, above it), and not
        among the worktree's own files there."""
        if self.main_git is None or path.startswith(HOME_MARK):
            return None
        common, own = self.main_git
        if (_at_or_under(path, common) and not _at_or_under(path, own)) or (
            holding and _at_or_under(common, path)
        ):
            return (
                f"{shown(said)} reaches the main repository's .git, outside the worktree's own "
                "files (its config can hold credentials, its refs are every branch's)"
            )
        return None


def _git_secret(path: str, *, glob: bool) -> str | None:
    """Why ``path`` (resolved) may not be reached: it is, or as a glob can match, a file of a
    git directory that can hold credentials (``<dir>/.git/config``, ``.git/config.worktree``,
    ``.git/credentials``, ``.git/worktrees/<name>/config.worktree``, a submodule's
    ``.git/modules/<name>/config``), in any repository. A glob matches a ``.git`` component
    only with its leading dot written out, as Bash's do."""
    parts = path.split("/")
    for k, part in enumerate(parts[:-1]):
        if (
            part.startswith(".")
            and _match(".git", part, glob)
            and _secret_tail(parts[k + 1 :], glob)
        ):
            return (
                f"{shown(path)} is in a git directory and can hold credentials (a token in a "
                "remote's URL, an http.extraheader)"
            )
    return None


def _secret_tail(tail: list[str], glob: bool) -> bool:
    """What follows a ``.git`` component names one of its credential-holding files."""
    last = tail[-1]
    if len(tail) == 1:
        return any(_match(name, last, glob) for name in _GIT_DIR_SECRETS)
    if len(tail) == 3 and _match("worktrees", tail[0], glob):
        return _match("config.worktree", last, glob)
    return len(tail) >= 3 and _match("modules", tail[0], glob) and _match("config", last, glob)


def _match(name: str, part: str, glob: bool) -> bool:
    return fnmatchcase(name, part) if glob else name == part


def _holds_git_secrets(directory: str) -> bool:
    """A tree read whole from ``directory`` reaches a git directory's config: it is a ``.git``
    directory, or its ``worktrees`` or ``modules`` (or one of those's entries)."""
    parts = directory.rstrip("/").split("/")
    for k, part in enumerate(parts):
        tail = parts[k + 1 :]
        if part != ".git":
            continue
        if not tail or tail[0] == "modules" or (tail[0] == "worktrees" and len(tail) <= 2):
            return True
    return False


def shown(path: str) -> str:
    """A path as the user wrote it: ``~`` for a home."""
    return "~" + path[len(HOME_MARK) :] if path.startswith(HOME_MARK) else path


def _at_or_under(path: str, pattern: str) -> bool:
    """``path`` is the location ``pattern`` (``*`` within one component) or lies inside it."""
    parts, wanted = path.rstrip("/").split("/"), pattern.rstrip("/").split("/")
    return len(parts) >= len(wanted) and all(
        fnmatchcase(part, want) for part, want in zip(parts, wanted, strict=False)
    )


def _holds(directory: str, pattern: str) -> bool:
    """The directory is an ancestor of (some match of) ``pattern``."""
    parts, wanted = directory.rstrip("/").split("/"), pattern.rstrip("/").split("/")
    if directory.rstrip("/") == "":
        return True  # the root holds everything
    return len(parts) < len(wanted) and all(
        fnmatchcase(part, want) for part, want in zip(parts, wanted, strict=False)
    )


def home_relative(word: Word) -> str | None:
    """``word`` with a leading unquoted ``~`` or a leading ``$HOME`` made :data:`HOME_MARK`;
    None when it starts with neither."""
    first = word.parts[0] if word.parts else None
    if isinstance(first, Dyn) and first.raw in _HOME_VARIABLES:
        rest = Word(word.parts[1:]).value if len(word.parts) > 1 else ""
        return None if rest is None else HOME_MARK + rest
    if word.starts_unquoted("~"):
        value = word.value or ""
        head, slash, rest = value.partition("/")
        if head == "~":
            return HOME_MARK + slash + rest
    return None


def glob_root(value: str) -> str:
    """The directory a glob searches: its components before the first with a glob character."""
    parts = value.split("/")
    for k, part in enumerate(parts):
        if _GLOB_CHARS.search(part):
            return "/".join(parts[:k]) or ("/" if value.startswith("/") else ".")
    return value


_GREP_RECURSE = words("-r -R --recursive --dereference-recursive")
_ALWAYS = frozenset({"rg", "ag", "ack", "ack-grep", "find", "rsync", "ugrep"})


def sweeps(name: str, args: Sequence[Word]) -> bool:
    """Whether the command reads every file under the directories it is given."""
    values = [w.value or "" for w in args]
    if name in _ALWAYS:
        return True
    if name in {"grep", "egrep", "fgrep", "zgrep"}:
        flags = {flag for flag, _ in scan(args, words("-e -f -m -A -B -C -d")).flags}
        return (
            bool(flags & _GREP_RECURSE)
            or "--directories=recurse" in values
            or ("-d" in values and "recurse" in values)
        )
    if name in {"cp", "scp"}:
        flags = {flag for flag, _ in scan(args, words("-t -S")).flags}
        return bool(flags & words("-r -R -a --recursive --archive"))
    if name == "tar":
        first = values[0] if values else ""
        return "c" in first.lstrip("-") or any(v in {"-c", "--create"} for v in values)
    if name in {"zip", "7z", "7za"}:
        return True
    if name == "git":
        return "--no-index" in values
    return False

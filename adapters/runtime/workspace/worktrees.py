"""Implementor worktrees: ``<repo>/.worktrees/<branch>``, created fresh and removed on every ending.

Worktree management (S001-01 to S001-04): a stale worktree at the target path is removed first, the
worktree is created with ``git worktree add <path> -B <branch> <default_branch>`` (so an existing
branch is force-reset to the default branch), a setup command runs inside it, and when the
session ends both the worktree and the local branch are removed — the patch is the durable
artifact, not the branch.

Git runs through GitPython's ``git.Git(cwd).execute`` with explicit argv (no keyword-to-flag
translation); every GitPython or OS failure leaves as a ``WorktreeError`` (``from exc``).

Concurrency: sessions create and remove worktrees from different threads. ``git worktree add``,
``git worktree remove``, ``git branch -D`` and ``prune`` all write shared metadata
(``.git/worktrees/``, ``packed-refs``, ref locks) and fail rather than wait when another git
process holds a lock, so every such call runs under one lock per repository (shared by all
managers in the process). The setup command, which can take minutes, runs outside it.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import threading
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import git
import structlog

from actors.crashpoints import crashpoint
from adapters.providers.git import worktree_lock
from adapters.runtime.process.agent_env import build_agent_env
from adapters.runtime.workspace.setup_command import pid_file, reap_setups, run_setup_command
from domain.errors import CpeError, WorktreeError

log = structlog.get_logger("cpe.runtime.worktrees")

__all__ = ["ReapReport", "Worktree", "WorktreeManager", "run_git"]

WORKTREES_DIR = ".worktrees"
_EXCLUDE_LINE = f"/{WORKTREES_DIR}/"


@dataclass(frozen=True)
class Worktree:
    """A worktree this manager created: where it is and the local branch checked out in it."""

    path: Path
    branch: str


@dataclass(frozen=True)
class ReapReport:
    """What the startup reaper removed, and what it could not (one message per failure)."""

    removed_worktrees: tuple[Path, ...] = ()
    deleted_branches: tuple[str, ...] = ()
    failures: tuple[str, ...] = ()


def run_git(
    cwd: str | os.PathLike[str],
    *args: str,
    env: Mapping[str, str] | None = None,
    error: type[CpeError] = WorktreeError,
    strip: bool = True,
) -> str:
    """Run ``git <args>`` in ``cwd``, return stdout; a failure raises ``error`` with git's stderr.

    ``env`` is added to the inherited environment (GitPython also forces ``LC_ALL=C`` so the
    messages we surface are stable). ``strip=False`` keeps the final newline, which a patch needs.
    """
    if not os.path.isdir(cwd):
        # GitPython silently runs in the process's own directory when ``cwd`` is missing: that
        # would aim git at whatever repository the daemon happens to be started from.
        raise error(f"git {args[0] if args else ''}: {cwd} is not a directory")
    executable = str(git.Git.GIT_PYTHON_GIT_EXECUTABLE or "git")
    try:
        status, out, err = git.Git(cwd).execute(
            [executable, *args],
            with_extended_output=True,
            with_exceptions=False,
            env=env,
            strip_newline_in_stdout=strip,
        )
    except (git.GitError, OSError) as exc:
        raise error(f"git {args[0] if args else ''} could not run in {cwd}: {exc}") from exc
    if status != 0:
        raise error(f"git {' '.join(args)} failed in {cwd} (exit {status}): {err.strip()}")
    return out


@dataclass(frozen=True)
class _Entry:
    """One record of ``git worktree list --porcelain``."""

    path: str  # realpath, for comparison with our own paths
    branch: str | None  # short name, None when detached


class WorktreeManager:
    """Creates, removes and reaps the Implementor worktrees of one repository.

    ``setup_command`` runs inside each new worktree (a string runs through the shell, as an
    operator writes it in ``supervisor.toml``; a sequence runs as argv). It gets ``setup_env``,
    by default the agent environment of :func:`build_agent_env` — the command runs code from
    the repository (install scripts), so it gets no more secrets than an agent would.
    """

    def __init__(
        self,
        repo_root: str | os.PathLike[str],
        default_branch: str,
        setup_command: Sequence[str] | str | None = None,
        setup_timeout: float = 600.0,
        *,
        setup_env: Mapping[str, str] | None = None,
        hooks: Mapping[str, tuple[str, float]] | None = None,
    ) -> None:
        self.repo_root = Path(repo_root).resolve()
        self.default_branch = default_branch
        self.setup_command = setup_command
        self.setup_timeout = setup_timeout
        self.setup_env = dict(setup_env) if setup_env is not None else None
        # The other workspace hooks by name (before_run, after_run, before_remove): a shell
        # command and its timeout each; run by ``run_hook``, before_remove by ``remove``.
        self.hooks = {name: hook for name, hook in (hooks or {}).items() if hook[0]}
        self.worktrees_dir = self.repo_root / WORKTREES_DIR
        self._lock = worktree_lock(self.repo_root)
        self._excluded = False

    # ------------------------------------------------------------------ public API

    def path_for(self, branch_name: str) -> Path:
        """The worktree path of ``branch_name``; refuses names that escape ``.worktrees/``."""
        if not branch_name or branch_name.startswith(("-", "@")):
            raise WorktreeError(f"invalid branch name {branch_name!r}")
        path = self.worktrees_dir / branch_name
        root = os.path.realpath(self.worktrees_dir)
        if os.path.commonpath([root, str(self.repo_root)]) != str(self.repo_root):
            raise WorktreeError(f"{self.worktrees_dir} resolves outside the repository ({root})")
        resolved = os.path.realpath(path)
        if resolved == root or os.path.commonpath([root, resolved]) != root:
            raise WorktreeError(f"branch {branch_name!r} would put a worktree outside {root}")
        return path

    def create(self, branch_name: str, cancel: threading.Event | None = None) -> Worktree:
        """Create ``.worktrees/<branch_name>`` on a branch force-reset to the default branch.

        Raises WorktreeError when the name is invalid, a stale worktree cannot be removed, git
        refuses, or the setup command fails or times out (the worktree and branch are then
        removed before raising, so a failed start leaves nothing behind).
        """
        self._validate_branch(branch_name)
        path = self.path_for(branch_name)
        worktree = Worktree(path=path, branch=branch_name)
        with self._lock:
            self._ensure_excluded()
            self._remove_stale(worktree)
            self._fetch_remote_base()
            run_git(
                self.repo_root, "worktree", "add", "--quiet", str(path), "-B", branch_name,
                self.default_branch,
            )  # fmt: skip
        try:
            self._run_setup(path, branch_name, cancel)
        except WorktreeError as setup_error:
            try:
                self.remove(worktree)
            except WorktreeError as cleanup_error:
                raise WorktreeError(f"{setup_error}; cleanup failed: {cleanup_error}") from None
            raise
        return worktree

    def _fetch_remote_base(self) -> None:
        """A worktree that starts at a remote-tracking branch (``origin/main``: the code host
        merges, not this clone) starts at its newest head: fetched first, so an item unblocked
        by a merge a moment ago builds on it. A failed fetch starts at the last fetched head."""
        remote, sep, branch = self.default_branch.partition("/")
        repo = git.Repo(self.repo_root)
        if not sep or f"refs/remotes/{self.default_branch}" not in {r.path for r in repo.refs}:
            return
        try:
            run_git(
                self.repo_root, "fetch", "--quiet", "--no-tags", "--no-write-fetch-head", remote,
                f"+refs/heads/{branch}:refs/remotes/{remote}/{branch}",
                env={"GIT_TERMINAL_PROMPT": "0"},
            )  # fmt: skip
        except WorktreeError as exc:
            log.warning(
                "cannot fetch the base of a worktree; it starts at the last one", error=str(exc)
            )

    def remove(self, worktree: Worktree) -> None:
        """Remove the worktree and delete its local branch. Idempotent: gone is success."""
        path = self.path_for(worktree.branch)
        if os.path.realpath(worktree.path) != os.path.realpath(path):
            # Never remove a path we did not derive ourselves: rmtree on a caller's path is how
            # a bug deletes a home directory.
            raise WorktreeError(f"{worktree.path} is not the worktree of {worktree.branch!r}")
        self.run_hook(worktree, "before_remove", required=False)
        crashpoint("worktree.before_remove")
        with self._lock:
            self._remove_worktree(path, self._entries())
            crashpoint("worktree.after_remove")
            self._delete_branch(worktree.branch)
            self._remove_empty_parents(path)

    def reap(self, prefix: str = "cpe/", keep: Collection[str] = frozenset()) -> ReapReport:
        """Startup reaper: remove what a crashed run left behind, except the branches in ``keep``.

        Removes every worktree under ``.worktrees/`` (registered or a bare leftover directory)
        whose branch or relative path is not in ``keep``, and every local branch under
        ``prefix`` not in ``keep``. The default branch is never deleted. Failures (a locked
        worktree, a branch checked out elsewhere) are collected in the report, not raised, so
        one stuck leftover does not stop the daemon from starting.
        """
        if not prefix:
            raise ValueError("reap needs a branch prefix: an empty one would match every branch")
        removed: list[Path] = []
        deleted: list[str] = []
        failures: list[str] = []
        root = os.path.realpath(self.worktrees_dir)
        reap_setups(self.worktrees_dir)  # before their worktrees go
        with self._lock:
            self._ensure_excluded()
            run_git(self.repo_root, "worktree", "prune")
            kept_paths: set[str] = set()
            for entry in self._entries():
                if os.path.commonpath([root, entry.path]) != root or entry.path == root:
                    continue
                relative = os.path.relpath(entry.path, root)
                if relative in keep or entry.branch in keep:
                    kept_paths.add(entry.path)
                    continue
                try:
                    run_git(self.repo_root, "worktree", "remove", "--force", entry.path)
                    removed.append(Path(entry.path))
                except WorktreeError as exc:
                    failures.append(str(exc))
                    kept_paths.add(entry.path)
            leftovers, empty_candidates = self._scan(kept_paths)
            for leftover in (d for d in leftovers if os.path.relpath(d, root) not in keep):
                shutil.rmtree(leftover, ignore_errors=True)
                removed.append(Path(leftover))
            run_git(self.repo_root, "worktree", "prune")
            for branch in self._local_branches(prefix):
                if branch in keep or branch == self.default_branch:
                    continue
                try:
                    run_git(self.repo_root, "branch", "-D", branch)
                    deleted.append(branch)
                except WorktreeError as exc:
                    failures.append(str(exc))
            for directory in reversed(empty_candidates):  # deepest first
                with contextlib.suppress(OSError):
                    os.rmdir(directory)  # fails, as intended, on anything not empty
        return ReapReport(tuple(removed), tuple(deleted), tuple(failures))

    # ------------------------------------------------------------------ creation helpers

    def _validate_branch(self, branch_name: str) -> None:
        if branch_name in {self.default_branch, "HEAD"}:
            raise WorktreeError(f"refusing to use {branch_name!r} as a worktree branch")
        self.path_for(branch_name)  # the cheap checks first: a leading '-' would be an option
        # --branch also expands "@{-1}"-style shorthands; demanding the name back unchanged
        # rules those out, so the branch we create is exactly the one we were asked for.
        normalized = run_git(self.repo_root, "check-ref-format", "--branch", branch_name)
        if normalized != branch_name:
            raise WorktreeError(f"invalid branch name {branch_name!r}")

    def _ensure_excluded(self) -> None:
        """Check ``repo_root`` is the top of a work tree; make git ignore ``.worktrees/`` there.

        The ignore rule goes into the repository's ``info/exclude``, never into the user's
        ``.gitignore``. Done once per manager, on first use.
        """
        if self._excluded:
            return
        out = run_git(self.repo_root, "rev-parse", "--show-toplevel", "--git-common-dir")
        top, common_dir = out.splitlines()
        if os.path.realpath(top) != str(self.repo_root):
            # A subdirectory would put .worktrees/ inside the tree and run git on the parent.
            raise WorktreeError(f"{self.repo_root} is not the top of a git work tree ({top} is)")
        common = Path(common_dir)
        exclude = (common if common.is_absolute() else self.repo_root / common) / "info/exclude"
        try:
            text = exclude.read_text(encoding="utf-8") if exclude.exists() else ""
            if _EXCLUDE_LINE not in text.splitlines():
                exclude.parent.mkdir(parents=True, exist_ok=True)
                separator = "" if not text or text.endswith("\n") else "\n"
                with exclude.open("a", encoding="utf-8") as handle:
                    handle.write(f"{separator}# cpe: agent worktrees\n{_EXCLUDE_LINE}\n")
        except OSError as exc:
            raise WorktreeError(f"cannot update {exclude}: {exc}") from exc
        self._excluded = True

    def _remove_stale(self, worktree: Worktree) -> None:
        """Clear the target path and any worktree of ours that still holds the branch."""
        target = os.path.realpath(worktree.path)
        root = os.path.realpath(self.worktrees_dir)
        entries = self._entries()
        for entry in entries:
            holds_branch = entry.branch == worktree.branch and entry.path != target
            if holds_branch and os.path.commonpath([root, entry.path]) == root:
                self._remove_worktree(Path(entry.path), entries)
        self._remove_worktree(worktree.path, entries)

    def run_hook(
        self,
        worktree: Worktree,
        name: str,
        *,
        required: bool,
        cancel: threading.Event | None = None,
    ) -> None:
        """Run the workspace hook ``name`` in the worktree, as the setup command runs (its own
        process group, a pid file the reaper finds, its timeout). A ``required`` hook's failure
        raises ``WorktreeError``; another's is logged and the run goes on."""
        hook = self.hooks.get(name)
        if hook is None or not worktree.path.is_dir():
            return
        command, timeout = hook
        env = self.setup_env if self.setup_env is not None else build_agent_env(os.environ)
        try:
            run_setup_command(
                command,
                worktree.path,
                env,
                timeout,
                pidfile=pid_file(self.worktrees_dir, f"{worktree.branch}--{name}"),
                cancel=cancel,
                what=f"the {name} hook",
            )
        except WorktreeError as exc:
            if required:
                raise
            log.warning("workspace hook failed", hook=name, branch=worktree.branch, error=str(exc))

    def _run_setup(self, path: Path, branch: str, cancel: threading.Event | None) -> None:
        if self.setup_command:
            env = self.setup_env if self.setup_env is not None else build_agent_env(os.environ)
            run_setup_command(
                self.setup_command,
                path,
                env,
                self.setup_timeout,
                pidfile=pid_file(self.worktrees_dir, branch),
                cancel=cancel,
            )

    # ------------------------------------------------------------------ removal helpers

    def _entries(self) -> list[_Entry]:
        entries: list[_Entry] = []
        path: str | None = None
        branch: str | None = None
        out = run_git(self.repo_root, "worktree", "list", "--porcelain")
        for line in [*out.splitlines(), ""]:
            if line.startswith("worktree "):
                path, branch = os.path.realpath(line[len("worktree ") :]), None
            elif line.startswith("branch "):
                branch = line[len("branch ") :].removeprefix("refs/heads/")
            elif not line and path is not None:
                entries.append(_Entry(path, branch))
                path = None
        return entries

    def _remove_worktree(self, path: Path, entries: list[_Entry]) -> None:
        """Remove what sits at ``path``: a registered worktree, a dangling record, a bare dir."""
        real = os.path.realpath(path)
        registered = any(entry.path == real for entry in entries)
        if registered and os.path.isdir(real):
            run_git(self.repo_root, "worktree", "remove", "--force", real)
        elif registered:
            run_git(self.repo_root, "worktree", "prune")  # the directory went, the record stayed
        elif os.path.lexists(path):
            # Under .worktrees/ but unknown to git (its record was pruned): ours, and in the way,
            # unless live worktrees sit below it (a stale ".worktrees/cpe" over ".worktrees/cpe/x").
            if any(os.path.commonpath([real, entry.path]) == real for entry in entries):
                raise WorktreeError(f"cannot remove {path}: it contains other worktrees")
            try:
                if os.path.isdir(path) and not os.path.islink(path):
                    shutil.rmtree(path)
                else:
                    os.unlink(path)
            except OSError as exc:
                raise WorktreeError(f"cannot remove stale directory {path}: {exc}") from exc

    def _delete_branch(self, branch: str) -> None:
        """``git branch -D``; a branch that is already gone is success (remove is idempotent)."""
        try:
            run_git(self.repo_root, "branch", "-D", branch)
        except WorktreeError:
            try:
                run_git(self.repo_root, "show-ref", "--verify", "--quiet", f"refs/heads/{branch}")
            except WorktreeError:
                return
            raise

    def _local_branches(self, prefix: str) -> list[str]:
        out = run_git(self.repo_root, "for-each-ref", "--format=%(refname:strip=2)", "refs/heads/")
        return [name for name in out.splitlines() if name.startswith(prefix)]

    def _remove_empty_parents(self, path: Path) -> None:
        """Branch names with '/' leave empty directories (``.worktrees/cpe/``) behind: tidy them."""
        parent = path.parent
        with contextlib.suppress(OSError):  # stops at the first directory that is not empty
            while parent != self.worktrees_dir and self.worktrees_dir in parent.parents:
                parent.rmdir()
                parent = parent.parent

    def _scan(self, kept: set[str]) -> tuple[list[str], list[str]]:
        """Under ``.worktrees/``: dirs with a ``.git`` git forgot, and the plain dirs in between.

        Kept worktrees are not entered: they can hold 10,000 files.
        """
        leftovers: list[str] = []
        between: list[str] = []
        if not self.worktrees_dir.is_dir():
            return leftovers, between
        for current, dirs, files in os.walk(self.worktrees_dir):
            if os.path.realpath(current) in kept:
                dirs[:] = []
            elif ".git" in files or ".git" in dirs:
                leftovers.append(current)
                dirs[:] = []
            elif current != str(self.worktrees_dir):
                between.append(current)
        return leftovers, between

"""Git plumbing shared by the adapters that manage a repository (local provider, specs).

Every call is a fresh ``git`` process (``subprocess``, in git's C locale as GitPython's command
runner runs it): GitPython's object database keeps persistent ``cat-file`` processes that are not
safe to share between actor threads, and importing GitPython for its runner alone would cost
every ``cpe`` command that reads the local tracker some 30 ms. Nothing here touches a user's
index or working tree: trees are built in a temporary index (``GIT_INDEX_FILE``) and refs are
moved with ``update-ref``. A failed git command becomes a domain error carrying git's own
message; failing to run git at all, a ``ProviderError``.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from domain.errors import ConflictError, NotFoundError, PatchError, ProviderError

# Commits the provider makes carry their own identity, so they never depend on (or fail for lack
# of) the user's git config.
DEFAULT_IDENTITY = ("Control Plane Engine", "cpe@localhost")

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


@dataclass(frozen=True)
class GitResult:
    status: int
    stdout: bytes
    stderr: str

    @property
    def text(self) -> str:
        return self.stdout.decode("utf-8", "surrogateescape")

    @property
    def line(self) -> str:
        return self.text.strip()


@dataclass(frozen=True)
class Worktree:
    path: Path
    head: str | None
    branch: str | None  # the full ref (refs/heads/main), None when detached


class GitRepo:
    """A non-bare repository, addressed by its top-level directory."""

    def __init__(self, root: Path, identity: tuple[str, str] = DEFAULT_IDENTITY) -> None:
        if not root.is_dir():
            raise NotFoundError(f"{root} is not a directory")
        self._cwd = root
        found = self.run_status("rev-parse", "--show-toplevel")
        if found.status != 0 or not found.line:
            raise NotFoundError(f"{root} is not inside a git working tree: {found.stderr.strip()}")
        self.root = Path(found.line)
        self._cwd = self.root
        name, email = identity
        self._identity = {
            "GIT_AUTHOR_NAME": name,
            "GIT_AUTHOR_EMAIL": email,
            "GIT_COMMITTER_NAME": name,
            "GIT_COMMITTER_EMAIL": email,
        }

    # ------------------------------------------------------------------ running git

    def run(
        self,
        *args: str,
        env: Mapping[str, str] | None = None,
        error: type[ProviderError] | type[PatchError] = ProviderError,
    ) -> GitResult:
        """Run git; a non-zero exit raises ``error`` with git's own message."""
        result = self.run_status(*args, env=env)
        if result.status != 0:
            raise error(
                f"git {_subcommand(args)} failed: {result.stderr.strip() or result.text.strip()}"
            )
        return result

    def run_status(
        self, *args: str, env: Mapping[str, str] | None = None, timeout: float | None = None
    ) -> GitResult:
        """Run git and return its exit status; only a failure to run git at all raises.
        ``timeout``: seconds before git is killed (a fetch from a remote that hangs)."""
        try:
            done = subprocess.run(
                ["git", *args],
                cwd=self._cwd,
                env={**os.environ, "LANGUAGE": "C", "LC_ALL": "C", **(env or {})},
                stdin=subprocess.DEVNULL,
                capture_output=True,
                timeout=timeout,
                check=False,
            )
        except subprocess.TimeoutExpired as exc:  # git was killed
            out = exc.stdout or b""
            return GitResult(-9, out, f"git {_subcommand(args)} did not complete in {timeout:g} s")
        except OSError as exc:
            raise ProviderError(f"cannot run git: {exc}", transient=False) from exc
        stderr = done.stderr.decode("utf-8", "surrogateescape").removesuffix("\n")
        return GitResult(done.returncode, done.stdout, stderr)

    # ------------------------------------------------------------------ refs and objects

    def resolve(self, rev: str) -> str | None:
        """The commit ``rev`` names, or None."""
        found = self.run_status(
            "rev-parse", "--verify", "--quiet", "--end-of-options", f"{rev}^{{commit}}"
        )
        return found.line if found.status == 0 else None

    def branch_head(self, branch: str) -> str:
        sha = self.resolve(f"refs/heads/{branch}")
        if sha is None:
            raise NotFoundError(f"branch {branch!r} does not exist in {self.root}")
        return sha

    def tree_of(self, commit: str) -> str:
        return self.run("rev-parse", "--verify", "--end-of-options", commit + "^{tree}").line

    def is_ancestor(self, ancestor: str, descendant: str) -> bool:
        found = self.run_status("merge-base", "--is-ancestor", ancestor, descendant)
        if found.status not in (0, 1):
            raise ProviderError(f"git merge-base failed: {found.stderr.strip()}")
        return found.status == 0

    def merge_base(self, a: str, b: str) -> str | None:
        found = self.run_status("merge-base", a, b)
        return found.line if found.status == 0 and found.line else None

    def check_branch_name(self, branch: str) -> None:
        if self.run_status("check-ref-format", "--branch", branch).status != 0:
            raise ProviderError(f"{branch!r} is not a valid branch name", status=422)

    def commit_tree(self, tree: str, parents: list[str], message: str) -> str:
        args = ["commit-tree", tree]
        for parent in parents:
            args += ["-p", parent]
        return self.run(*args, "-m", message, env=self._identity).line

    def update_ref(self, ref: str, new: str, old: str | None = None, reason: str = "cpe") -> None:
        """Move ``ref`` to ``new``; with ``old``, only if it still points there, so a concurrent
        writer is detected instead of overwritten (``ConflictError``)."""
        args = ["update-ref", "-m", reason, ref, new]
        if old is not None:
            args.append(old)
        self.run(*args, error=ConflictError)

    def worktrees(self) -> list[Worktree]:
        out = self.run("worktree", "list", "--porcelain", "-z").stdout.decode("utf-8", "replace")
        found: list[Worktree] = []
        path: Path | None = None
        head: str | None = None
        branch: str | None = None
        for field in [*out.split("\0"), ""]:
            if field == "":
                if path is not None:
                    found.append(Worktree(path, head, branch))
                path, head, branch = None, None, None
            elif field.startswith("worktree "):
                path = Path(field.removeprefix("worktree "))
            elif field.startswith("HEAD "):
                head = field.removeprefix("HEAD ")
            elif field.startswith("branch "):
                branch = field.removeprefix("branch ")
        return found

    def checked_out_at(self, branch: str) -> Worktree | None:
        ref = f"refs/heads/{branch}"
        return next((w for w in self.worktrees() if w.branch == ref), None)

    # ------------------------------------------------------------------ patches

    def tree_with_patch(self, base_commit: str, patch: str) -> str:
        """The tree of ``base_commit`` with ``patch`` applied, built in a temporary index.

        A plain apply first; if the base has moved under the patch, a three-way apply using the
        blob ids the patch records (git diff's ``index`` lines), as ``git am -3`` would.
        """
        if not patch.strip():
            raise PatchError("the patch is empty")
        with tempfile.TemporaryDirectory(prefix="cpe-index-") as tmp:
            patch_file = Path(tmp) / "patch"
            # surrogateescape round-trips bytes that a non-UTF-8 diff was decoded with.
            patch_file.write_bytes(patch.encode("utf-8", "surrogateescape"))
            env = {"GIT_INDEX_FILE": str(Path(tmp) / "index")}
            first: GitResult | None = None
            for mode in ((), ("--3way",)):
                self.run("read-tree", base_commit, env=env)
                applied = self.run_status(
                    "apply", "--cached", "--binary", "--whitespace=nowarn", *mode,
                    str(patch_file), env=env,
                )  # fmt: skip
                if applied.status == 0:
                    written = self.run_status("write-tree", env=env)
                    if written.status == 0:
                        return written.line
                first = first or applied
            reason = first.stderr.strip() if first else "unknown error"
            from adapters.providers.git_conflicts import index_conflicts  # noqa: PLC0415 - imports us

            files, detail = index_conflicts(self, env)  # what the three-way apply left
            raise PatchError(
                f"the patch does not apply to {base_commit[:12]}"
                + (f": it conflicts in {', '.join(files)}" if files else f": {reason}"),
                files=files,
                detail=detail,
            )


def _subcommand(args: tuple[str, ...]) -> str:
    """The git command ``args`` run (``worktree`` in ``-c core.hooksPath=x worktree add``)."""
    rest = list(args)
    while rest and rest[0].startswith("-"):
        rest = rest[2:] if rest[0] in ("-c", "-C") else rest[1:]
    return rest[0] if rest else " ".join(args)


def detect_default_branch(repo: GitRepo) -> str:
    """The branch revisions are based on and merged into.

    ``origin/HEAD`` names it when the repository is a clone; otherwise ``init.defaultBranch``,
    then ``main`` or ``master``, then whatever is checked out.
    """
    candidates: list[str] = []
    remote_head = repo.run_status("symbolic-ref", "--quiet", "refs/remotes/origin/HEAD")
    if remote_head.status == 0:
        candidates.append(remote_head.line.removeprefix("refs/remotes/origin/"))
    configured = repo.run_status("config", "--get", "init.defaultBranch")
    if configured.status == 0 and configured.line:
        candidates.append(configured.line)
    candidates += ["main", "master"]
    for name in candidates:
        if repo.resolve(f"refs/heads/{name}") is not None:
            return name
    current = repo.run_status("symbolic-ref", "--quiet", "--short", "HEAD")
    if current.status == 0 and current.line:
        return current.line
    raise ProviderError(
        f"cannot tell the default branch of {repo.root}: configure it explicitly",
        transient=False,
    )

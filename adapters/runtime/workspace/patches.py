"""Patch extraction: everything an agent changed in its worktree, as one ``git apply``-able diff.

The contract (S001-27) names ``git diff <defaultBranch>..HEAD``, which sees commits only.
Agents also leave work uncommitted — staged, unstaged, new files — so the patch here is the
difference between the fork point and the worktree *as it is on disk*:

1. ``base = git merge-base <default_branch> HEAD``: the commit the branch started from, so a
   default branch that moved during the session does not show up as reverted changes.
2. A throwaway index (``GIT_INDEX_FILE``), seeded from a copy of the worktree's index (its stat
   data spares re-hashing every file of a large tree), gets ``git add -A``: tracked changes,
   deletions, and untracked files that ``.gitignore`` does not exclude. The worktree's own
   index is never written, so what the agent staged stays as it was.
3. ``git diff --cached --binary -M <base>`` against that index: renames as renames, mode
   changes, binary files in git's binary format (base85, full object ids), CRLF kept byte for
   byte. Every option that user config could change and that ``git apply`` depends on
   (prefixes, colour, external diff drivers, textconv, ``diff.relative``) is pinned.

An agent that ran in cpe's sandbox wrote its objects (``git add``, ``git commit``) to a private
object directory in the worktree's own git files (``sandbox.bwrap``); the index it left names
them, so that directory is read as an alternate here.

The result applies with ``git apply`` (or ``git apply --cached``) onto the base. It is
returned as ``str``: git's bytes decoded as UTF-8 with ``surrogateescape``, so a text file in
another encoding survives — encode with ``errors="surrogateescape"`` to get the exact bytes
back (as :func:`apply_patch_check` does).

An empty change set returns ``""``; what that means (a failure, on ``completed``: S001-28) is
the caller's decision.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from adapters.runtime.workspace.worktrees import run_git
from domain.errors import PatchError

__all__ = ["SANDBOX_OBJECTS", "apply_patch_check", "extract_patch", "fork_point"]

SANDBOX_OBJECTS = "cpe-sandbox/objects"  # in the worktree's git dir: a sandboxed agent's objects

_DIFF_OPTIONS = (
    "--binary",
    "--full-index",  # whole blob ids: a provider can fetch the pre-images for a 3-way apply
    "-M",
    "--no-color",
    "--no-ext-diff",
    "--no-textconv",
    "--no-relative",
    "--src-prefix=a/",
    "--dst-prefix=b/",
)


def extract_patch(worktree_path: str | os.PathLike[str], default_branch: str) -> str:
    """Every change in ``worktree_path`` against where it forked from ``default_branch``.

    Raises PatchError when the path is not a git worktree, the default branch is unknown or
    shares no history with HEAD, or git fails.
    """
    root = Path(worktree_path)
    if not root.is_dir():
        raise PatchError(f"no worktree at {root}")
    top = _git(root, "rev-parse", "--show-toplevel")
    base = _git(top, "merge-base", default_branch, "HEAD")
    real_index = Path(_git(top, "rev-parse", "--path-format=absolute", "--git-path", "index"))
    private = real_index.parent / SANDBOX_OBJECTS
    with tempfile.TemporaryDirectory(prefix="cpe-patch-") as scratch:
        index = Path(scratch) / "index"
        env = {"GIT_INDEX_FILE": str(index)}
        if private.is_dir():
            env["GIT_ALTERNATE_OBJECT_DIRECTORIES"] = str(private)
        try:
            _stage_everything(top, real_index, index, env)
        except PatchError:
            # A copied index can depend on files next to the original (split index, sharedindex.*):
            # start again from HEAD, which only costs re-hashing the tree.
            index.unlink(missing_ok=True)
            _stage_everything(top, None, index, env)
        return _git(top, "diff", "--cached", *_DIFF_OPTIONS, base, "--", env=env, strip=False)


def fork_point(worktree_path: str | os.PathLike[str], default_branch: str) -> str:
    """The commit the worktree's branch forked from ``default_branch``: what the patch of
    ``extract_patch`` is against."""
    top = _git(Path(worktree_path), "rev-parse", "--show-toplevel")
    return _git(top, "merge-base", default_branch, "HEAD")


def apply_patch_check(repo: str | os.PathLike[str], base: str, patch: str) -> str:
    """Apply ``patch`` to ``base`` in a throwaway index of ``repo``; return the resulting tree id.

    Touches neither the working tree nor the real index. Raises PatchError when the patch is
    empty or does not apply. Comparing the returned tree with the tree of the source worktree
    proves the patch carries every change.
    """
    with tempfile.TemporaryDirectory(prefix="cpe-apply-") as scratch:
        index = Path(scratch) / "index"
        patch_file = Path(scratch) / "change.patch"
        patch_file.write_bytes(patch.encode("utf-8", errors="surrogateescape"))
        env = {"GIT_INDEX_FILE": str(index)}
        _git(repo, "read-tree", base, env=env)
        _git(repo, "apply", "--cached", "--whitespace=nowarn", str(patch_file), env=env)
        return _git(repo, "write-tree", env=env)


def _stage_everything(top: str, real_index: Path | None, index: Path, env: dict[str, str]) -> None:
    if real_index is not None and real_index.is_file():
        try:
            # copy2 keeps the index's mtime: git trusts an entry's stat data only when the file
            # is older than the index, so a copy stamped "now" would pass a same-size edit made
            # in the tick the index was written as unchanged (racy git).
            shutil.copy2(real_index, index)
        except OSError as exc:
            raise PatchError(f"cannot copy the index {real_index}: {exc}") from exc
    else:
        _git(top, "read-tree", "HEAD", env=env)
    # core.safecrlf=true would turn a CRLF file into a fatal error here; the patch carries
    # whatever bytes the agent wrote, and the repository's own attributes still apply.
    _git(top, "-c", "core.safecrlf=false", "add", "--all", "--", ".", env=env)


def _git(
    cwd: str | os.PathLike[str], *args: str, env: dict[str, str] | None = None, strip: bool = True
) -> str:
    return run_git(cwd, *args, env=env, error=PatchError, strip=strip)

"""Real git repositories for the provider tests, driven with plain ``git`` (not the code under
test), so what a test checks does not depend on the adapter's own plumbing.

``Repo`` wraps a checkout with the few operations the tests need; ``make_patch`` produces a patch
the way an implementor's worktree would (``git diff --binary`` against the default branch) and
``tree_from_git_apply`` is the reference a provider-built revision is compared with.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable, Mapping
from pathlib import Path

import pytest

Content = str | bytes


def isolate_git(monkeypatch: pytest.MonkeyPatch) -> None:
    """Shield a test from the machine's git config (autocrlf, gpgsign, hooks, default branch)."""
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", os.devnull)
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    for name in ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_CONFIG_PARAMETERS"):
        monkeypatch.delenv(name, raising=False)
    for role in ("AUTHOR", "COMMITTER"):
        monkeypatch.setenv(f"GIT_{role}_NAME", "Test User")
        monkeypatch.setenv(f"GIT_{role}_EMAIL", "test@example.invalid")


def git_bytes(cwd: Path, *args: str, env: Mapping[str, str] | None = None) -> bytes:
    result = subprocess.run(
        ["git", *args],
        cwd=cwd,
        env={**os.environ, **(env or {})},
        capture_output=True,
        check=False,
        timeout=60,
    )
    if result.returncode != 0:
        raise AssertionError(f"git {' '.join(args)} failed in {cwd}: {result.stderr.decode()}")
    return result.stdout


def git(cwd: Path, *args: str, env: Mapping[str, str] | None = None) -> str:
    """``git <args>`` in ``cwd``: stdout without its final newline; a failure fails the test."""
    return git_bytes(cwd, *args, env=env).decode("utf-8", "surrogateescape").removesuffix("\n")


class Repo:
    """A checkout the test owns."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def git(self, *args: str) -> str:
        return git(self.root, *args)

    def write(self, path: str, content: Content) -> None:
        target = self.root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, str):
            content = content.encode()
        target.write_bytes(content)

    def remove(self, path: str) -> None:
        (self.root / path).unlink()

    def move(self, old: str, new: str) -> None:
        self.git("mv", old, new)

    def make_executable(self, path: str) -> None:
        (self.root / path).chmod(0o755)

    def commit(self, message: str, files: Mapping[str, Content | None] | None = None) -> str:
        """Write ``files`` (None deletes), stage everything and commit; the new HEAD."""
        for path, content in (files or {}).items():
            if content is None:
                self.remove(path)
            else:
                self.write(path, content)
        self.git("add", "--all")
        self.git("commit", "--quiet", "--allow-empty", "-m", message)
        return self.head()

    def head(self, rev: str = "HEAD") -> str:
        return self.git("rev-parse", "--verify", f"{rev}^{{commit}}")

    def tree(self, rev: str) -> str:
        return self.git("rev-parse", "--verify", f"{rev}^{{tree}}")

    def parents(self, rev: str) -> list[str]:
        return self.git("rev-list", "--parents", "-n", "1", rev).split()[1:]

    def show(self, rev: str, path: str) -> bytes:
        return git_bytes(self.root, "cat-file", "blob", f"{rev}:{path}")

    def status(self) -> str:
        """Everything a user would see of their checkout: status, staged and unstaged diffs."""
        return "\n".join(
            (
                self.git("status", "--porcelain=v1", "--untracked-files=all", "--branch"),
                self.git("diff", "--cached", "--binary"),
                self.git("diff", "--binary"),
            )
        )


def make_repo(root: Path, files: Mapping[str, Content], branch: str = "main") -> Repo:
    """A repository whose ``branch`` has one commit holding ``files``."""
    root.mkdir(parents=True)
    git(root, "init", "--quiet", f"--initial-branch={branch}")
    repo = Repo(root)
    repo.commit("initial", files)
    return repo


def clone(source: Path, dest: Path, branch: str = "main") -> Repo:
    git(source.parent, "clone", "--quiet", "--branch", branch, str(source), str(dest))
    return Repo(dest)


def make_patch(
    source: Path, scratch: Path, edit: Callable[[Repo], None], branch: str = "main"
) -> str:
    """The patch an implementor would hand over: ``edit`` applied to a clone of ``branch``,
    everything staged, diffed against the branch with ``--binary`` (binary files need it) and
    ``--full-index``, as ``adapters/runtime/patches.py`` does."""
    work = clone(source, scratch, branch)
    edit(work)
    work.git("add", "--all")
    raw = git_bytes(
        work.root, "diff", "--cached", "--binary", "--full-index", "-M", "--no-color", "HEAD"
    )
    return raw.decode("utf-8", "surrogateescape")


def tree_from_git_apply(source: Path, scratch: Path, patch: str, rev: str) -> str:
    """The tree plain ``git apply`` makes of ``patch`` on ``rev``, in a fresh clone."""
    work = clone(source, scratch)
    work.git("checkout", "--quiet", "--detach", rev)
    patch_file = scratch.parent / f"{scratch.name}.patch"
    patch_file.write_bytes(patch.encode("utf-8", "surrogateescape"))
    work.git("apply", "--index", str(patch_file))
    return work.git("write-tree")

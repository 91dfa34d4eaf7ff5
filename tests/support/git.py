"""Real git repositories for tests, built with plain ``git`` (not the code under test), so what a
test checks does not depend on cpe's own git plumbing.

Running git (three forms, because tests rely on each):

- ``git(cwd, *args)``: stdout without its final newline; a failure fails the test.
- ``git_bytes(cwd, *args)``: stdout as bytes (a patch with binary content).
- ``git_raw(repo, *args)``: stdout exactly as git printed it, final newline kept; a failure
  raises ``subprocess.CalledProcessError``.
- ``isolate_git(monkeypatch)``: shields a test from the machine's git configuration.

Building repositories:

- ``make_repo(path, files, with_agents=)``: a ``Path`` to a repository with one commit on
  ``main``; its committer is set in the repository's own config, so it needs no ``isolate_git``.
- ``Repo``: a checkout the test owns and drives (``Repo.create``, ``clone``); ``make_patch``
  produces a patch the way an implementor's worktree would (``git diff --binary`` against the
  default branch) and ``tree_from_git_apply`` is the reference a provider-built revision is
  compared with.
- ``make_mixed_repo(parent)``: a repository whose ``main`` has every kind of file a patch must
  carry (text, an executable script, a binary file, a CRLF file, a file without a final newline,
  a Latin-1 file, a ``.gitignore``). ``tree_of`` and ``apply_to_fresh_clone`` are independent of
  ``adapters.runtime.workspace.patches``, so a test can check that a patch reproduces a worktree
  exactly.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

Content = str | bytes

BINARY = bytes(range(256)) * 4 + b"\x00\x01binary\x00"


# ---------------------------------------------------------------- running git


def isolate_git(monkeypatch: pytest.MonkeyPatch) -> None:
    """Shield a test from the machine's git config (autocrlf, gpgsign, hooks, default branch)."""
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", os.devnull)
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    for name in ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_CONFIG_PARAMETERS"):
        monkeypatch.delenv(name, raising=False)
    for role in ("AUTHOR", "COMMITTER"):
        monkeypatch.setenv(f"GIT_{role}_NAME", "Test User")
        monkeypatch.setenv(f"GIT_{role}_EMAIL", "test@example.invalid")


def git_bytes(
    cwd: str | os.PathLike[str], *args: str, env: Mapping[str, str] | None = None
) -> bytes:
    """``git <args>`` in ``cwd``: stdout as bytes; a failure fails the test."""
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


def git(cwd: str | os.PathLike[str], *args: str, env: Mapping[str, str] | None = None) -> str:
    """``git <args>`` in ``cwd``: stdout without its final newline; a failure fails the test."""
    return git_bytes(cwd, *args, env=env).decode("utf-8", "surrogateescape").removesuffix("\n")


def git_raw(repo: Path, *args: str) -> str:
    """``git -C repo <args>``: stdout exactly as printed (final newline kept); a failure raises
    ``subprocess.CalledProcessError``."""
    return subprocess.run(
        ["git", "-C", str(repo), *args], capture_output=True, text=True, check=True, timeout=60
    ).stdout


# ---------------------------------------------------------------- a simple repository


def make_repo(
    path: Path, files: Mapping[str, str] | None = None, *, with_agents: bool = False
) -> Path:
    """A repository at ``path`` on branch ``main`` with one commit of ``files`` (and this
    project's ``.claude/`` when ``with_agents``)."""
    path.mkdir(parents=True, exist_ok=True)
    git_raw(path, "init", "-q", "-b", "main")
    git_raw(path, "config", "user.email", "t@example.com")
    git_raw(path, "config", "user.name", "t")
    if with_agents:
        shutil.copytree(ROOT / ".claude", path / ".claude")
    for name, text in (files or {"README.md": "x\n"}).items():
        target = path / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    git_raw(path, "add", "-A")
    git_raw(path, "commit", "-q", "-m", "init")
    return path


# ---------------------------------------------------------------- a checkout the test drives


class Repo:
    """A checkout the test owns."""

    def __init__(self, root: Path) -> None:
        self.root = root

    @classmethod
    def create(cls, root: Path, files: Mapping[str, Content], branch: str = "main") -> Repo:
        """A repository whose ``branch`` has one commit holding ``files``."""
        root.mkdir(parents=True)
        git(root, "init", "--quiet", f"--initial-branch={branch}")
        repo = cls(root)
        repo.commit("initial", files)
        return repo

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


def clone(source: Path, dest: Path, branch: str = "main") -> Repo:
    git(source.parent, "clone", "--quiet", "--branch", branch, str(source), str(dest))
    return Repo(dest)


def make_patch(
    source: Path, scratch: Path, edit: Callable[[Repo], None], branch: str = "main"
) -> str:
    """The patch an implementor would hand over: ``edit`` applied to a clone of ``branch``,
    everything staged, diffed against the branch with ``--binary`` (binary files need it) and
    ``--full-index``, as ``adapters/runtime/workspace/patches.py`` does."""
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


# ---------------------------------------------------------------- every kind of file


def make_mixed_repo(parent: Path, name: str = "repo") -> Path:
    """A repository with a ``main`` branch and three commits, holding every kind of file a
    patch must carry."""
    repo = parent / name
    repo.mkdir()
    git(repo, "init", "--quiet", "--initial-branch=main")
    write(repo, "README.md", "# demo\n")
    write(repo, ".gitignore", "*.log\nbuild/\n")
    write(repo, "src/app.py", "".join(f"line {i}\n" for i in range(30)))
    git(repo, "add", "-A")
    git(repo, "commit", "--quiet", "-m", "initial")
    write(repo, "tools/run.sh", "#!/bin/sh\necho run\n")
    (repo / "tools/run.sh").chmod(0o755)
    (repo / "assets").mkdir()
    (repo / "assets/logo.bin").write_bytes(BINARY)
    git(repo, "add", "-A")
    git(repo, "commit", "--quiet", "-m", "tools and assets")
    (repo / "docs").mkdir()
    (repo / "docs/windows.txt").write_bytes(b"first\r\nsecond\r\nthird\r\n")
    (repo / "notes.txt").write_bytes(b"no final newline")
    (repo / "legacy.txt").write_bytes("caf\xe9 cr\xe8me\n".encode("latin-1"))
    git(repo, "add", "-A")
    git(repo, "commit", "--quiet", "-m", "docs")
    return repo


def write(root: Path, relative: str, text: str) -> Path:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def tree_of(worktree: Path) -> str:
    """The tree id of a working tree as it is on disk (minus ignored files), by a scratch index."""
    with tempfile.TemporaryDirectory() as scratch:
        env = {"GIT_INDEX_FILE": str(Path(scratch) / "index")}
        git(worktree, "read-tree", "HEAD", env=env)
        git(worktree, "add", "--all", env=env)
        return git(worktree, "write-tree", env=env)


def apply_to_fresh_clone(repo: Path, patch: str, dest: Path, ref: str = "main") -> str:
    """Clone ``repo`` at ``ref``, ``git apply`` the patch to its working tree, return its tree."""
    git(repo.parent, "clone", "--quiet", "--branch", ref, str(repo), str(dest))
    patch_file = dest.parent / f"{dest.name}.patch"
    patch_file.write_bytes(patch.encode("utf-8", errors="surrogateescape"))
    git(dest, "apply", str(patch_file))
    return tree_of(dest)


def local_branches(repo: Path) -> list[str]:
    return git(repo, "for-each-ref", "--format=%(refname:strip=2)", "refs/heads/").splitlines()


def worktree_paths(repo: Path) -> list[str]:
    out = git(repo, "worktree", "list", "--porcelain")
    return [
        line.removeprefix("worktree ") for line in out.splitlines() if line.startswith("worktree ")
    ]


def head_branch(worktree: Path) -> str:
    return git(worktree, "symbolic-ref", "--short", "HEAD")


def is_clean(worktree: Path) -> bool:
    return git(worktree, "status", "--porcelain", "--untracked-files=all") == ""

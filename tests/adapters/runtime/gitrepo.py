"""Real git repositories for the runtime tests, built with plain ``git`` (not the code under test).

``make_repo`` builds a repository whose ``main`` has the kinds of file a patch must carry: text,
an executable script, a binary file, a CRLF file, a file without a final newline, a
``.gitignore``. ``tree_of`` and ``apply_to_fresh_clone`` are independent of
``adapters.runtime.patches``, so a test can check that a patch reproduces a worktree exactly.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from pathlib import Path

import pytest

BINARY = bytes(range(256)) * 4 + b"\x00\x01binary\x00"


def isolate_git(monkeypatch: pytest.MonkeyPatch) -> None:
    """Shield the tests from the machine's git config (autocrlf, gpgsign, default branch…)."""
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", os.devnull)
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    for name in ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_CONFIG_PARAMETERS"):
        monkeypatch.delenv(name, raising=False)
    for role in ("AUTHOR", "COMMITTER"):
        monkeypatch.setenv(f"GIT_{role}_NAME", "Test")
        monkeypatch.setenv(f"GIT_{role}_EMAIL", "test@example.invalid")


def git(cwd: str | os.PathLike[str], *args: str, env: dict[str, str] | None = None) -> str:
    """``git <args>`` in ``cwd``; stdout with the final newline stripped, failures raise."""
    result = subprocess.run(
        ["git", *args],
        cwd=cwd,
        env={**os.environ, **(env or {})},
        capture_output=True,
        check=False,
    )
    if result.returncode != 0:
        raise AssertionError(f"git {' '.join(args)} failed: {result.stderr.decode()}")
    return result.stdout.decode("utf-8", errors="surrogateescape").removesuffix("\n")


def make_repo(parent: Path, name: str = "repo") -> Path:
    """A repository with a ``main`` branch and three commits."""
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

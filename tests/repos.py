"""Small real git repositories for tests: one helper instead of an inline copy per file."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Mapping
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), *args], capture_output=True, text=True, check=True, timeout=60
    ).stdout


def make_repo(
    path: Path, files: Mapping[str, str] | None = None, *, with_agents: bool = False
) -> Path:
    """A repository at ``path`` on branch ``main`` with one commit of ``files`` (and this
    project's ``.claude/`` when ``with_agents``)."""
    path.mkdir(parents=True, exist_ok=True)
    git(path, "init", "-q", "-b", "main")
    git(path, "config", "user.email", "t@example.com")
    git(path, "config", "user.name", "t")
    if with_agents:
        shutil.copytree(ROOT / ".claude", path / ".claude")
    for name, text in (files or {"README.md": "x\n"}).items():
        target = path / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "init")
    return path

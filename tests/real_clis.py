"""The real agent CLIs some tests drive (against the scripted model, offline).

They are installed by ``npm ci --prefix tests/tools`` (``tests/tools/package.json`` pins them).
A missing CLI fails the test that needs it: it is never skipped.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

TOOLS = Path(__file__).resolve().parent / "tools"
INSTALL = "npm ci --prefix tests/tools"


def real_codex() -> Path:
    """The real ``codex`` binary: ``$CPE_TEST_CODEX``, else ``tests/tools``' install, else the
    one on ``PATH``; none of them fails the test."""
    given = os.environ.get("CPE_TEST_CODEX")
    if given:
        path = Path(given)
        if not path.is_file():
            pytest.fail(f"CPE_TEST_CODEX={given} is not a file; unset it or run `{INSTALL}`")
        return path
    local = TOOLS / "node_modules" / ".bin" / "codex"
    if local.is_file():
        return local
    found = shutil.which("codex")
    if found:
        return Path(found)
    pytest.fail(f"the real codex CLI is not installed: run `{INSTALL}` (or set CPE_TEST_CODEX)")


# codex 0.169.0 runs a sandboxed command through a system bubblewrap when ``bwrap`` is on its
# PATH, else through the one it bundles; the two break differently (adapters/runtime/codex/
# home.py), so the real-codex tests run both ways.
WITH_BWRAP, WITHOUT_BWRAP = "with-bwrap", "without-bwrap"
APT_BWRAP = "apt-get install -y bubblewrap"


def bwrap_variants() -> list[str]:
    """How the real-codex tests run codex: without ``bwrap`` on its PATH always, with it where
    bubblewrap is installed, and in CI (``CI=true``, ``.ci/run``) always: there a missing
    bubblewrap fails the test (``codex_path``) instead of leaving the variant out."""
    if shutil.which("bwrap") or os.environ.get("CI") == "true":
        return [WITH_BWRAP, WITHOUT_BWRAP]
    return [WITHOUT_BWRAP]


def codex_path(variant: str, path: str, scratch: Path) -> str:
    """``path`` for a codex run of ``variant``: as it is with bwrap, which must be on it; or
    with every directory that holds a ``bwrap`` replaced by a copy of it made of links to all
    its entries but that one (``scratch`` holds the copies)."""
    dirs = path.split(os.pathsep)
    if variant == WITH_BWRAP:
        if shutil.which("bwrap", path=path) is None:
            pytest.fail(f"bubblewrap is not installed (no bwrap on {path}): {APT_BWRAP}")
        return path
    for index, directory in enumerate(dirs):
        if not (Path(directory) / "bwrap").exists():
            continue
        mirror = scratch / f"path-without-bwrap-{index}"
        mirror.mkdir(parents=True, exist_ok=True)
        for entry in Path(directory).iterdir():
            if entry.name != "bwrap" and not os.path.lexists(mirror / entry.name):
                (mirror / entry.name).symlink_to(entry)
        dirs[index] = str(mirror)
    hidden = os.pathsep.join(dirs)
    assert shutil.which("bwrap", path=hidden) is None
    return hidden


def bwrap_needs_codex_helper_alias() -> bool:
    """Whether the system bubblewrap predates ``--argv0`` (0.9.0): then codex tells it to exec
    its helper by the alias name, which exists only when codex could create its aliases."""
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        return False
    shown = subprocess.run(
        [bwrap, "--help"], capture_output=True, text=True, check=False, timeout=60
    )
    return "--argv0" not in shown.stdout + shown.stderr

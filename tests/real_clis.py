"""The real agent CLIs some tests drive (against the scripted model, offline).

They are installed by ``npm ci --prefix tests/tools`` (``tests/tools/package.json`` pins them).
A missing CLI fails the test that needs it: it is never skipped.
"""

from __future__ import annotations

import os
import shutil
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

"""domain/ stays pure: no I/O, no runtime, no vendor library, nothing from actors/ or adapters/.

Two guards: ruff's banned-api (TID251, scoped to domain/ in pyproject.toml), which the lint step
of CI runs; and an import scan here, which also catches the builtins ruff cannot see.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOMAIN = ROOT / "domain"

ALLOWED_TOP_LEVEL = {
    "__future__",
    "collections",
    "copy",
    "dataclasses",
    "datetime",
    "enum",
    "functools",
    "hashlib",
    "itertools",
    "json",
    "re",
    "types",
    "typing",
    "pydantic",
    "domain",
}
FORBIDDEN_BUILTINS = {"open", "print", "input", "exec", "eval", "breakpoint", "__import__"}


def _domain_modules() -> list[Path]:
    return sorted(DOMAIN.rglob("*.py"))


@pytest.mark.parametrize("path", _domain_modules(), ids=lambda p: p.name)
def test_domain_module_imports_only_pure_modules(path: Path) -> None:
    tree = ast.parse(path.read_text(), filename=str(path))
    imported: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            imported.add(node.module.split(".")[0])
    assert imported <= ALLOWED_TOP_LEVEL, f"{path.name} imports {imported - ALLOWED_TOP_LEVEL}"


@pytest.mark.parametrize("path", _domain_modules(), ids=lambda p: p.name)
def test_domain_module_calls_no_io_builtin(path: Path) -> None:
    tree = ast.parse(path.read_text(), filename=str(path))
    calls = {
        node.func.id
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
    }
    assert not calls & FORBIDDEN_BUILTINS


def _ruff(source: str, filename: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ruff", "check", "--no-cache", "--stdin-filename", filename, "-"],
        input=source,
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
        check=False,
    )


@pytest.mark.parametrize(
    "source",
    [
        "import subprocess\n",
        "import sqlite3\n",
        "from pykka import ThreadingActor\n",
        "from githubkit import GitHub\n",
        "import claude_agent_sdk\n",
        "from adapters import cli\n",
        "import threading\n",
        "from os import environ\n",
        "import logging\n",
        "import sys\n",
        "from concurrent.futures import ThreadPoolExecutor\n",
        "import importlib\n",
        "from datetime import datetime\n\nNOW = datetime.now()\n",
    ],
)
def test_a_forbidden_import_in_domain_fails_the_lint_step(source: str) -> None:
    result = _ruff(source + "\n__all__ = ()\n", "domain/probe.py")
    assert result.returncode != 0
    assert "TID251" in result.stdout


def test_the_same_import_outside_domain_passes_the_lint_step() -> None:
    result = _ruff("import subprocess\n\n__all__ = ('subprocess',)\n", "adapters/probe.py")
    assert result.returncode == 0, result.stdout


def _importers(module: str) -> set[str]:
    found = set()
    for folder in ("domain", "actors", "adapters"):
        for path in (ROOT / folder).rglob("*.py"):
            tree = ast.parse(path.read_text(), filename=str(path))
            for node in ast.walk(tree):
                names = []
                if isinstance(node, ast.Import):
                    names = [alias.name for alias in node.names]
                elif isinstance(node, ast.ImportFrom) and node.module:
                    names = [node.module]
                if any(n == module or n.startswith(module + ".") for n in names):
                    found.add(str(path.relative_to(ROOT)))
    return found


@pytest.mark.spec("S001-43")
def test_only_the_claude_sdk_adapter_imports_the_sdk_and_only_runtime_imports_frontmatter() -> None:
    assert _importers("claude_agent_sdk") == {"adapters/runtime/claude_sdk.py"}
    assert all(p.startswith("adapters/runtime/") for p in _importers("frontmatter"))
    assert all(p.startswith("adapters/github/") for p in _importers("githubkit"))

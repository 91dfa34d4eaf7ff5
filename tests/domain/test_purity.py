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


# Where the vendor-isolation scan looks: the product, its tests and its benchmarks.
SCANNED = ("domain", "actors", "adapters", "tests", "bench")

# The Claude SDK runtime: the only product files that import claude_agent_sdk.
SDK_ADAPTER = {"adapters/runtime/claude/sdk.py", "adapters/runtime/claude/sdk_run.py"}
# The only files besides the SDK runtime that may import claude_agent_sdk. Each
# drives the real SDK on purpose, to prove that a test double speaks the wire the adapter relies
# on; everything else reaches the SDK through the adapter. The list must stay exact: a new
# importer fails the test, and so does an entry whose file no longer imports the SDK.
SDK_TEST_IMPORTERS = {
    # the fake claude CLI, checked against the real SDK's query() and message parser
    "tests/fakes/test_claude_cli.py",
    # run artifacts built from real SDK message objects (ResultMessage, parse_message)
    "tests/adapters/runtime/artifacts/test_content.py",
}
# Files outside adapters/runtime/ that may import frontmatter: none. Tests load agent
# definitions through adapters/runtime/prompt/agents.py.
FRONTMATTER_TEST_IMPORTERS: set[str] = set()


def _imported_modules(tree: ast.AST) -> set[str]:
    """Every module a file imports: import statements, and ``importlib.import_module`` or
    ``__import__`` calls with a literal name."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module)
        elif isinstance(node, ast.Call) and node.args:
            func = node.func
            called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
            first = node.args[0]
            if called in ("import_module", "__import__") and isinstance(first, ast.Constant):
                names.add(str(first.value))
    return names


def _imports(names: set[str], module: str) -> bool:
    return any(n == module or n.startswith(module + ".") for n in names)


def _importers(module: str, folders: tuple[str, ...] = SCANNED, root: Path = ROOT) -> set[str]:
    found = set()
    for folder in folders:
        for path in (root / folder).rglob("*.py"):
            tree = ast.parse(path.read_text(), filename=str(path))
            if _imports(_imported_modules(tree), module):
                found.add(str(path.relative_to(root)))
    return found


@pytest.mark.spec("S001-43")
def test_only_the_claude_sdk_adapter_imports_the_sdk_and_only_runtime_imports_frontmatter() -> None:
    assert _importers("claude_agent_sdk") == {*SDK_ADAPTER, *SDK_TEST_IMPORTERS}
    outside = {p for p in _importers("frontmatter") if not p.startswith("adapters/runtime/")}
    assert outside == FRONTMATTER_TEST_IMPORTERS
    product = ("domain", "actors", "adapters")
    assert all(p.startswith("adapters/providers/github/") for p in _importers("githubkit", product))


@pytest.mark.parametrize(
    ("source", "module"),
    [
        ("import claude_agent_sdk\n", "claude_agent_sdk"),
        ("import claude_agent_sdk.types as t\n", "claude_agent_sdk"),
        ("from claude_agent_sdk._internal import query\n", "claude_agent_sdk"),
        ("def f():\n    from claude_agent_sdk import query\n", "claude_agent_sdk"),
        ("import importlib\nimportlib.import_module('claude_agent_sdk')\n", "claude_agent_sdk"),
        ("__import__('frontmatter')\n", "frontmatter"),
        ("from frontmatter import loads\n", "frontmatter"),
    ],
)
def test_the_scan_sees_every_way_of_importing_a_vendor_library(source: str, module: str) -> None:
    assert _imports(_imported_modules(ast.parse(source)), module)


def test_the_scan_does_not_mistake_a_name_or_a_lookup_for_an_import() -> None:
    source = (
        "import importlib.util\n"
        "spec = importlib.util.find_spec('claude_agent_sdk')\n"  # locates, does not import
        "text = 'import frontmatter'\n"
        "import claude_agent_sdk_extras\n"
    )
    names = _imported_modules(ast.parse(source))
    assert not _imports(names, "claude_agent_sdk")
    assert not _imports(names, "frontmatter")


def test_a_new_importer_in_tests_or_bench_is_found(tmp_path: Path) -> None:
    for name, source in {
        "tests/adapters/test_new.py": "from claude_agent_sdk import query\n",
        "bench/bench_new.py": "import frontmatter\n",
        "tests/fakes/test_claude_cli.py": "import json\n",
    }.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(source)
    assert _importers("claude_agent_sdk", root=tmp_path) == {"tests/adapters/test_new.py"}
    assert _importers("frontmatter", root=tmp_path) == {"bench/bench_new.py"}

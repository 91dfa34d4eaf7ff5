"""The house's shape, checked from the source: sizes, circles, and arrows that must not exist.

docs/architecture.md draws the map; these tests keep it true. Imports are read with ``ast`` from
every module under domain/, actors/ and adapters/, including the lazy ones inside functions (they
are imports all the same, only later); imports under ``if TYPE_CHECKING:`` are not (they never run).
"""

from __future__ import annotations

import ast
import re
from functools import cache
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PACKAGES = ("domain", "actors", "adapters")
MAX_LINES = 500
EXPLAIN_OVER = 400


@cache
def modules() -> dict[str, Path]:
    """Every module of the project by dotted name (a package by its own name)."""
    found: dict[str, Path] = {}
    for top in PACKAGES:
        for path in sorted((REPO / top).rglob("*.py")):
            parts = list(path.relative_to(REPO).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


def _owner(name: str) -> str | None:
    """The project module an imported name lives in (``a.b.c`` → ``a.b`` if c is a name in it)."""
    known = modules()
    while name and name not in known:
        name = name.rpartition(".")[0]
    return name or None


def _is_type_checking(node: ast.AST) -> bool:
    return isinstance(node, ast.If) and (
        (isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING")
        or (isinstance(node.test, ast.Attribute) and node.test.attr == "TYPE_CHECKING")
    )


@cache
def imports() -> dict[str, frozenset[str]]:
    """Each module's imports of other project modules, eager and lazy together."""
    graph: dict[str, frozenset[str]] = {}
    for name, path in modules().items():
        seen: set[str] = set()
        stack: list[ast.AST] = [ast.parse(path.read_text(), filename=str(path))]
        while stack:
            node = stack.pop()
            for child in ast.iter_child_nodes(node):
                if _is_type_checking(child):
                    continue
                targets: list[str] = []
                if isinstance(child, ast.Import):
                    targets = [alias.name for alias in child.names]
                elif isinstance(child, ast.ImportFrom) and child.module and not child.level:
                    targets = [f"{child.module}.{alias.name}" for alias in child.names]
                for target in targets:
                    owner = _owner(target)
                    if owner is not None and owner != name:
                        seen.add(owner)
                stack.append(child)
        graph[name] = frozenset(seen)
    return graph


def _circles(graph: dict[str, frozenset[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []
    counter = 0
    for start, targets in graph.items():
        if start in index:
            continue
        work: list[tuple[str, list[str]]] = [(start, sorted(targets))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, todo = work[-1]
            if todo:
                nxt = todo.pop()
                if nxt not in index:
                    index[nxt] = low[nxt] = counter
                    counter += 1
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, sorted(graph.get(nxt, ()))))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                group: list[str] = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                    if member == node:
                        break
                if len(group) > 1:
                    found.append(sorted(group))
    return found


def _lines(path: Path) -> int:
    return len(path.read_text().splitlines())


def test_no_module_is_over_500_lines() -> None:
    too_long = {name: _lines(path) for name, path in modules().items() if _lines(path) > MAX_LINES}
    assert not too_long, f"modules over {MAX_LINES} lines (split them along a seam): {too_long}"


def test_every_module_over_400_lines_is_explained_in_the_development_guide() -> None:
    guide = (REPO / "docs" / "development.md").read_text()
    section = guide.split("### Modules over 400 lines", 1)
    assert len(section) == 2, "docs/development.md has no '### Modules over 400 lines' section"
    listed = set(re.findall(r"`(\w+/[\w/]+\.py)`", section[1].split("\n## ", 1)[0]))
    long_ones = {
        str(path.relative_to(REPO)) for path in modules().values() if _lines(path) > EXPLAIN_OVER
    }
    assert long_ones <= listed, (
        f"over {EXPLAIN_OVER} lines but not explained in docs/development.md: "
        f"{sorted(long_ones - listed)}"
    )
    stale = {path for path in listed if not (REPO / path).exists()}
    assert not stale, f"docs/development.md explains modules that no longer exist: {sorted(stale)}"


def test_there_is_no_import_circle() -> None:
    circles = _circles(dict(imports()))
    assert not circles, f"modules that import each other, directly or round about: {circles}"


def test_the_circle_finder_finds_a_circle() -> None:
    graph = {
        "a": frozenset({"b"}),
        "b": frozenset({"c"}),
        "c": frozenset({"a"}),
        "d": frozenset({"a"}),
    }
    assert _circles(graph) == [["a", "b", "c"]]
    assert _circles({"a": frozenset({"b"}), "b": frozenset()}) == []


def test_nothing_outside_the_composition_root_imports_it() -> None:
    """adapters/cli builds everything; an arrow from elsewhere back into it runs back up."""
    back_up = sorted(
        (name, target)
        for name, targets in imports().items()
        if not name.startswith("adapters.cli")
        for target in targets
        if target == "adapters.cli" or target.startswith("adapters.cli.")
    )
    assert not back_up, f"imports of the composition root from below it: {back_up}"


def test_the_bash_guard_is_a_leaf() -> None:
    """The guard reads a command and judges it; the runtimes use it, it uses none of them."""
    outside = sorted(
        (name, target)
        for name, targets in imports().items()
        if name.startswith("adapters.bash_guard")
        for target in targets
        if target.split(".")[0] in PACKAGES
        and not target.startswith("adapters.bash_guard")
        and target not in {"adapters", "domain"}
        and not target.startswith(("domain.", "adapters.support"))
    )
    assert not outside, f"adapters.bash_guard importing the rest of the project: {outside}"

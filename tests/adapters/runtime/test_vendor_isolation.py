"""No agent vendor leans on another (issue 36): every module of a vendor's package
(``adapters/runtime/claude/``, ``adapters/runtime/codex/``) imports from what every CLI shares
(``adapters/runtime/cli/``) and the neutral runtime modules, never from another vendor's
package; and the base they share imports no vendor at all. Read from the source (ast), so a
lazy import inside a function counts too."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
RUNTIME = "adapters/runtime"
VENDORS = ("claude", "codex")
# What the vendors stand on: the CLI base, the run skeleton, the signals' role.
SHARED_BASE = ("cli", "agent_runtime.py", "signals.py")


def imported(path: Path) -> set[str]:
    """Every module ``path`` imports (absolute imports: relative ones are banned by ruff)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
            names |= {f"{node.module}.{alias.name}" for alias in node.names}
    return names


def modules(place: Path) -> list[Path]:
    return sorted(place.rglob("*.py")) if place.is_dir() else [place]


def vendor_imports(root: Path, place: str, vendors: tuple[str, ...]) -> dict[str, set[str]]:
    """The modules under ``root/place`` that import one of ``vendors``' packages, with what."""
    found: dict[str, set[str]] = {}
    for path in modules(root / place):
        bad = {
            name
            for name in imported(path)
            for vendor in vendors
            if name == f"adapters.runtime.{vendor}"
            or name.startswith(f"adapters.runtime.{vendor}.")
        }
        if bad:
            found[str(path.relative_to(root))] = bad
    return found


def test_every_vendor_package_exists_and_holds_modules() -> None:
    for vendor in VENDORS:
        assert len(modules(ROOT / RUNTIME / vendor)) > 1, vendor


def test_no_vendor_imports_another_vendor() -> None:
    for vendor in VENDORS:
        others = tuple(v for v in VENDORS if v != vendor)
        assert vendor_imports(ROOT, f"{RUNTIME}/{vendor}", others) == {}, vendor


def test_the_base_the_vendors_share_imports_no_vendor() -> None:
    for place in SHARED_BASE:
        assert vendor_imports(ROOT, f"{RUNTIME}/{place}", VENDORS) == {}, place


def test_the_scan_finds_a_vendor_leaning_on_another(tmp_path: Path) -> None:
    codex = tmp_path / RUNTIME / "codex"
    codex.mkdir(parents=True)
    (codex / "ok.py").write_text("from adapters.runtime.cli.jsonl import JsonlRun\n")
    (codex / "top.py").write_text("from adapters.runtime import claude\n")
    (codex / "lazy.py").write_text(
        "def f():\n    from adapters.runtime.claude.vendor import bundled_cli\n"
    )
    (codex / "plain.py").write_text("import adapters.runtime.claude.signals as s\n")
    found = vendor_imports(tmp_path, f"{RUNTIME}/codex", ("claude",))
    assert set(found) == {f"{RUNTIME}/codex/{name}.py" for name in ("top", "lazy", "plain")}

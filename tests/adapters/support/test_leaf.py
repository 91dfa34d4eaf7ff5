"""``adapters/support/`` is a leaf every layer may import: it imports nothing first-party.

Its modules (the crashpoints, the redaction of what cpe shows) import nothing from ``domain/``,
``actors/`` or the rest of ``adapters/``, so importing them never drags a layer in. That is what
lets ``actors/`` import them: ``adapters.support`` is the one allowed arrow from ``actors/`` into
``adapters/`` (``actors/`` otherwise never imports an adapter: adapters are injected), and the
second test holds that too. An ast walk, imports inside functions included.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
SUPPORT = ROOT / "adapters" / "support"
ACTORS = ROOT / "actors"


def _imports(source: str) -> list[str]:
    names: list[str] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.append(node.module)
            if node.module == "adapters":  # ``from adapters import support``
                names += [f"adapters.{alias.name}" for alias in node.names]
    return names


def _within(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def first_party(source: str) -> list[str]:
    """What ``source`` imports from ``domain/``, ``actors/`` or ``adapters/`` outside
    ``adapters.support``."""
    return [
        name
        for name in _imports(source)
        if any(_within(name, top) for top in ("domain", "actors", "adapters"))
        and name != "adapters"
        and not _within(name, "adapters.support")
    ]


def into_adapters(source: str) -> list[str]:
    """What ``source`` (a module of ``actors/``) imports from ``adapters/`` beyond
    ``adapters.support``."""
    return [name for name in first_party(source) if _within(name, "adapters")]


@pytest.mark.parametrize("path", sorted(SUPPORT.glob("*.py")), ids=lambda p: p.name)
def test_a_support_module_imports_nothing_first_party(path: Path) -> None:
    assert first_party(path.read_text()) == [], str(path.relative_to(ROOT))


@pytest.mark.parametrize("path", sorted(ACTORS.rglob("*.py")), ids=lambda p: p.name)
def test_actors_import_from_adapters_only_the_support_modules(path: Path) -> None:
    assert into_adapters(path.read_text()) == [], str(path.relative_to(ROOT))


def test_the_walk_sees_a_first_party_import_at_any_depth() -> None:
    source = (
        "import os\n"
        "from adapters.support.redaction import REDACTED\n"
        "def f():\n"
        "    from domain.models import WorkItem\n"
        "    import actors.logs\n"
        "    from adapters import cli, support\n"
    )
    assert first_party(source) == ["domain.models", "actors.logs", "adapters.cli"]
    assert into_adapters(source) == ["adapters.cli"]
    assert len(list(SUPPORT.glob("*.py"))) >= 3  # __init__, crashpoints, redaction

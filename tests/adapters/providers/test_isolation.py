"""The provider packages stand alone: none imports another provider's package.

Each package under ``adapters/providers/`` (``local/``, ``github/``, ``specs/``, and any tracker or
forge added beside them) imports only its own modules, the shared modules directly under
``adapters/providers/`` (the git plumbing), ``domain/``, the neutral modules every layer may use,
and third-party libraries. The shared modules import no provider package. An ast walk over every
module (imports inside functions included) fails on any other arrow. The other way round, only
the composition root (``adapters/cli/``) builds a provider: no other module of ``domain/``,
``actors/`` or ``adapters/`` imports ``adapters.providers`` (the runtime and the providers share
the worktree lock through ``adapters.support``).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
PROVIDERS = ROOT / "adapters" / "providers"
FIRST_PARTY = ("domain", "actors", "adapters")

# What a provider package may import from first-party code besides its own package and the
# shared provider modules; each with why.
NEUTRAL = {
    "domain": "the ports, models and errors a provider implements",
    "adapters.support": "crashpoints around provider writes, the worktree lock",
    # The local pipeline runs its test command as the runtime runs an agent: a process group of
    # its own, stamped for the reaper, without cpe's own virtual environment.
    "adapters.runtime": "process groups and own_venv, for the local pipeline's command",
}


def _packages() -> list[str]:
    return sorted(p.name for p in PROVIDERS.iterdir() if (p / "__init__.py").is_file())


def _shared() -> list[str]:
    return sorted(p.stem for p in PROVIDERS.glob("*.py") if p.name != "__init__.py")


def _is_module(name: str) -> bool:
    """Whether ``adapters.providers.<name>`` is a module or package (not a name the package's
    ``__init__`` defines, such as ``ProviderRoles``, which every provider may import)."""
    return (PROVIDERS / name).is_dir() or (PROVIDERS / f"{name}.py").is_file()


def _imports(source: str) -> list[str]:
    """Every module a source imports, at any depth; ``from adapters.providers import github``
    gives ``adapters.providers.github`` (and ``import ProviderRoles`` from it, nothing more)."""
    names: list[str] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.append(node.module)
            if node.module == "adapters.providers":
                names += [
                    f"{node.module}.{alias.name}" for alias in node.names if _is_module(alias.name)
                ]
    return names


def _within(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def violations(package: str | None, source: str) -> list[str]:
    """The imports of ``source`` (a module of provider ``package``, or of the shared modules when
    None) that break the rule."""
    allowed = [f"adapters.providers.{m}" for m in _shared()]
    if package is not None:
        allowed += [f"adapters.providers.{package}", *NEUTRAL]
    else:
        allowed += ["domain", "adapters.support"]
    bad = []
    for name in _imports(source):
        if name.split(".")[0] not in FIRST_PARTY or name == "adapters.providers":
            continue
        if any(_within(name, prefix) for prefix in allowed):
            continue
        bad.append(name)
    return bad


def _modules() -> list[tuple[str | None, Path]]:
    found: list[tuple[str | None, Path]] = [
        (package, path)
        for package in _packages()
        for path in sorted((PROVIDERS / package).rglob("*.py"))
    ]
    found += [(None, PROVIDERS / f"{m}.py") for m in _shared()]
    return found


def test_the_provider_packages_are_found() -> None:
    assert {"local", "github", "specs"} <= set(_packages())
    assert "git" in _shared()


@pytest.mark.parametrize(
    ("package", "path"),
    _modules(),
    ids=lambda v: str(v.relative_to(PROVIDERS)) if isinstance(v, Path) else str(v),
)
def test_a_provider_module_imports_no_other_provider(package: str | None, path: Path) -> None:
    assert violations(package, path.read_text()) == [], f"{path.relative_to(ROOT)}"


def test_the_walk_sees_an_import_of_another_provider_at_any_depth() -> None:
    source = (
        "from adapters.providers.git import GitRepo\n"
        "from domain.errors import ProviderError\n"
        "def f():\n"
        "    from adapters.providers.github.api import GitHubApi\n"
        "    import adapters.cli.settings\n"
        "    from adapters.providers import specs\n"
        "    from adapters.providers import ProviderRoles\n"
    )
    assert violations("local", source) == [
        "adapters.providers.github.api",
        "adapters.cli.settings",
        "adapters.providers.specs",
    ]
    assert violations(None, "from adapters.providers.local.db import x\n") == [
        "adapters.providers.local.db"
    ]
    # What the package itself defines (what a provider serves) is every provider's to use.
    assert violations("local", "from adapters.providers import ProviderRoles, github\n") == [
        "adapters.providers.github"
    ]


# The composition root builds the providers; nothing else in the product reaches into them.
COMPOSITION_ROOT = ROOT / "adapters" / "cli"


def _outside() -> list[Path]:
    return [
        path
        for top in FIRST_PARTY
        for path in sorted((ROOT / top).rglob("*.py"))
        if not path.is_relative_to(PROVIDERS) and not path.is_relative_to(COMPOSITION_ROOT)
    ]


@pytest.mark.parametrize("path", _outside(), ids=lambda p: str(p.relative_to(ROOT)))
def test_only_the_composition_root_imports_a_provider(path: Path) -> None:
    reached = [n for n in _imports(path.read_text()) if _within(n, "adapters.providers")]
    assert reached == [], str(path.relative_to(ROOT))

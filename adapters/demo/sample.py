"""The demo's sample repository: a tiny ``greetings`` package, its spec, tests and configuration.

``create_sample_repo(path)`` writes it and makes one commit on ``main``:

- ``greetings/__init__.py``: the package (a docstring: the features come from the agents);
- ``tests/``: a stdlib ``unittest`` suite (one smoke test: ``unittest discover`` exits 5 on
  Python 3.12+ when it finds no test), run by :data:`PIPELINE_COMMAND`;
- ``specs/greetings.md``: two features, the second built on the first (``greet(name)``, then
  ``greet_all(names)``): the planner turns them into two work items, #2 blocked by #1;
- ``.claude/CLAUDE.md`` and ``.claude/agents/*.md``: copied from this project's own ``.claude/``;
- ``.gitignore``: ``.worktrees/``, ``.cpe/`` and Python's caches, so neither the engine's state
  nor a test run ever shows up in a patch;
- ``supervisor.toml``: :data:`SUPERVISOR_TOML` (local provider, the unittest pipeline,
  ``auto_merge``, short poll intervals, every role on ``claude-sdk``).

Git runs with explicit argv, never a shell, with the caller's ``GIT_DIR``-style variables
removed; the repository gets its own ``user.name``/``user.email`` so commits made in it (the
demo's merges, a user's experiments) do not depend on the machine's git configuration.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Mapping
from pathlib import Path

from adapters.defaults import CLAUDE_DIR
from domain.errors import CpeError

__all__ = [
    "DEFAULT_BRANCH",
    "PIPELINE_COMMAND",
    "SPEC_PATH",
    "SUPERVISOR_TOML",
    "SampleRepoError",
    "agent_definitions_dir",
    "create_sample_repo",
]

DEFAULT_BRANCH = "main"
SPEC_PATH = "specs/greetings.md"
PIPELINE_COMMAND = ("python3", "-m", "unittest", "discover", "-s", "tests", "-t", ".")
AUTHOR = ("cpe demo", "demo@cpe.invalid")

# Variables that would aim git at another repository than the one being created.
_GIT_LOCATION_VARIABLES = (
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_INDEX_FILE",
    "GIT_OBJECT_DIRECTORY",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES",
    "GIT_COMMON_DIR",
    "GIT_NAMESPACE",
)

SUPERVISOR_TOML = """\
# supervisor.toml for `cpe demo`: everything local, fast polls, merges as soon as approved.

[engine]
log_level = "info"
shutdown_timeout = 30
state_dir = ".cpe"

[repository]
path = "."
default_branch = "main"

[provider]
kind = "local"

[provider.local]
pipeline_command = ["python3", "-m", "unittest", "discover", "-s", "tests", "-t", "."]
pipeline_timeout = 120

[specs]
globs = ["specs/**/*.md"]

[workflow]
max_attempts = 3
auto_merge = true
branch_prefix = "cpe/"

[workflow.max_concurrent]
planner = 1
implementor = 2
reviewer = 2

[pollers]
work_items_interval = 0.5
revisions_interval = 0.5
specs_interval = 0.5

[runtime]
max_agent_duration = 120
context_paths = [".claude/CLAUDE.md"]
setup_command = ""

[runtime.roles]
planner = "claude-sdk"
implementor = "claude-sdk"
reviewer = "claude-sdk"

[sandbox]
# The demo runs anywhere: with bubblewrap installed its agents' commands are sandboxed, without
# it they are held by the Bash guard alone (each run's runner_metadata.json says which).
required = false

[logging]
format = "auto"
agent_transcripts = true

[dashboard]
listen = "127.0.0.1:0"  # cpe run on the sample: any free port (cpe demo --serve: --listen)
"""

SPEC = """\
# Greetings

The `greetings` package says hello. Both features live in `greetings/greet.py` and are tested
with the standard library's `unittest` (`python3 -m unittest discover -s tests -t .`), one test
module per feature under `tests/`.

## 1. Greet one person

`greet(name: str) -> str` returns `"Hello, <name>!"`.

Acceptance criteria:

- `greet("Ada")` returns `"Hello, Ada!"`.
- Whitespace around the name is dropped: `greet("  Ada  ")` returns `"Hello, Ada!"`.
- An empty or whitespace-only name raises `ValueError`.

## 2. Greet several people

Needs feature 1: it is built on `greet`.

`greet_all(names: list[str]) -> list[str]` returns one greeting per name, in order, each made
by `greet`.

Acceptance criteria:

- `greet_all(["Ada", "Grace"])` returns `["Hello, Ada!", "Hello, Grace!"]`.
- `greet_all([])` returns `[]`.
- A blank name anywhere in the list raises `ValueError`, as `greet` does.
"""

README = """\
# greetings

A tiny sample project for `cpe demo`. The features are described in `specs/greetings.md`;
cpe's agents implement them.

Run the tests:

    python3 -m unittest discover -s tests -t .
"""

PACKAGE_INIT = '''\
"""Greetings: small, friendly text helpers (see specs/greetings.md)."""
'''

TESTS_INIT = '''\
"""Tests of the greetings package (python3 -m unittest discover -s tests -t .)."""
'''

PACKAGE_TEST = """\
import unittest

import greetings


class PackageTest(unittest.TestCase):
    def test_the_package_imports(self) -> None:
        self.assertIn("Greetings", greetings.__doc__ or "")


if __name__ == "__main__":
    unittest.main()
"""

GITIGNORE = """\
# cpe: implementor worktrees and the engine's state (journal, tracker, transcripts)
.worktrees/
.cpe/
# Python
__pycache__/
*.py[cod]
"""

FILES: dict[str, str] = {
    "README.md": README,
    ".gitignore": GITIGNORE,
    "supervisor.toml": SUPERVISOR_TOML,
    SPEC_PATH: SPEC,
    "greetings/__init__.py": PACKAGE_INIT,
    "tests/__init__.py": TESTS_INIT,
    "tests/test_package.py": PACKAGE_TEST,
}


class SampleRepoError(CpeError):
    """The sample repository could not be created (a non-empty target, git failed …)."""


def agent_definitions_dir() -> Path:
    """The shipped ``.claude/`` (agent definitions and the project context)."""
    return CLAUDE_DIR


def create_sample_repo(path: Path, roles: Mapping[str, str] | None = None) -> Path:
    """Create the sample repository at ``path`` (absent or an empty directory) and return it.

    ``roles`` names another runtime for some roles (``{"implementor": "codex-cli"}``); the
    sample's ``supervisor.toml`` then says so in its ``[runtime.roles]``.

    Raises ``SampleRepoError`` when ``path`` holds anything, the agent definitions cannot be
    found (``cpe`` installed without its ``.claude/``), or git fails.
    """
    repo = Path(path).resolve()
    if repo.exists() and (not repo.is_dir() or any(repo.iterdir())):
        raise SampleRepoError(f"{repo}: exists and is not an empty directory")
    claude = agent_definitions_dir()
    sources = [claude / "CLAUDE.md", *sorted((claude / "agents").glob("*.md"))]
    if not all(source.is_file() for source in sources) or len(sources) < 2:
        raise SampleRepoError(
            f"{claude}: no agent definitions (CLAUDE.md and agents/*.md) to copy into the sample"
        )
    repo.mkdir(parents=True, exist_ok=True)
    files = {**FILES, "supervisor.toml": with_roles(SUPERVISOR_TOML, roles or {})}
    for relative, text in files.items():
        _write(repo / relative, text)
    for source in sources:
        target = repo / ".claude" / source.relative_to(claude)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, target)
    _git(repo, "init", "--quiet")
    # Not ``init -b``: older gits lack it; an unborn HEAD can point anywhere.
    _git(repo, "symbolic-ref", "HEAD", f"refs/heads/{DEFAULT_BRANCH}")
    _git(repo, "config", "user.name", AUTHOR[0])
    _git(repo, "config", "user.email", AUTHOR[1])
    _git(repo, "add", "--all")
    _git(
        repo, "-c", "commit.gpgsign=false", "commit", "--quiet", "--no-verify",
        "-m", "Sample project: the greetings spec, an empty package and its test suite",
    )  # fmt: skip
    return repo


def with_roles(toml: str, roles: Mapping[str, str]) -> str:
    """``toml`` (the sample's) with ``[runtime.roles]`` naming ``roles``' runtimes."""
    for role, kind in roles.items():
        line = f'{role} = "claude-sdk"'
        if role not in ("planner", "implementor", "reviewer") or line not in toml:
            raise SampleRepoError(f"no role {role!r} in the sample's [runtime.roles]")
        if kind not in ("claude-sdk", "claude-cli", "codex-cli"):
            raise SampleRepoError(f"unknown runtime {kind!r} for {role}")
        toml = toml.replace(line, f'{role} = "{kind}"', 1)
    return toml


def _write(target: Path, text: str) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text, encoding="utf-8", newline="\n")


def _git(repo: Path, *args: str) -> str:
    env = {k: v for k, v in os.environ.items() if k not in _GIT_LOCATION_VARIABLES}
    try:
        done = subprocess.run(
            ["git", *args],
            cwd=repo,
            env=env,
            capture_output=True,
            text=True,
            check=False,
            timeout=60,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise SampleRepoError(f"git {args[0]} in {repo}: {exc}") from exc
    if done.returncode != 0:
        raise SampleRepoError(
            f"git {' '.join(args)} in {repo} failed ({done.returncode}): {done.stderr.strip()}"
        )
    return done.stdout

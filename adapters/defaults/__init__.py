"""The defaults cpe ships: ``supervisor.toml`` and the ``.claude/`` agent definitions and
project context (``cpe init`` and ``cpe demo`` copy them into a repository).

In the source tree these are symlinks to the repository's own top-level ``supervisor.toml`` and
``.claude/``, so there is one copy; a built wheel carries the files themselves.
"""

from __future__ import annotations

from pathlib import Path

DEFAULTS_DIR = Path(__file__).resolve().parent
SUPERVISOR_TOML = DEFAULTS_DIR / "supervisor.toml"
CLAUDE_DIR = DEFAULTS_DIR / "claude"

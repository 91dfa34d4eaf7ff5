"""The guard of the claude CLI's own file tools, which run in the CLI, outside the sandbox.

``Write``, ``Edit``, ``MultiEdit`` and ``NotebookEdit`` may change files inside the worktree only,
never in its ``.git``; ``Read``, ``Grep`` and ``Glob`` may read anything but a credential store
(by name, through a link, or — for a search — a directory holding one) and the main repository's
``.git`` beyond the worktree's own files. A path is resolved as the tool would (relative to the
session's directory, links followed, the nearest existing parent for a new file), so a link
the agent made in the worktree is followed.
"""

from __future__ import annotations

import os
import posixpath
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from adapters.bash_guard.config import DEFAULT_PROTECTED_PATHS, BashGuardConfig
from adapters.bash_guard.guard import BashVerdict
from adapters.bash_guard.secrets import HOME_MARK, Secrets, default_homes, glob_root

__all__ = ["FILE_TOOLS", "WRITING_TOOLS", "check_file_tool"]

WRITING_TOOLS = {
    "Write": "file_path",
    "Edit": "file_path",
    "MultiEdit": "file_path",
    "NotebookEdit": "notebook_path",
}
READING_TOOLS = {"Read": "file_path", "NotebookRead": "notebook_path"}
SEARCHING_TOOLS = {"Grep": "path", "Glob": "path"}
FILE_TOOLS = (*WRITING_TOOLS, *READING_TOOLS, *SEARCHING_TOOLS)


def check_file_tool(
    tool: str,
    tool_input: Mapping[str, Any],
    *,
    worktree: Path,
    config: BashGuardConfig,
    cwd: Path | None = None,
    homes: Sequence[str] | None = None,
) -> BashVerdict:
    """Whether the file tool ``tool`` may act on what ``tool_input`` names."""
    root = os.path.realpath(worktree)
    here = os.path.realpath(cwd) if cwd is not None else root
    fragments = DEFAULT_PROTECTED_PATHS + config.protected_paths
    secrets = Secrets(fragments, default_homes() if homes is None else homes, root)
    key = {**WRITING_TOOLS, **READING_TOOLS, **SEARCHING_TOOLS}.get(tool)
    if key is None:
        return BashVerdict(True, "allowed")
    given = tool_input.get(key)
    if given is None and tool in SEARCHING_TOOLS:
        given = "."
    if not isinstance(given, str) or not given or "\0" in given:
        return BashVerdict(False, f"{tool}: no usable {key} in {dict(tool_input)!r:.200}")
    searching = tool if tool in SEARCHING_TOOLS else None
    path = _resolve(here, os.path.expanduser(given))
    denied = secrets.judge(path, sweeping=searching)
    if denied is None and (given == "~" or given.startswith("~/")):  # in any home
        marked = posixpath.normpath(HOME_MARK + given[1:])
        denied = secrets.judge(marked, sweeping=searching)
    if denied is None and tool == "Glob":
        pattern = tool_input.get("pattern")
        if isinstance(pattern, str) and pattern:
            root_of = glob_root(posixpath.join(path, os.path.expanduser(pattern)))
            denied = secrets.judge(_resolve(here, root_of), sweeping=tool)
    if denied is None and tool in WRITING_TOOLS:
        if not _inside(path, root):
            denied = f"{given!r} is outside the worktree"
        elif ".git" in path[len(root) :].split("/"):
            denied = f"{given!r} is in .git, shared with the repository"
    if denied is not None:
        return BashVerdict(False, f"{tool} {denied}", given)
    return BashVerdict(True, "allowed")


def _resolve(here: str, given: str) -> str:
    """``given`` as the tool would reach it: links followed, a missing tail kept as written."""
    joined = posixpath.normpath(posixpath.join(here, given))
    head, tail = joined, ""
    while head not in ("/", "") and not os.path.lexists(head):
        head, name = posixpath.split(head)
        tail = posixpath.join(name, tail) if tail else name
    real = os.path.realpath(head)
    return posixpath.normpath(posixpath.join(real, tail)) if tail else real


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")

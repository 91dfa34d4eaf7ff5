"""Where two trees conflict, in words an agent can act on: the files, and the conflict hunks.

Git writes a conflicted file with markers (``<<<<<<<``, ``=======``, ``>>>>>>>``) both when
``git merge-tree --write-tree`` merges two commits (the markers land in the tree it writes) and
when ``git merge-file`` merges three versions of one file. ``conflict_hunks`` keeps each marked
region with a few lines around it, so a prompt shows what collided without the whole file.
"""

from __future__ import annotations

import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from domain.errors import ProviderError

if TYPE_CHECKING:  # git.py imports this module (a failed apply asks what conflicts)
    from adapters.providers.git import GitRepo

CONTEXT_LINES = 3
HUNK_CHARS = 4000  # per file


@dataclass(frozen=True)
class Merged:
    """A merge of two commits: its tree, or the files that conflict with their hunks."""

    tree: str | None
    files: tuple[str, ...] = ()
    detail: str = ""


def merge_commits(repo: GitRepo, ours: str, theirs: str) -> Merged:
    """``ours`` and ``theirs`` merged (``git merge-tree --write-tree``, git >= 2.38), writing
    only objects: the tree, or the conflicting files and their hunks."""
    result = repo.run_status("merge-tree", "--write-tree", "--no-messages", "-z", ours, theirs)
    if result.status not in (0, 1):
        raise ProviderError(
            f"git merge-tree failed (merging needs git >= 2.38): {result.stderr.strip()}"
        )
    fields = result.text.split("\0")
    tree = fields[0].strip()
    if result.status == 0:
        return Merged(tree=tree)
    # -z: "<mode> <object> <stage>\t<path>" entries, then an empty field, then messages.
    files: list[str] = []
    for entry in fields[1:]:
        if not entry:
            break
        _, _, path = entry.partition("\t")
        if path and path not in files:
            files.append(path)
    return Merged(tree=None, files=tuple(files), detail=_tree_hunks(repo, tree, files))


def _tree_hunks(repo: GitRepo, tree: str, files: list[str]) -> str:
    blocks = []
    for path in files:
        shown = repo.run_status("cat-file", "-p", f"{tree}:{path}")
        text = shown.text if shown.status == 0 else ""
        blocks.append(file_block(path, text))
    return "\n\n".join(blocks)


def index_conflicts(repo: GitRepo, env: Mapping[str, str]) -> tuple[tuple[str, ...], str]:
    """The unmerged files of the index ``env`` names (a three-way ``git apply --cached`` left
    them), each merged with markers by ``git merge-file`` (stage 2 the tree, 3 the patch)."""
    listing = repo.run_status("ls-files", "-u", "-z", env=env)
    stages: dict[str, dict[str, str]] = {}
    for entry in listing.text.split("\0"):
        meta, _, path = entry.partition("\t")
        parts = meta.split()
        if path and len(parts) == 3:
            stages.setdefault(path, {})[parts[2]] = parts[1]
    blocks = []
    with tempfile.TemporaryDirectory(prefix="cpe-conflict-") as tmp:
        for path, blobs in stages.items():
            names = []
            for stage in ("2", "1", "3"):
                target = Path(tmp) / stage
                blob = blobs.get(stage)
                shown = repo.run_status("cat-file", "blob", blob) if blob else None
                target.write_bytes(shown.stdout if shown and shown.status == 0 else b"")
                names.append(str(target))
            merged = repo.run_status(
                "merge-file", "-p", "-L", "default branch", "-L", "base", "-L", "this change",
                *names,
            )  # fmt: skip
            blocks.append(file_block(path, merged.text))
    return tuple(stages), "\n\n".join(blocks)


def file_block(path: str, text: str) -> str:
    hunks = conflict_hunks(text)
    if len(hunks) > HUNK_CHARS:
        hunks = hunks[:HUNK_CHARS] + "\n…"
    return f"{path}:\n{hunks}" if hunks else f"{path}: (no textual hunk: a rename, a mode, binary)"


def conflict_hunks(text: str, context: int = CONTEXT_LINES) -> str:
    """Each conflict-marked region of ``text`` with ``context`` lines before and after,
    regions separated by ``...``."""
    lines = text.splitlines()
    spans: list[tuple[int, int]] = []
    start = None
    for number, line in enumerate(lines):
        if line.startswith("<<<<<<<") and start is None:
            start = number
        elif line.startswith(">>>>>>>") and start is not None:
            low, high = max(0, start - context), min(len(lines), number + context + 1)
            if spans and low <= spans[-1][1]:
                spans[-1] = (spans[-1][0], high)
            else:
                spans.append((low, high))
            start = None
    return "\n...\n".join("\n".join(lines[low:high]) for low, high in spans)

"""Working with a forge's repository without a clone: stand-in commits in a throwaway repository.

A forge (GitHub, GitLab) gives a path's mode and blob id at a commit, and a blob's bytes, through
its API. A *stand-in* is a commit in a scratch repository that holds just the paths a task needs
as they are at such a commit: enough for ``git apply`` to apply a patch to it (``patches``), or
for ``git merge-tree`` to merge two of them and name the files that conflict, with their hunks
(``conflicts_of``). Blob ids are git's own hashes, so every blob written here must hash to the id
the forge named; a forge that gave other bytes is a ``ProviderError``.
"""

from __future__ import annotations

import logging
import subprocess
import tempfile
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from adapters.providers.git import GitRepo
from adapters.providers.git_conflicts import merge_commits
from domain.errors import ProviderError

log = logging.getLogger(__name__)

SUBMODULE = "160000"
MAX_CONFLICT_PATHS = 100  # fetched three times over to merge them here; past that, approximated

Entry = tuple[str, str]
"""A path's ``(mode, object id)`` in a tree: a file's blob, or a submodule's commit."""
Change = tuple[str, str, str] | None
"""What a path is after a change: ``(mode, type, object id)``; None when it was deleted."""


@contextmanager
def scratch_repo(prefix: str) -> Iterator[GitRepo]:
    """An empty repository in a temporary directory, removed afterwards."""
    with tempfile.TemporaryDirectory(prefix=prefix) as tmp:
        root = Path(tmp)
        init = subprocess.run(
            ["git", "init", "--quiet", str(root)], capture_output=True, check=False
        )
        if init.returncode != 0:
            raise ProviderError(f"git init failed: {init.stderr.decode(errors='replace')}")
        yield GitRepo(root)


def write_blob(repo: GitRepo, sha: str, content: bytes, path: str) -> None:
    """Store ``content`` as the blob ``sha`` (of ``path``, for the message) in ``repo``."""
    blob = repo.root / ".git" / "cpe-blob"
    blob.write_bytes(content)
    written = repo.run("hash-object", "-w", "--no-filters", str(blob)).line
    if written != sha:
        raise ProviderError(f"blob {sha} of {path} came back as {written}")


def has_object(repo: GitRepo, sha: str) -> bool:
    return repo.run_status("cat-file", "-e", sha).status == 0


def stand_in(
    repo: GitRepo,
    entries: Mapping[str, Entry],
    blob: Callable[[str], bytes],
    parents: Iterable[str] = (),
    message: str = "stand-in",
) -> str:
    """A commit holding just ``entries`` (path -> mode and object); the blobs not yet in
    ``repo`` are fetched with ``blob(sha)``."""
    env = {"GIT_INDEX_FILE": str(repo.root / ".git" / "cpe-stand-in-index")}
    repo.run("read-tree", "--empty", env=env)
    for path, (mode, sha) in sorted(entries.items()):
        if mode != SUBMODULE and not has_object(repo, sha):
            write_blob(repo, sha, blob(sha), path)
        repo.run("update-index", "--add", "--cacheinfo", f"{mode},{sha},{path}", env=env)
    tree = repo.run("write-tree", env=env).line
    return repo.commit_tree(tree, list(parents), message)


def tree_changes(repo: GitRepo, before: str, after: str) -> dict[str, Change]:
    """Each path that differs from ``before`` to ``after`` (trees or commits), with what it is
    after (None: deleted). Renames are a deletion and an addition."""
    raw = repo.run("diff-tree", "-r", "-z", "--no-renames", before, after).text
    fields = raw.split("\0")
    changes: dict[str, Change] = {}
    for meta, path in zip(fields[0::2], fields[1::2], strict=False):
        if not meta:
            break
        _old_mode, new_mode, _old_sha, new_sha, status = meta.lstrip(":").split()
        kind = "commit" if new_mode == SUBMODULE else "blob"
        changes[path] = None if status == "D" else (new_mode, kind, new_sha)
    return changes


@dataclass(frozen=True)
class Conflict:
    """The files a merge conflicts in, and their hunks. ``exact``: git's own answer; else
    the paths both sides changed (no hunks)."""

    files: tuple[str, ...]
    detail: str = ""
    exact: bool = False


@dataclass(frozen=True)
class Side:
    """One side of a merge: its commit on the forge, the name its hunks' markers give it, and
    the paths it changed since the merge base (a rename as the set of its two names)."""

    commit: str
    label: str
    changed: tuple[frozenset[str], ...]


def conflicts_of(
    merge_base: str,
    ours: Side,
    theirs: Side,
    *,
    entry: Callable[[str, str], Entry | None],
    blob: Callable[[str], bytes],
    prefix: str,
) -> Conflict:
    """Where merging ``theirs`` into ``ours`` conflicts. Only a path both sides changed can
    conflict textually: those paths (and a rename's other name) as they are in the merge base
    and in each side (``entry(commit, path)``, ``blob(sha)``) become three stand-ins that
    ``git merge-tree`` merges. When that cannot tell (too many paths, a blob the forge will not
    give, stand-ins that merge cleanly: a conflict the paths do not show, a file against a
    directory) the paths both sides changed are named instead, not ``exact``."""
    here = {name for names in ours.changed for name in names}
    both = here & {name for names in theirs.changed for name in names}
    if not both:
        return Conflict(())
    paths = set(both)
    for names in (*ours.changed, *theirs.changed):
        if names & both:
            paths |= names  # a rename's other name: git pairs them up
    if len(paths) <= MAX_CONFLICT_PATHS:
        try:
            found = _merge_stand_ins(
                merge_base, ours, theirs, paths, entry=entry, blob=blob, prefix=prefix
            )
        except ProviderError as exc:
            log.warning("the conflicting files could not be merged here: %s", exc)
            found = None
        if found is not None:
            return found
    return Conflict(tuple(sorted(both)))


def _merge_stand_ins(
    merge_base: str,
    ours: Side,
    theirs: Side,
    paths: set[str],
    *,
    entry: Callable[[str, str], Entry | None],
    blob: Callable[[str], bytes],
    prefix: str,
) -> Conflict | None:
    def entries(commit: str) -> dict[str, Entry]:
        return {p: e for p in paths if (e := entry(commit, p)) is not None}

    with scratch_repo(prefix) as repo:
        root = stand_in(repo, entries(merge_base), blob, message=f"stand-in for {merge_base}")
        sides = []
        for side in (ours, theirs):
            commit = stand_in(
                repo, entries(side.commit), blob, [root], f"stand-in for {side.commit}"
            )
            try:  # the branch's own name in the conflict markers, where git takes it
                repo.update_ref(f"refs/heads/{side.label}", commit)
                sides.append(side.label)
            except ProviderError:
                sides.append(commit)
        merged = merge_commits(repo, sides[0], sides[1])
    if merged.tree is not None or not merged.files:
        return None  # the stand-ins merge: the conflict lies elsewhere
    return Conflict(merged.files, merged.detail, exact=True)

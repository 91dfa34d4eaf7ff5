"""Where a revision conflicts with the default branch on GitHub: the files, and the hunks.

GitHub's "Merge a branch" answers a conflict with a bare 409 that names no file. They are found
here as ``patches`` builds trees, without a clone. Two comparisons give the files each side
changed since their merge base; only a path both sides changed can conflict textually (a
rename counts under both its names). Those paths as they are in the merge base and in each head
(blobs through the Git Data API; trees and commits are cached) become three stand-in commits in
a throwaway repository, and ``git merge-tree`` merges them as GitHub would: the files that
conflict, with their hunks (``adapters.providers.stand_ins.conflicts_of``).

When that cannot tell — too many paths to fetch, a blob GitHub will not give, or stand-ins that
merge cleanly (the conflict is of a kind the paths both sides changed do not show, a file
against a directory) — the paths both sides changed are named instead: a superset of the
conflicting files, and the caller says so.
"""

from __future__ import annotations

from githubkit_schemas.latest.models import CommitComparison, DiffEntry

from adapters.providers.github.api import GitHubApi
from adapters.providers.stand_ins import Conflict, Side, conflicts_of

__all__ = ["Conflict", "ConflictFinder"]


def _files(comparison: CommitComparison) -> list[DiffEntry]:
    return comparison.files if isinstance(comparison.files, list) else []


def _names(entry: DiffEntry) -> frozenset[str]:
    old = entry.previous_filename
    return frozenset({entry.filename} | ({old} if isinstance(old, str) and old else set()))


class ConflictFinder:
    def __init__(self, api: GitHubApi) -> None:
        self._api = api

    def find(self, head: str, head_label: str, base: str, base_label: str) -> Conflict:
        """The conflicts of merging ``base`` (the default branch's head) into ``head`` (the
        revision's); the labels name the two sides in the hunks' markers."""
        changed_here = _files(self._api.compare(base, head))  # since the merge base
        theirs = self._api.compare(head, base)
        return conflicts_of(
            theirs.merge_base_commit.sha,
            Side(head, head_label, tuple(_names(e) for e in changed_here)),
            Side(base, base_label, tuple(_names(e) for e in _files(theirs))),
            entry=self._entry,
            blob=self._api.blob,
            prefix="cpe-github-conflict-",
        )

    def _entry(self, commit: str, path: str) -> tuple[str, str] | None:
        """The mode and object of ``path`` in ``commit`` (a file or a submodule), or None."""
        return self._api.tree_entry(self._api.commit(commit).tree.sha, path)

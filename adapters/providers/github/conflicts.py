"""Where a revision conflicts with the default branch on GitHub: the files, and the hunks.

GitHub's "Merge a branch" answers a conflict with a bare 409 that names no file. They are found
here as ``patches`` builds trees, without a clone. Two comparisons give the files each side
changed since their merge base; only a path both sides changed can conflict textually (a
rename counts under both its names). Those paths as they are in the merge base and in each head
(blobs through the Git Data API; trees and commits are cached) become three stand-in commits in
a throwaway repository, and ``git merge-tree`` merges them as GitHub would: the files that
conflict, with their hunks (``adapters.providers.git_conflicts``).

When that cannot tell — too many paths to fetch, a blob GitHub will not give, or stand-ins that
merge cleanly (the conflict is of a kind the paths both sides changed do not show, a file
against a directory) — the paths both sides changed are named instead: a superset of the
conflicting files, and the caller says so.
"""

from __future__ import annotations

import logging
import tempfile
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import git
from githubkit_schemas.latest.models import CommitComparison, DiffEntry

from adapters.providers.git import GitRepo
from adapters.providers.git_conflicts import merge_commits
from adapters.providers.github.api import GitHubApi
from domain.errors import ProviderError

log = logging.getLogger(__name__)

MAX_PATHS = 100  # paths fetched three times over to merge them here; past that, approximated
_SUBMODULE = "160000"


@dataclass(frozen=True)
class Conflict:
    """The files a merge conflicts in, and their hunks. ``exact``: git's own answer; else
    the paths both sides changed (no hunks)."""

    files: tuple[str, ...]
    detail: str = ""
    exact: bool = False


def _files(comparison: CommitComparison) -> list[DiffEntry]:
    return comparison.files if isinstance(comparison.files, list) else []


def _names(entry: DiffEntry) -> set[str]:
    old = entry.previous_filename
    return {entry.filename} | ({old} if isinstance(old, str) and old else set())


@contextmanager
def _scratch_repo() -> Iterator[GitRepo]:
    with tempfile.TemporaryDirectory(prefix="cpe-github-conflict-") as tmp:
        root = Path(tmp)
        git.Git(str(root)).execute(["git", "init", "--quiet", str(root)])
        yield GitRepo(root)


class ConflictFinder:
    def __init__(self, api: GitHubApi) -> None:
        self._api = api

    def find(self, head: str, head_label: str, base: str, base_label: str) -> Conflict:
        """The conflicts of merging ``base`` (the default branch's head) into ``head`` (the
        revision's); the labels name the two sides in the hunks' markers."""
        changed_here = _files(self._api.compare(base, head))  # since the merge base
        theirs = self._api.compare(head, base)
        changed_there = _files(theirs)
        here = {name for entry in changed_here for name in _names(entry)}
        both = here & {name for entry in changed_there for name in _names(entry)}
        if not both:
            return Conflict(())
        paths = set(both)
        for entry in (*changed_here, *changed_there):
            if _names(entry) & both:
                paths |= _names(entry)  # a rename's other name: git pairs them up
        if len(paths) <= MAX_PATHS:
            try:
                found = self._merge_stand_ins(
                    theirs.merge_base_commit.sha, (head, head_label), (base, base_label), paths
                )
            except ProviderError as exc:
                log.warning("the conflicting files could not be merged here: %s", exc)
            else:
                if found is not None:
                    return found
        return Conflict(tuple(sorted(both)))

    def _merge_stand_ins(
        self, merge_base: str, ours: tuple[str, str], theirs: tuple[str, str], paths: set[str]
    ) -> Conflict | None:
        with _scratch_repo() as repo:
            root = self._stand_in(repo, merge_base, paths, [])
            sides = []
            for sha, label in (ours, theirs):
                commit = self._stand_in(repo, sha, paths, [root])
                try:  # the branch's own name in the conflict markers, where git takes it
                    repo.update_ref(f"refs/heads/{label}", commit)
                    sides.append(label)
                except ProviderError:
                    sides.append(commit)
            merged = merge_commits(repo, sides[0], sides[1])
        if merged.tree is not None or not merged.files:
            return None  # the stand-ins merge: the conflict lies elsewhere
        return Conflict(merged.files, merged.detail, exact=True)

    def _stand_in(
        self, repo: GitRepo, commit: str, paths: Iterable[str], parents: list[str]
    ) -> str:
        """A commit holding just ``paths`` as they are in ``commit`` on GitHub."""
        tree = self._api.commit(commit).tree.sha
        env = {"GIT_INDEX_FILE": str(repo.root / ".git" / "cpe-stand-in-index")}
        repo.run("read-tree", "--empty", env=env)
        for path in sorted(paths):
            entry = self._entry(tree, path)
            if entry is None:
                continue  # not there on this side
            mode, sha = entry
            if mode != _SUBMODULE:
                self._write_blob(repo, sha, path)
            repo.run("update-index", "--add", "--cacheinfo", f"{mode},{sha},{path}", env=env)
        made = repo.run("write-tree", env=env).line
        return repo.commit_tree(made, parents, f"stand-in for {commit}")

    def _write_blob(self, repo: GitRepo, sha: str, path: str) -> None:
        if repo.run_status("cat-file", "-e", sha).status == 0:
            return
        blob = repo.root / ".git" / "cpe-blob"
        blob.write_bytes(self._api.blob(sha))
        written = repo.run("hash-object", "-w", "--no-filters", str(blob)).line
        if written != sha:
            raise ProviderError(f"blob {sha} of {path} came back as {written}")

    def _entry(self, tree: str, path: str) -> tuple[str, str] | None:
        """The mode and object of ``path`` in ``tree`` (a file or a submodule), or None."""
        return self._api.tree_entry(tree, path)

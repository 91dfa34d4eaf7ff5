"""``GitDataCalls``: the Git Data API part of ``GitHubApi`` (refs, blobs, trees, commits).

Git objects are immutable: trees and commits are cached by sha, so walking a revision's history
or a base tree twice costs nothing. Trees may carry the content of text files inline
(``create_tree``): GitHub writes those blobs itself, one request instead of one per file.
"""

from __future__ import annotations

import base64
import threading
from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import Any

from githubkit import GitHub
from githubkit_schemas.latest.models import GitCommit, GitTreePropTreeItems

from domain.errors import NotFoundError


class GitDataCalls:
    """Mixed into ``GitHubApi``, which provides the client, the repository and ``translated``."""

    gh: GitHub[Any]
    owner: str
    repo: str
    _commits: dict[str, GitCommit]
    _trees: dict[str, list[GitTreePropTreeItems]]
    _lock: threading.Lock

    def translated(self, what: str) -> AbstractContextManager[None]:
        raise NotImplementedError  # GitHubApi.translated

    def branch_head(self, branch: str) -> str | None:
        try:
            with self.translated(f"get branch {branch}"):
                return self.gh.rest.git.get_ref(
                    self.owner, self.repo, f"heads/{branch}"
                ).parsed_data.object_.sha
        except NotFoundError:
            return None

    def create_branch(self, branch: str, sha: str) -> None:
        with self.translated(f"create branch {branch}"):
            self.gh.rest.git.create_ref(self.owner, self.repo, ref=f"refs/heads/{branch}", sha=sha)

    def move_branch(self, branch: str, sha: str, *, force: bool = False) -> None:
        with self.translated(f"move branch {branch}"):
            self.gh.rest.git.update_ref(
                self.owner, self.repo, f"heads/{branch}", sha=sha, force=force
            )

    def create_blob(self, content: bytes) -> str:
        with self.translated("create a blob"):
            return self.gh.rest.git.create_blob(
                self.owner,
                self.repo,
                content=base64.b64encode(content).decode(),
                encoding="base64",
            ).parsed_data.sha

    def blob(self, sha: str) -> bytes:
        with self.translated(f"get blob {sha[:12]}"):
            data = self.gh.rest.git.get_blob(self.owner, self.repo, sha).parsed_data
        return base64.b64decode(data.content)

    def tree(self, sha: str) -> list[GitTreePropTreeItems]:
        """A tree's direct entries (trees are immutable: cached by sha)."""
        with self._lock:
            cached = self._trees.get(sha)
        if cached is None:
            with self.translated(f"get tree {sha[:12]}"):
                cached = self.gh.rest.git.get_tree(self.owner, self.repo, sha).parsed_data.tree
            with self._lock:
                self._trees[sha] = cached
        return cached

    def tree_entry(self, tree: str, path: str) -> tuple[str, str] | None:
        """The mode and object of ``path`` in ``tree`` (a file or a submodule), walked down
        one cached tree at a time; None when it is not there or is a directory."""
        *dirs, name = path.split("/")
        for part in dirs:
            found = next((e for e in self.tree(tree) if e.path == part), None)
            if found is None or found.type != "tree":
                return None
            tree = found.sha
        entry = next((e for e in self.tree(tree) if e.path == name), None)
        if entry is None or entry.type == "tree":
            return None
        return entry.mode, entry.sha

    def create_tree(self, base_tree: str, entries: list[dict[str, Any]]) -> str:
        payload: Any = {"base_tree": base_tree, "tree": entries}  # sha None deletes: see patches
        with self.translated("create a tree"):
            return self.gh.rest.git.create_tree(self.owner, self.repo, data=payload).parsed_data.sha

    def commit(self, sha: str) -> GitCommit:
        """A commit (immutable: cached by sha)."""
        with self._lock:
            cached = self._commits.get(sha)
        if cached is None:
            with self.translated(f"get commit {sha[:12]}"):
                cached = self.gh.rest.git.get_commit(self.owner, self.repo, sha).parsed_data
            with self._lock:
                self._commits[sha] = cached
        return cached

    def create_commit(self, message: str, tree: str, parents: Sequence[str]) -> str:
        with self.translated("create a commit"):
            made = self.gh.rest.git.create_commit(
                self.owner, self.repo, message=message, tree=tree, parents=list(parents)
            ).parsed_data
        with self._lock:
            self._commits[made.sha] = made
        return made.sha

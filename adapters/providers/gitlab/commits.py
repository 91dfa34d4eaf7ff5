"""``Repository``: the repository calls of the GitLab forge (branches, commits, trees, blobs,
comparisons), and the Commits API, the one way cpe writes a commit on GitLab.

Git objects are immutable: commits and tree listings are cached by sha, so walking a revision's
history or looking up paths in a base tree twice costs nothing. A tree is read one directory at
a time (``/repository/tree?path=``), which gives each entry's mode and blob id; blobs come by id
(``/repository/blobs/:sha/raw``), so each can be checked against git's own hash of its bytes
(``adapters/providers/stand_ins.py``).

``POST /repository/commits`` makes one commit from a list of actions (create, update, delete,
move, chmod) on a branch: on its head, or, for a new branch or with ``force`` (the branch
rewritten), on ``start_sha``. It is never sent twice: a failed answer is followed by reading the
branch, and the commit found there by its ``Cpe-Key`` trailer (``revisions``).
"""

from __future__ import annotations

import threading
from typing import Any
from urllib.parse import quote

from adapters.providers.gitlab.api import GitLabApi, Json
from adapters.providers.stand_ins import Entry
from domain.errors import NotFoundError, ProviderError

_CACHE_LIMIT = 4096  # cached commits (and, apart, tree listings); past it the cache restarts


def _full_sha(ref: str) -> bool:
    return len(ref) == 40 and all(c in "0123456789abcdef" for c in ref)


class Repository:
    def __init__(self, api: GitLabApi) -> None:
        self._api = api
        self._lock = threading.Lock()
        self._commits: dict[str, Json] = {}
        self._trees: dict[tuple[str, str], dict[str, Json]] = {}

    # ------------------------------------------------------------------ branches

    def branch_head(self, branch: str) -> str | None:
        """The commit ``branch`` points at; None when there is no such branch."""
        try:
            found = self._api.get(
                f"get branch {branch}", f"/repository/branches/{quote(branch, safe='')}"
            )
        except NotFoundError:
            return None
        return str(found["commit"]["id"])

    def head(self, branch: str) -> str:
        sha = self.branch_head(branch)
        if sha is None:
            raise NotFoundError(f"branch {branch!r} does not exist on GitLab")
        return sha

    # ------------------------------------------------------------------ commits

    def commit(self, sha: str) -> Json:
        """A commit: ``id``, ``parent_ids``, ``message``… (cached when named by its full id)."""
        with self._lock:
            cached = self._commits.get(sha)
        if cached is not None:
            return cached
        found = dict(
            self._api.get(
                f"get commit {sha[:12]}",
                f"/repository/commits/{quote(sha, safe='')}",
                {"stats": "false"},
            )
        )
        if _full_sha(sha):
            with self._lock:
                if len(self._commits) >= _CACHE_LIMIT:
                    self._commits.clear()
                self._commits[sha] = found
        return found

    def parents(self, sha: str) -> list[str]:
        return [str(p) for p in self.commit(sha).get("parent_ids") or []]

    def message(self, sha: str) -> str:
        return str(self.commit(sha).get("message") or "")

    def create_commit(
        self,
        branch: str,
        message: str,
        actions: list[Json],
        *,
        start_sha: str | None = None,
        force: bool = False,
    ) -> str:
        """One commit of ``actions`` on ``branch`` (on ``start_sha`` for a new branch, or with
        ``force``, which rewrites it); its sha."""
        data: dict[str, Any] = {"branch": branch, "commit_message": message, "actions": actions}
        if start_sha is not None:
            data["start_sha"] = start_sha
        if force:
            data["force"] = True
        made = self._api.post(f"commit to branch {branch}", "/repository/commits", data)
        return str(made["id"])

    # ------------------------------------------------------------------ trees and blobs

    def tree_entry(self, commit: str, path: str) -> Entry | None:
        """The mode and object of ``path`` at ``commit`` (a file or a submodule); None when it
        is not there or is a directory."""
        directory, _, name = path.rpartition("/")
        found = self._listing(commit, directory).get(name)
        if found is None or found.get("type") == "tree":
            return None
        return str(found["mode"]), str(found["id"])

    def _listing(self, commit: str, directory: str) -> dict[str, Json]:
        key = (commit, directory)
        with self._lock:
            cached = self._trees.get(key)
        if cached is not None:
            return cached
        query = {"ref": commit, **({"path": directory} if directory else {})}
        try:
            items = self._api.all_pages(
                f"list {directory or 'the root'} at {commit[:12]}", "/repository/tree", query
            )
        except NotFoundError:
            items = []  # no such directory there
        listing = {str(item["name"]): item for item in items}
        if _full_sha(commit):
            with self._lock:
                if len(self._trees) >= _CACHE_LIMIT:
                    self._trees.clear()
                self._trees[key] = listing
        return listing

    def blob(self, sha: str) -> bytes:
        """A blob's bytes, by its id (``NotFoundError`` when the project has no such blob)."""
        with self._api.translated(f"get blob {sha[:12]}"):
            response = self._api.gl.http_get(
                f"/projects/{self._api.pid}/repository/blobs/{quote(sha, safe='')}/raw", raw=True
            )
        content = getattr(response, "content", None)
        if not isinstance(content, bytes):
            raise ProviderError(f"get blob {sha[:12]}: GitLab sent no bytes", transient=True)
        return content

    # ------------------------------------------------------------------ comparing

    def changed_names(self, base: str, head: str) -> tuple[frozenset[str], ...]:
        """The paths ``head`` changed since its merge base with ``base``, a rename as both its
        names."""
        compared = self._api.get(
            f"compare {base[:12]}...{head[:12]}",
            "/repository/compare",
            {"from": base, "to": head, "straight": "false"},
        )
        diffs = compared.get("diffs") if isinstance(compared, dict) else None
        return tuple(
            frozenset({str(d["old_path"]), str(d["new_path"])})
            for d in diffs or []
            if isinstance(d, dict)
        )

    def merge_base(self, a: str, b: str) -> str | None:
        """The best common ancestor of two commits; None when GitLab has no such commit or
        they share none."""
        try:
            found = self._api.get(
                f"merge base of {a[:12]} and {b[:12]}",
                "/repository/merge_base",
                {"refs[]": [a, b]},
            )
        except ProviderError as exc:
            if isinstance(exc, NotFoundError) or exc.status in (400, 422):
                return None
            raise
        return str(found["id"]) if isinstance(found, dict) and found.get("id") else None

    def contains(self, head: str, base: str) -> bool:
        """Whether ``head``'s history holds ``base``."""
        return head == base or self.merge_base(base, head) == base

"""A patch turned into a tree on GitHub without a clone and without a push.

The patch is applied to a stand-in of its base (``adapters/providers/patches.py``: the touched
paths' blobs at the base commit, fetched through the Git Data API, in a throwaway repository;
three-way when the base has moved under the patch). What changed between the stand-in and the
result becomes a ``create_tree`` over the real base tree: new blobs uploaded, deleted paths sent
with ``sha: null``. Blob ids are git's own hashes, so each uploaded blob must come back with the
id computed here.

Text files go into the tree request itself (``content``): GitHub writes those blobs, so a patch
of a hundred source files is one write, not a hundred and one (GitHub limits content-creating
requests to about 80 a minute). The tree GitHub makes is then checked against the tree computed
here (git's own object format, from the base trees already fetched); should they differ, the
files are uploaded as blobs after all.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Mapping
from typing import Any

from adapters.providers.git import GitRepo
from adapters.providers.github.api import GitHubApi
from adapters.providers.patches import applied_patch
from adapters.providers.stand_ins import Change, Entry
from domain.errors import ProviderError

log = logging.getLogger(__name__)

_INLINE_MODES = frozenset({"100644", "100755"})
_INLINE_FILE_MAX = 256 * 1024  # bytes of one file sent inline; larger ones are uploaded
_INLINE_TOTAL_MAX = 1024 * 1024  # bytes inline in one tree request


def inline_text(content: bytes, mode: str) -> str | None:
    """The file as text GitHub can write byte for byte from a tree request, else None."""
    if mode not in _INLINE_MODES or len(content) > _INLINE_FILE_MAX or b"\0" in content:
        return None
    try:
        return content.decode("utf-8")
    except UnicodeDecodeError:
        return None


def tree_sha(entries: Mapping[str, tuple[str, str, str]]) -> str:
    """Git's id of a tree holding ``entries`` (name -> (mode, type, sha)), as git hashes it."""

    def order(name: str) -> bytes:  # git sorts a subtree as if its name ended with "/"
        return name.encode() + (b"/" if entries[name][1] == "tree" else b"")

    body = b"".join(
        f"{entries[name][0].lstrip('0')} {name}".encode() + b"\0" + bytes.fromhex(entries[name][2])
        for name in sorted(entries, key=order)
    )
    return hashlib.sha1(b"tree %d\0" % len(body) + body).hexdigest()  # git's object id


class TreeBuilder:
    def __init__(self, api: GitHubApi) -> None:
        self._api = api

    def tree_for(self, base_commit: str, patch: str) -> str:
        """The sha of a tree on GitHub: ``base_commit``'s tree with ``patch`` applied."""
        base_tree = self._api.commit(base_commit).tree.sha
        with applied_patch(
            patch,
            lambda path: self._api.tree_entry(base_tree, path),
            self._api.blob,
            prefix="cpe-github-patch-",
        ) as done:
            changes = done.changes
            if not changes:
                return base_tree
            entries, inlined = self._entries(done.repo, changes, done.known)
            made = self._api.create_tree(base_tree, entries)
            if not inlined:
                return made
            expected = self._expected_tree(base_tree, changes)
            if made == expected:
                return made
            log.warning(
                "GitHub made tree %s from inline files where %s was expected; uploading them",
                made,
                expected,
            )
            entries, _ = self._entries(done.repo, changes, done.known, inline=False)
            return self._api.create_tree(base_tree, entries)

    def _entries(
        self,
        repo: GitRepo,
        changes: dict[str, Change],
        known: dict[str, Entry],
        *,
        inline: bool = True,
    ) -> tuple[list[dict[str, Any]], bool]:
        """The ``create_tree`` entries for ``changes``: text inline (up to a budget), other new
        blobs uploaded first; and whether any went inline."""
        on_github = {sha for _mode, sha in known.values()}
        budget = _INLINE_TOTAL_MAX if inline else 0
        entries: list[dict[str, Any]] = []
        inlined = False
        for path, change in changes.items():
            if change is None:
                entries.append({"path": path, "mode": "100644", "type": "blob", "sha": None})
                continue
            mode, kind, sha = change
            entry: dict[str, Any] = {"path": path, "mode": mode, "type": kind, "sha": sha}
            if kind == "blob" and sha not in on_github:
                content = repo.run("cat-file", "blob", sha).stdout
                text = inline_text(content, mode) if len(content) <= budget else None
                if text is not None:
                    entry = {"path": path, "mode": mode, "type": kind, "content": text}
                    budget -= len(content)
                    inlined = True
                else:
                    uploaded = self._api.create_blob(content)
                    if uploaded != sha:
                        raise ProviderError(f"GitHub stored {path} as {uploaded}, expected {sha}")
                    on_github.add(sha)
            entries.append(entry)
        return entries, inlined

    def _expected_tree(self, base_tree: str, changes: dict[str, Change]) -> str:
        """The root tree ``changes`` make of ``base_tree``, computed here: the directories they
        touch were fetched (cached) to find the files, the others keep their ids."""

        def build(tree: str | None, prefix: str) -> str | None:
            entries = (
                {e.path: (e.mode, e.type, e.sha) for e in self._api.tree(tree)} if tree else {}
            )
            below: set[str] = set()
            for path, change in changes.items():
                if not path.startswith(prefix):
                    continue
                name, slash, _ = path[len(prefix) :].partition("/")
                if slash:
                    below.add(name)
                elif change is None:
                    entries.pop(name, None)
                else:
                    entries[name] = change
            for name in sorted(below):
                child = entries.get(name)
                made = build(child[2] if child and child[1] == "tree" else None, f"{prefix}{name}/")
                if made is not None:
                    entries[name] = ("40000", "tree", made)
                elif child is not None and child[1] == "tree":
                    del entries[name]  # emptied: git keeps no empty directories
            return tree_sha(entries) if entries else None

        return build(base_tree, "") or tree_sha({})

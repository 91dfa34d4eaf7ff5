"""A patch turned into a tree on GitHub without a clone and without a push.

``git apply`` does the applying (it is reliable for renames, deletions, modes, binary and CRLF,
which a hand-written applier would not be), in a throwaway repository that holds only what the patch
touches: the blobs of those paths at the base commit are fetched through the Git Data API, staged in
a temporary index as a stand-in base, and the patch is applied there (``GitRepo.tree_with_patch``,
shared with the local provider). When the base has moved under the patch, the blobs the patch was
made against are fetched too, so the three-way apply can merge as it does locally. What changed
between the stand-in and the result becomes a ``create_tree`` over the real base tree: new blobs
uploaded, deleted paths sent with ``sha: null``. Blob ids are git's own hashes, so each uploaded
blob must come back with the id computed here.

Text files go into the tree request itself (``content``): GitHub writes those blobs, so a patch
of a hundred source files is one write, not a hundred and one (GitHub limits content-creating
requests to about 80 a minute). The tree GitHub makes is then checked against the tree computed
here (git's own object format, from the base trees already fetched); should they differ, the
files are uploaded as blobs after all.
"""

from __future__ import annotations

import hashlib
import logging
import re
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import git

from adapters.providers.git import GitRepo
from adapters.providers.github.api import GitHubApi
from domain.errors import NotFoundError, PatchError, ProviderError

log = logging.getLogger(__name__)

_SUBMODULE = "160000"
_INLINE_MODES = frozenset({"100644", "100755"})
_INLINE_FILE_MAX = 256 * 1024  # bytes of one file sent inline; larger ones are uploaded
_INLINE_TOTAL_MAX = 1024 * 1024  # bytes inline in one tree request
_SOURCES = re.compile(r"^(?:rename|copy) from (.+)$", re.MULTILINE)
# ``index <pre-image>..<post-image>``: full ids (cpe's patches are made with --full-index)
_PREIMAGE = re.compile(r"^index ([0-9a-f]{40})\.\.[0-9a-f]{40}", re.MULTILINE)


@dataclass(frozen=True)
class _Entry:
    mode: str
    sha: str


Change = tuple[str, str, str] | None  # (mode, type, sha) of a path after the patch; None: deleted


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


@contextmanager
def _scratch_repo() -> Iterator[GitRepo]:
    with tempfile.TemporaryDirectory(prefix="cpe-github-patch-") as tmp:
        root = Path(tmp)
        git.Git(str(root)).execute(["git", "init", "--quiet", str(root)])
        yield GitRepo(root)


def _unquote(path: str) -> str:
    """A path as git prints it in patch headers: C-quoted when it has special characters."""
    if not (path.startswith('"') and path.endswith('"')):
        return path
    raw = path[1:-1].encode("latin-1", "backslashreplace").decode("unicode_escape")
    return raw.encode("latin-1").decode("utf-8", "surrogateescape")


def touched_paths(repo: GitRepo, patch_file: Path, patch: str) -> list[str]:
    """Every path the patch reads or writes, both names of a rename included: git's own parse
    (``apply --numstat``), plus the ``rename from`` lines it leaves out for pure renames."""
    out = repo.run("apply", "--numstat", "-z", str(patch_file), error=PatchError).text
    fields = out.split("\0")
    paths = [_unquote(m) for m in _SOURCES.findall(patch)]
    i = 0
    while i < len(fields) and fields[i]:
        _added, _deleted, path = fields[i].split("\t", 2)
        if path:
            paths.append(path)
            i += 1
        else:  # a rename or copy: the two names follow
            paths += [fields[i + 1], fields[i + 2]]
            i += 3
    return list(dict.fromkeys(paths))


class TreeBuilder:
    def __init__(self, api: GitHubApi) -> None:
        self._api = api

    def tree_for(self, base_commit: str, patch: str) -> str:
        """The sha of a tree on GitHub: ``base_commit``'s tree with ``patch`` applied."""
        if not patch.strip():
            raise PatchError("the patch is empty")
        base_tree = self._api.commit(base_commit).tree.sha
        with _scratch_repo() as repo:
            patch_file = repo.root / ".git" / "cpe.patch"
            patch_file.write_bytes(patch.encode("utf-8", "surrogateescape"))
            known = {
                p: e
                for p in touched_paths(repo, patch_file, patch)
                if (e := self._lookup(base_tree, p))
            }
            stand_in = self._stand_in(repo, known)
            try:
                result = repo.tree_with_patch(stand_in, patch)
            except PatchError:
                # The base moved under the patch: fetch the blobs it was made against (its
                # ``index`` lines name them) so ``git apply --3way`` can merge, as locally.
                if not self._fetch_preimages(repo, patch, known):
                    raise
                result = repo.tree_with_patch(stand_in, patch)
            changes = self._changes(repo, repo.tree_of(stand_in), result)
            if not changes:
                return base_tree
            entries, inlined = self._entries(repo, changes, known)
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
            entries, _ = self._entries(repo, changes, known, inline=False)
            return self._api.create_tree(base_tree, entries)

    def _fetch_preimages(self, repo: GitRepo, patch: str, known: dict[str, _Entry]) -> bool:
        """Write into ``repo`` the pre-image blobs the patch names and the stand-in lacks;
        whether any was fetched. A blob GitHub does not have is skipped."""
        have = {entry.sha for entry in known.values()}
        fetched = False
        for sha in dict.fromkeys(_PREIMAGE.findall(patch)):
            if sha in have or set(sha) == {"0"}:
                continue
            try:
                content = self._api.blob(sha)
            except NotFoundError:
                continue
            blob = repo.root / ".git" / "cpe-preimage"
            blob.write_bytes(content)
            if repo.run("hash-object", "-w", "--no-filters", str(blob)).line == sha:
                fetched = True
        return fetched

    def _lookup(self, tree: str, path: str) -> _Entry | None:
        found = self._api.tree_entry(tree, path)
        return _Entry(*found) if found is not None else None

    def _stand_in(self, repo: GitRepo, known: dict[str, _Entry]) -> str:
        """A commit holding just the touched paths as they are at the base."""
        index = repo.root / ".git" / "cpe-index"
        env = {"GIT_INDEX_FILE": str(index)}
        repo.run("read-tree", "--empty", env=env)
        for path, entry in known.items():
            if entry.mode != _SUBMODULE:
                blob = repo.root / ".git" / "cpe-blob"
                blob.write_bytes(self._api.blob(entry.sha))
                written = repo.run("hash-object", "-w", "--no-filters", str(blob)).line
                if written != entry.sha:
                    raise ProviderError(f"blob {entry.sha} of {path} came back as {written}")
            repo.run(
                "update-index", "--add", "--cacheinfo", f"{entry.mode},{entry.sha},{path}",
                env=env,
            )  # fmt: skip
        tree = repo.run("write-tree", env=env).line
        return repo.commit_tree(tree, [], "stand-in base")

    def _changes(self, repo: GitRepo, before: str, after: str) -> dict[str, Change]:
        """Each path the patch changes, with what it is after (None: deleted)."""
        raw = repo.run("diff-tree", "-r", "-z", "--no-renames", before, after).text
        fields = raw.split("\0")
        changes: dict[str, Change] = {}
        for meta, path in zip(fields[0::2], fields[1::2], strict=False):
            if not meta:
                break
            _old_mode, new_mode, _old_sha, new_sha, status = meta.lstrip(":").split()
            kind = "commit" if new_mode == _SUBMODULE else "blob"
            changes[path] = None if status == "D" else (new_mode, kind, new_sha)
        return changes

    def _entries(
        self,
        repo: GitRepo,
        changes: dict[str, Change],
        known: dict[str, _Entry],
        *,
        inline: bool = True,
    ) -> tuple[list[dict[str, Any]], bool]:
        """The ``create_tree`` entries for ``changes``: text inline (up to a budget), other new
        blobs uploaded first; and whether any went inline."""
        on_github = {e.sha for e in known.values()}
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

"""A patch applied to a commit that lives on a forge, without a clone and without a push.

``git apply`` does the applying (it is reliable for renames, deletions, modes, binary and CRLF,
which a hand-written applier would not be), in a throwaway repository that holds only what the
patch touches: each touched path's mode and blob at the base commit are asked of the forge
(``lookup``, ``blob``), staged as a stand-in base (``stand_ins``), and the patch is applied there
(``GitRepo.tree_with_patch``, shared with the local provider). When the base has moved under the
patch, the blobs the patch was made against (its ``index`` lines) are fetched too, so the
three-way apply can merge as it does locally. What changed between the stand-in and the result
is what the forge must write (``Applied.changes``); each forge turns it into its own requests
(GitHub: a tree; GitLab: the Commits API's actions).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from adapters.providers.git import GitRepo
from adapters.providers.stand_ins import (
    Change,
    Entry,
    scratch_repo,
    stand_in,
    tree_changes,
    write_blob,
)
from domain.errors import NotFoundError, PatchError, ProviderError

_SOURCES = re.compile(r"^(?:rename|copy) from (.+)$", re.MULTILINE)
_RENAME = re.compile(r"^rename from (.+)\nrename to (.+)$", re.MULTILINE)
# ``index <pre-image>..<post-image>``: full ids (cpe's patches are made with --full-index)
_PREIMAGE = re.compile(r"^index ([0-9a-f]{40})\.\.[0-9a-f]{40}", re.MULTILINE)


def unquote(path: str) -> str:
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
    paths = [unquote(m) for m in _SOURCES.findall(patch)]
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


def renames(patch: str) -> dict[str, str]:
    """The renames a patch makes: new path -> old path."""
    return {unquote(new): unquote(old) for old, new in _RENAME.findall(patch)}


@dataclass(frozen=True)
class Applied:
    """A patch applied in a scratch repository (open while the ``applied_patch`` block runs, to
    read the new blobs from). ``known``: the paths looked up, as they are at the base (absent:
    not there); ``base``: the stand-in commit of them; ``tree``: the stand-in with the patch
    applied; ``changes``: what differs between the two."""

    repo: GitRepo
    known: dict[str, Entry]
    base: str
    tree: str
    changes: dict[str, Change]

    def content(self, sha: str) -> bytes:
        """A blob of the result (a new file's bytes)."""
        return self.repo.run("cat-file", "blob", sha).stdout


@contextmanager
def applied_patch(
    patch: str,
    lookup: Callable[[str], Entry | None],
    blob: Callable[[str], bytes],
    *,
    also: Iterable[str] = (),
    prefix: str = "cpe-patch-",
) -> Iterator[Applied]:
    """``patch`` applied to a base the forge holds: ``lookup(path)`` says what a path is at the
    base (None: not there), ``blob(sha)`` gives a blob's bytes (``NotFoundError`` when the forge
    has none). ``also``: more paths to look up and stage beside those the patch touches (what
    another commit changed, to compare against). ``PatchError`` when the patch does not apply."""
    if not patch.strip():
        raise PatchError("the patch is empty")
    with scratch_repo(prefix) as repo:
        patch_file = repo.root / ".git" / "cpe.patch"
        patch_file.write_bytes(patch.encode("utf-8", "surrogateescape"))
        paths = dict.fromkeys([*touched_paths(repo, patch_file, patch), *also])
        known = {p: e for p in paths if (e := lookup(p)) is not None}
        base = stand_in(repo, known, blob, message="stand-in base")
        try:
            result = repo.tree_with_patch(base, patch)
        except PatchError:
            # The base moved under the patch: fetch the blobs it was made against (its
            # ``index`` lines name them) so ``git apply --3way`` can merge, as locally.
            if not _fetch_preimages(repo, patch, known, blob):
                raise
            result = repo.tree_with_patch(base, patch)
        yield Applied(repo, known, base, result, tree_changes(repo, repo.tree_of(base), result))


def _fetch_preimages(
    repo: GitRepo, patch: str, known: dict[str, Entry], blob: Callable[[str], bytes]
) -> bool:
    """Write into ``repo`` the pre-image blobs the patch names and the stand-in lacks; whether
    any was fetched. A blob the forge does not have is skipped."""
    have = {sha for _mode, sha in known.values()}
    fetched = False
    for sha in dict.fromkeys(_PREIMAGE.findall(patch)):
        if sha in have or set(sha) == {"0"}:
            continue
        try:
            content = blob(sha)
        except NotFoundError:
            continue
        try:
            write_blob(repo, sha, content, "a pre-image")
        except ProviderError:
            continue  # other bytes than the patch was made against: no help
        fetched = True
    return fetched

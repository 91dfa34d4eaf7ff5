"""``SpecProviderReader`` over git: spec files as committed on the default branch.

Specs are read from the default branch's head commit, never the working tree: a spec a user is
still editing (or has committed on another branch) is not planned until it lands. The blob SHA
git already computed is the spec's version, and any old version stays readable by that SHA for
the planner's diff.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

from adapters.git_plumbing import GitRepo, detect_default_branch
from adapters.specs.globs import PathMatcher
from domain.errors import NotFoundError
from domain.models import Spec

DEFAULT_SPEC_GLOBS: tuple[str, ...] = ("specs/**/*.md",)

# Regular files only: a symlink's blob is its target path, and a submodule has no blob at all.
_FILE_MODES = ("100644", "100755")
_HEX = re.compile(r"[0-9a-f]{4,64}")


class GitSpecReader:
    """Specs matching ``globs`` at the head of ``default_branch`` (a branch or any ref, e.g.
    ``origin/main``; detected like the local provider's when None)."""

    def __init__(
        self,
        repo_root: Path | str,
        globs: Sequence[str] = DEFAULT_SPEC_GLOBS,
        *,
        default_branch: str | None = None,
    ) -> None:
        self._repo = GitRepo(Path(repo_root))
        self._branch = default_branch or detect_default_branch(self._repo)
        self._matches = PathMatcher(globs)

    def _head(self) -> str:
        sha = self._repo.resolve(f"refs/heads/{self._branch}") or self._repo.resolve(self._branch)
        if sha is None:
            raise NotFoundError(f"default branch {self._branch!r} does not exist")
        return sha

    def list_specs(self) -> Sequence[Spec]:
        listing = self._repo.run("ls-tree", "-r", "-z", "--full-tree", self._head())
        specs: list[Spec] = []
        for entry in listing.text.split("\0"):
            if not entry:
                continue
            meta, path = entry.split("\t", 1)
            mode, kind, sha = meta.split(" ")
            if kind == "blob" and mode in _FILE_MODES and self._matches(path):
                specs.append(Spec(path=path, blob_sha=sha))
        return specs

    def read_spec(self, path: str) -> str:
        head = self._head()
        found = self._repo.run_status("cat-file", "blob", f"{head}:{path.lstrip('/')}")
        if found.status != 0:
            raise NotFoundError(f"no file {path!r} on {self._branch} ({head[:12]})")
        return _decode(found.stdout)

    def read_blob(self, blob_sha: str) -> str:
        # Hex only: cat-file would also take a revision expression such as "main:README.md".
        if _HEX.fullmatch(blob_sha) is None:
            raise NotFoundError(f"{blob_sha!r} is not a blob SHA")
        kind = self._repo.run_status("cat-file", "-t", blob_sha)
        if kind.status != 0 or kind.line != "blob":
            raise NotFoundError(f"no blob {blob_sha!r} in {self._repo.root}")
        return _decode(self._repo.run("cat-file", "blob", blob_sha).stdout)


def _decode(data: bytes) -> str:
    # Specs are markdown; a stray invalid byte should not make the whole spec unreadable.
    return data.decode("utf-8", "replace")

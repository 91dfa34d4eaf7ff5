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

import structlog
import yaml

from adapters.providers.git import GitRepo, detect_default_branch
from adapters.providers.specs.globs import PathMatcher
from domain.errors import NotFoundError
from domain.models import Spec

DEFAULT_SPEC_GLOBS: tuple[str, ...] = ("specs/**/*.md",)
# What a spec may weigh: a model's context (about 200k tokens, some 800 kB of text) holds it with
# room for the work items, the diff and the answer.
DEFAULT_SPEC_MAX_BYTES = 256_000
FETCH_TIMEOUT = 120.0  # seconds: a fetch from a remote that hangs is killed

# Regular files only: a symlink's blob is its target path, and a submodule has no blob at all.
_FILE_MODES = ("100644", "100755")
_HEX = re.compile(r"[0-9a-f]{4,64}")

log = structlog.get_logger("cpe.specs")


class GitSpecReader:
    """Specs matching ``globs`` at the head of ``default_branch`` (a branch or any ref, e.g.
    ``origin/main``; detected like the local provider's when None).

    With ``remote`` (a code host the repository is a clone of, as with the GitHub provider),
    each listing first fetches the default branch from it, and specs are read at the fetched
    head (``refs/remotes/<remote>/<branch>``): a spec pushed there is planned without anyone
    pulling into the local checkout. A fetch that fails is logged and the last fetched head is
    read."""

    def __init__(
        self,
        repo_root: Path | str,
        globs: Sequence[str] = DEFAULT_SPEC_GLOBS,
        *,
        default_branch: str | None = None,
        max_bytes: int = DEFAULT_SPEC_MAX_BYTES,
        remote: str | None = None,
    ) -> None:
        self._repo = GitRepo(Path(repo_root))
        self._branch = default_branch or detect_default_branch(self._repo)
        self._remote = remote
        self._matches = PathMatcher(globs)
        self._max_bytes = max_bytes
        self._problems: dict[str, str | None] = {}  # blob sha → its problem, judged once
        self._fetch_failed: str | None = None  # the last fetch error, told once

    def _head(self) -> str:
        if self._remote is not None:
            ref = f"refs/remotes/{self._remote}/{self._branch}"
            sha = self._repo.resolve(ref)
            if sha is None:
                raise NotFoundError(f"{ref} does not exist: fetch {self._remote} once by hand")
            return sha
        sha = self._repo.resolve(f"refs/heads/{self._branch}") or self._repo.resolve(self._branch)
        if sha is None:
            raise NotFoundError(f"default branch {self._branch!r} does not exist")
        return sha

    def fetch(self) -> None:
        """The default branch from ``remote``, into its remote-tracking ref."""
        if self._remote is None:
            return
        b, r = self._branch, self._remote
        done = self._repo.run_status(
            "fetch",
            "--quiet",
            "--no-tags",
            "--no-write-fetch-head",
            r,
            f"+refs/heads/{b}:refs/remotes/{r}/{b}",
            env={"GIT_TERMINAL_PROMPT": "0"},  # never wait for a password
            timeout=FETCH_TIMEOUT,
        )
        if done.status == 0:
            if self._fetch_failed is not None:
                log.info("fetching the default branch works again", remote=r, branch=b)
            self._fetch_failed = None
            return
        error = " ".join(done.stderr.split())[:300] or f"git fetch exited {done.status}"
        if error != self._fetch_failed:
            log.warning(
                "cannot fetch the default branch: specs are read at the last fetched head",
                remote=r,
                branch=b,
                error=error,
            )
        self._fetch_failed = error

    def list_specs(self) -> Sequence[Spec]:
        self.fetch()
        listing = self._repo.run("ls-tree", "-r", "-l", "-z", "--full-tree", self._head())
        specs: list[Spec] = []
        for entry in listing.text.split("\0"):
            if not entry:
                continue
            meta, path = entry.split("\t", 1)
            mode, kind, sha, size = meta.split()
            if kind == "blob" and mode in _FILE_MODES and self._matches(path):
                problem = self._problem(path, sha, int(size))
                specs.append(Spec(path=path, blob_sha=sha, problem=problem))
        return specs

    def _problem(self, path: str, sha: str, size: int) -> str | None:
        """Why this version of a spec cannot be planned, judged once per blob and logged."""
        if sha not in self._problems:
            problem: str | None
            if size > self._max_bytes:
                problem = f"{size:,} bytes, more than specs.max_bytes ({self._max_bytes:,})"
            else:
                problem = spec_problem(self._repo.run("cat-file", "blob", sha).stdout)
            self._problems[sha] = problem
            if problem is not None:
                # info: the console says it once per version (the engine's state knows which
                # it has told), not at every start
                log.info("spec skipped", path=path, blob_sha=sha[:12], problem=problem)
        return self._problems[sha]

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


def spec_problem(data: bytes) -> str | None:
    """Why a spec's content cannot go to the planner, or None: it must be UTF-8 text, say
    something, and any YAML frontmatter (between ``---`` lines at the top) must parse."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        return f"not UTF-8 text (byte {exc.start}: {data[exc.start : exc.start + 1]!r})"
    if "\0" in text:
        return "not text (it holds NUL bytes)"
    if not text.strip():
        return "empty"
    lines = text.splitlines()
    if lines and lines[0].strip() == "---":
        try:
            end = next(i for i, line in enumerate(lines[1:], 1) if line.strip() in ("---", "..."))
        except StopIteration:
            return "frontmatter opened with --- and never closed"
        try:
            yaml.safe_load("\n".join(lines[1:end]))
        except yaml.YAMLError as exc:
            return f"broken YAML frontmatter: {' '.join(str(exc).split())[:200]}"
        if not "\n".join(lines[end + 1 :]).strip():
            return "empty (only frontmatter)"
    return None


def _decode(data: bytes) -> str:
    # Specs are markdown; a stray invalid byte should not make the whole spec unreadable.
    return data.decode("utf-8", "replace")

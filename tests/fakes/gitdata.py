"""A vendor fake's repository: a real bare git repository driven with plain ``git``.

The fakes answer their repository endpoints (GitHub's Git Data, GitLab's repository and commits
APIs), pull and merge request diffs and merges from it, so object ids, trees and merge results
are exactly what git (and the vendor) would make. Every call runs with the machine's git config
shut out, so a developer's ``autocrlf`` or hooks cannot change what the fake stores; commits the
fake makes itself are by its ``identity``.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

_ISOLATED = {"GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}
GITHUB = ("Fake GitHub", "noreply@github.invalid")  # the fake GitHub's commits' identity


class GitError(Exception):
    """A git command the fake ran failed; the server answers 422 or 404 with its message."""


@dataclass(frozen=True)
class TreeEntry:
    mode: str
    type: str
    sha: str
    path: str
    size: int | None = None


@dataclass(frozen=True)
class CommitInfo:
    sha: str
    tree: str
    parents: tuple[str, ...]
    author: tuple[str, str, int]  # name, email, epoch seconds
    committer: tuple[str, str, int]
    message: str


@dataclass(frozen=True)
class FileChange:
    filename: str
    status: str  # added | removed | modified | renamed
    previous_filename: str | None
    patch: str | None
    additions: int
    deletions: int
    sha: str | None
    old_mode: str = "100644"  # "000000" for an added file
    new_mode: str = "100644"  # "000000" for a removed file


class BareRepo:
    def __init__(self, path: Path, identity: tuple[str, str] = GITHUB) -> None:
        self.path = path
        self.identity = identity  # (name, email) of the commits the fake makes itself
        name, email = identity
        self._env = {
            **_ISOLATED,
            "GIT_AUTHOR_NAME": name,
            "GIT_AUTHOR_EMAIL": email,
            "GIT_COMMITTER_NAME": name,
            "GIT_COMMITTER_EMAIL": email,
        }

    @property
    def env(self) -> dict[str, str]:
        """The environment the fake's git commands run in (isolated config, its identity)."""
        return {**os.environ, **self._env}

    @classmethod
    def create(
        cls, path: Path, branch: str = "main", identity: tuple[str, str] = GITHUB
    ) -> BareRepo:
        path.mkdir(parents=True)
        repo = cls(path, identity)
        repo.git("init", "--quiet", "--bare", f"--initial-branch={branch}")
        return repo

    def git(
        self, *args: str, stdin: bytes | None = None, env: Mapping[str, str] | None = None
    ) -> bytes:
        result = subprocess.run(
            ["git", *args],
            cwd=self.path,
            input=stdin,
            env={**os.environ, **self._env, **(env or {})},
            capture_output=True,
            check=False,
            timeout=60,
        )
        if result.returncode != 0:
            raise GitError(result.stderr.decode("utf-8", "replace").strip() or f"git {args[0]}")
        return result.stdout

    def line(self, *args: str, env: Mapping[str, str] | None = None) -> str:
        return self.git(*args, env=env).decode().strip()

    # ------------------------------------------------------------------ objects

    def object_type(self, sha: str) -> str | None:
        try:
            return self.line("cat-file", "-t", sha)
        except GitError:
            return None

    def write_blob(self, content: bytes) -> str:
        return (
            self.git("hash-object", "-w", "--no-filters", "--stdin", stdin=content).decode().strip()
        )

    def read_blob(self, sha: str) -> bytes:
        return self.git("cat-file", "blob", sha)

    def ls_tree(self, sha: str, recursive: bool = False) -> list[TreeEntry]:
        args = ["ls-tree", "-z", "--long"]
        if recursive:
            args += ["-r", "-t"]
        out = self.git(*args, sha).decode("utf-8", "surrogateescape")
        entries: list[TreeEntry] = []
        for record in filter(None, out.split("\0")):
            meta, path = record.split("\t", 1)
            mode, kind, obj, size = meta.split()
            entries.append(TreeEntry(mode, kind, obj, path, None if size == "-" else int(size)))
        return entries

    def build_tree(self, base_tree: str | None, entries: Sequence[Mapping[str, object]]) -> str:
        """``base_tree`` with entries set (``sha`` or ``content``) or removed (``sha: None``),
        built in a temporary index (GitHub's create-tree; GitLab's commit actions)."""
        with tempfile.TemporaryDirectory(prefix="fake-index-") as tmp:
            env = {"GIT_INDEX_FILE": str(Path(tmp) / "index")}
            if base_tree:
                self.git("read-tree", base_tree, env=env)
            else:
                self.git("read-tree", "--empty", env=env)
            lines: list[str] = []
            for entry in entries:
                path, mode = str(entry["path"]), str(entry.get("mode", "100644"))
                if "content" in entry and entry["content"] is not None:
                    sha = self.write_blob(str(entry["content"]).encode())
                elif entry.get("sha") is None:
                    lines.append(f"0 {'0' * 40}\t{path}")  # removes the path
                    continue
                else:
                    sha = str(entry["sha"])
                    if self.object_type(sha) is None:
                        raise GitError(f"tree.sha {sha} wasn't found")
                lines.append(f"{mode} {sha}\t{path}")
            if lines:
                self.git("update-index", "--index-info", stdin="\n".join(lines).encode() + b"\n",
                         env=env)  # fmt: skip
            return self.line("write-tree", env=env)

    def commit(
        self,
        tree: str,
        parents: Sequence[str],
        message: str,
        author: Mapping[str, str] | None = None,
    ) -> str:
        env: dict[str, str] = {}
        if author:
            env["GIT_AUTHOR_NAME"] = author.get("name", self.identity[0])
            env["GIT_AUTHOR_EMAIL"] = author.get("email", self.identity[1])
            if author.get("date"):
                env["GIT_AUTHOR_DATE"] = author["date"]
        args = ["commit-tree", tree]
        for parent in parents:
            args += ["-p", parent]
        return self.git(*args, stdin=message.encode(), env=env).decode().strip()

    def tree_with(self, base: str | None, files: Mapping[str, str | bytes | None]) -> str:
        """``base`` (a tree, or None for an empty one) with ``files`` written (``None``
        deletes one)."""
        entries: list[dict[str, object]] = []
        for path, content in files.items():
            if content is None:
                entries.append({"path": path, "sha": None})
                continue
            data = content.encode() if isinstance(content, str) else content
            entries.append({"path": path, "mode": "100644", "sha": self.write_blob(data)})
        return self.build_tree(base, entries)

    def commit_files(
        self, branch: str, files: Mapping[str, str | bytes | None], message: str
    ) -> str:
        """A commit of ``files`` on top of ``branch`` (its first commit if it has none), which
        ``branch`` then points at; returns its sha."""
        ref = f"refs/heads/{branch}"
        head = self.resolve(ref)
        base = self.line("rev-parse", f"{head}^{{tree}}") if head else None
        sha = self.commit(self.tree_with(base, files), [head] if head else [], message + "\n")
        self.set_ref(ref, sha, head)
        return sha

    def commit_info(self, sha: str) -> CommitInfo:
        raw = self.git("cat-file", "commit", sha).decode("utf-8", "surrogateescape")
        header, _, message = raw.partition("\n\n")
        tree, parents = "", []
        people: dict[str, tuple[str, str, int]] = {}
        for line in header.splitlines():
            key, _, value = line.partition(" ")
            if key == "tree":
                tree = value
            elif key == "parent":
                parents.append(value)
            elif key in ("author", "committer"):
                name, _, rest = value.partition(" <")
                email, _, stamp = rest.partition("> ")
                people[key] = (name, email, int(stamp.split()[0]))
        return CommitInfo(sha, tree, tuple(parents), people["author"], people["committer"], message)

    # ------------------------------------------------------------------ refs

    def resolve(self, ref: str) -> str | None:
        try:
            return self.line("rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}")
        except GitError:
            return None

    def set_ref(self, ref: str, sha: str, old: str | None = None) -> None:
        args = ["update-ref", ref, sha]
        if old is not None:
            args.append(old)
        self.git(*args)

    def is_ancestor(self, ancestor: str, descendant: str) -> bool:
        try:
            self.git("merge-base", "--is-ancestor", ancestor, descendant)
        except GitError:
            return False
        return True

    def merge_base(self, a: str, b: str) -> str | None:
        try:
            return self.line("merge-base", a, b) or None
        except GitError:
            return None

    def merge_tree(self, ours: str, theirs: str) -> tuple[str | None, list[str]]:
        """The merged tree, or None and the conflicting paths."""
        result = subprocess.run(
            ["git", "merge-tree", "--write-tree", "--name-only", "-z", ours, theirs],
            cwd=self.path,
            env={**os.environ, **self._env},
            capture_output=True,
            check=False,
            timeout=60,
        )
        fields = result.stdout.decode("utf-8", "surrogateescape").split("\0")
        if result.returncode == 0:
            return fields[0].strip(), []
        if result.returncode == 1:
            names = fields[1 : fields.index("", 1)] if "" in fields[1:] else fields[1:]
            return None, sorted(set(names))
        raise GitError(result.stderr.decode("utf-8", "replace"))

    def rebased(self, branch: str, onto: str) -> str | None:
        """``branch``'s commits replayed on ``onto`` by git's own rebase, in a scratch clone:
        the new head (its objects stored here, no ref moved), or None when they conflict."""
        with tempfile.TemporaryDirectory(prefix="fake-rebase-") as tmp:
            work = Path(tmp) / "work"

            def run(*args: str, cwd: Path = work) -> subprocess.CompletedProcess[bytes]:
                return subprocess.run(
                    ["git", *args],
                    cwd=cwd,
                    env={**self.env, "HOME": tmp},
                    capture_output=True,
                    check=False,
                    timeout=60,
                )

            run("clone", "-q", "--shared", str(self.path), str(work), cwd=Path(tmp))
            run("checkout", "-q", "-B", "rebasing", f"origin/{branch}")
            if run("rebase", "-q", onto).returncode != 0:
                run("rebase", "--abort")
                return None
            rebased = run("rev-parse", "HEAD").stdout.decode().strip()
            pushed = run("push", "-q", "origin", f"HEAD:refs/fake-rebased/{branch}")
            if pushed.returncode != 0:
                raise GitError(pushed.stderr.decode())
            self.git("update-ref", "-d", f"refs/fake-rebased/{branch}")
            return rebased

    # ------------------------------------------------------------------ diffs

    def changed_files(self, base: str, head: str) -> list[FileChange]:
        raw = self.git("diff", "--raw", "-z", "-M", "--no-abbrev", base, head).decode(
            "utf-8", "surrogateescape"
        )
        fields = raw.split("\0")
        changes: list[FileChange] = []
        i = 0
        while i < len(fields) and fields[i]:
            meta = fields[i].lstrip(":").split()
            status = meta[4]
            new_sha = meta[3]
            if status.startswith(("R", "C")):
                old, new = fields[i + 1], fields[i + 2]
                i += 3
            else:
                old = new = fields[i + 1]
                i += 2
            patch = self._file_patch(base, head, old, new)
            kind = {"A": "added", "D": "removed", "R": "renamed"}.get(status[0], "modified")
            adds = sum(
                1 for ln in (patch or "").split("\n") if ln.startswith("+") and ln[:3] != "+++"
            )
            dels = sum(
                1 for ln in (patch or "").split("\n") if ln.startswith("-") and ln[:3] != "---"
            )
            changes.append(
                FileChange(
                    filename=new,
                    status=kind,
                    previous_filename=old if kind == "renamed" else None,
                    patch=patch,
                    additions=adds,
                    deletions=dels,
                    sha=None if kind == "removed" else new_sha,
                    old_mode=meta[0],
                    new_mode=meta[1],
                )
            )
        return changes

    def _file_patch(self, base: str, head: str, old: str, new: str) -> str | None:
        paths = [old] if old == new else [old, new]
        text = self.git("diff", "-M", "--no-color", "--no-ext-diff", base, head, "--", *paths)
        decoded = text.decode("utf-8", "surrogateescape")
        at = decoded.find("\n@@")
        if at < 0:
            return None  # binary, or a change of mode or name only: GitHub sends no patch
        return decoded[at + 1 :].removesuffix("\n")

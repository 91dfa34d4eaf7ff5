"""A revision's changed files, computed by git between two commits.

The per-file ``patch`` has the shape GitHub's pull request files API returns, so prompts read the
same whichever provider is in use: the hunks only (from the first ``@@``), None for a binary file,
for a change without hunks (a pure rename or mode change) and for a diff too large to show.
"""

from __future__ import annotations

from adapters.providers.git import GitRepo
from domain.models import FileStatus, RevisionFile

# GitHub stops returning a file's patch somewhere around this size; a prompt cannot use more.
MAX_PATCH_CHARS = 200_000

_STATUS: dict[str, FileStatus] = {
    "A": "added",
    "C": "added",  # a copy is a new file as far as a reviewer is concerned
    "M": "modified",
    "T": "modified",  # a type change (file <-> symlink) keeps the path
    "D": "removed",
    "R": "renamed",
}

_DIFF_OPTIONS = ("-M", "--no-color", "--no-ext-diff", "--no-textconv", "--full-index")


def changed_files(repo: GitRepo, base: str, head: str) -> list[RevisionFile]:
    """Every path that differs between ``base`` and ``head``, in git's order."""
    listing = repo.run("diff", "--name-status", "-z", *_DIFF_OPTIONS, base, head, "--")
    fields = listing.text.split("\0")
    files: list[RevisionFile] = []
    index = 0
    while index < len(fields) and fields[index]:
        code = fields[index][0]
        if code in ("R", "C"):
            old, new = fields[index + 1], fields[index + 2]
            index += 3
        else:
            old = new = fields[index + 1]
            index += 2
        paths = (old, new) if old != new else (new,)
        files.append(
            RevisionFile(
                path=new,
                status=_STATUS.get(code, "modified"),
                patch=_file_patch(repo, base, head, paths),
            )
        )
    return files


def _file_patch(repo: GitRepo, base: str, head: str, paths: tuple[str, ...]) -> str | None:
    # :(literal) so a path holding *, ? or [ is not read as a glob.
    specs = [f":(literal){path}" for path in paths]
    text = repo.run("diff", *_DIFF_OPTIONS, base, head, "--", *specs).text
    hunks: list[str] = []
    in_hunks = False
    # Split on "\n" only: a CRLF file's "\r" belongs to its lines.
    for line in text.split("\n"):
        if line.startswith("diff --git "):
            in_hunks = False
        elif not in_hunks and (line.startswith("Binary files ") or line == "GIT binary patch"):
            return None
        elif line.startswith("@@"):
            in_hunks = True
        if in_hunks:
            hunks.append(line)
    patch = "\n".join(hunks).removesuffix("\n")
    if not patch or len(patch) > MAX_PATCH_CHARS:
        return None
    return patch

"""Applying a patch to a stand-in of a base a forge holds (``adapters/providers/patches.py``),
and merging stand-ins to name conflicts (``adapters/providers/stand_ins.py``).

The "forge" here is a real repository read with git (``ls-tree`` for a path's mode and blob,
``cat-file`` for a blob's bytes), as GitHub's and GitLab's APIs give them; each case checks the
result against what plain ``git apply`` (or ``git merge``) makes of the same input.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from adapters.providers.patches import applied_patch, renames
from adapters.providers.stand_ins import Entry, Side, conflicts_of
from domain.errors import NotFoundError, PatchError
from tests.adapters.providers.edits import BASE_FILES, EDITS, every_edit
from tests.support.git import Repo, git, git_bytes, make_patch, tree_from_git_apply


class Forge:
    """What a forge's API tells of a repository, read from a real one."""

    def __init__(self, repo: Repo) -> None:
        self.repo = repo
        self.asked: list[str] = []

    def entry(self, commit: str, path: str) -> Entry | None:
        self.asked.append(path)
        listed = self.repo.git("ls-tree", "-z", commit, "--", path).rstrip("\0")
        if not listed:
            return None
        meta, _, _name = listed.partition("\t")
        mode, kind, sha = meta.split()
        return None if kind == "tree" else (mode, sha)

    def blob(self, sha: str) -> bytes:
        if not self.repo.git("cat-file", "-t", sha) == "blob":
            raise NotFoundError(f"no blob {sha}")
        return git_bytes(self.repo.root, "cat-file", "blob", sha)


@pytest.fixture
def repo(tmp_path: Path) -> Repo:
    return Repo.create(tmp_path / "origin", BASE_FILES)


def tree_of_changes(repo: Repo, base: str, changes: dict[str, tuple[str, str, str] | None]) -> str:
    """``base``'s tree with ``changes`` written over it, as a forge would write them."""
    index = repo.root / ".git" / "test-index"
    env = {"GIT_INDEX_FILE": str(index)}
    git(repo.root, "read-tree", base, env=env)
    for path, change in changes.items():
        if change is None:
            git(repo.root, "update-index", "--force-remove", "--", path, env=env)
        else:
            mode, _kind, sha = change
            git(repo.root, "update-index", "--add", "--cacheinfo", f"{mode},{sha},{path}", env=env)
    return git(repo.root, "write-tree", env=env)


def store(repo: Repo, content: bytes) -> None:
    blob = repo.root / ".git" / "test-blob"
    blob.write_bytes(content)
    git(repo.root, "hash-object", "-w", str(blob))


@pytest.mark.parametrize("kind", [*EDITS, "every"])
def test_a_patch_applied_to_a_stand_in_changes_what_git_apply_changes(
    repo: Repo, tmp_path: Path, kind: str
) -> None:
    patch = make_patch(repo.root, tmp_path / "work", every_edit if kind == "every" else EDITS[kind])
    base = repo.head()
    forge = Forge(repo)
    with applied_patch(patch, lambda p: forge.entry(base, p), forge.blob) as done:
        for change in done.changes.values():
            if change is not None:
                store(repo, done.content(change[2]))
        made = tree_of_changes(repo, base, done.changes)
    assert made == tree_from_git_apply(repo.root, tmp_path / "reference", patch, base)
    assert "README.md" not in forge.asked  # only what the patch touches is asked for


def test_a_patch_on_a_base_that_moved_elsewhere_in_the_file_applies_three_way(
    repo: Repo, tmp_path: Path
) -> None:
    """The patch was made on an older base: its pre-image blob is fetched by the id its
    ``index`` line names, and the three-way apply merges as ``git am -3`` would."""
    long_text = "".join(f"line {i}\n" for i in range(40))
    first = repo.commit("long file", {"notes.txt": long_text})
    patch = make_patch(
        repo.root,
        tmp_path / "work",
        lambda r: r.write("notes.txt", long_text.replace("line 3\n", "line three\n")),
    )
    moved = repo.commit("someone else", {"notes.txt": long_text.replace("line 30\n", "LINE 30\n")})
    assert moved != first
    forge = Forge(repo)
    with applied_patch(patch, lambda p: forge.entry(moved, p), forge.blob) as done:
        [(path, change)] = done.changes.items()
        assert change is not None
        content = done.content(change[2]).decode()
    assert path == "notes.txt"
    assert "line three\n" in content
    assert "LINE 30\n" in content


def test_a_patch_that_conflicts_with_the_base_is_a_patch_error_naming_the_file(
    repo: Repo, tmp_path: Path
) -> None:
    patch = make_patch(repo.root, tmp_path / "work", EDITS["modified"])
    moved = repo.commit("rewrite", {"src/app.py": "def answer():\n    return 40\n"})
    forge = Forge(repo)
    with (
        pytest.raises(PatchError, match=r"src/app\.py") as caught,
        applied_patch(patch, lambda p: forge.entry(moved, p), forge.blob),
    ):
        pass
    assert caught.value.files == ("src/app.py",)


def test_an_empty_patch_is_refused() -> None:
    with pytest.raises(PatchError, match="empty"), applied_patch("  \n", lambda p: None, bytes):
        pass


def test_also_stages_more_paths_beside_those_the_patch_touches(repo: Repo, tmp_path: Path) -> None:
    patch = make_patch(repo.root, tmp_path / "work", EDITS["added"])
    base = repo.head()
    forge = Forge(repo)
    with applied_patch(
        patch, lambda p: forge.entry(base, p), forge.blob, also=["README.md"]
    ) as done:
        assert set(done.known) == {"README.md"}  # src/added.py is not at the base
        assert set(done.changes) == {"src/added.py"}


def test_renames_are_read_from_the_patch(repo: Repo, tmp_path: Path) -> None:
    patch = make_patch(repo.root, tmp_path / "work", every_edit)
    assert renames(patch) == {
        "src/new_name.py": "src/old_name.py",
        "src/modern.py": "src/legacy.py",
    }


# ---------------------------------------------------------------------------- conflicts


def changed(repo: Repo, base: str, head: str) -> tuple[frozenset[str], ...]:
    out = repo.git("diff", "--name-status", "-M", f"{base}...{head}")
    return tuple(frozenset(line.split("\t")[1:]) for line in out.splitlines() if line)


def test_stand_ins_name_the_conflicting_file_with_its_hunks(repo: Repo) -> None:
    base = repo.head()
    repo.git("checkout", "--quiet", "-b", "feature")
    ours = repo.commit("ours", {"src/app.py": "def answer():\n    return 42\n", "a.txt": "a\n"})
    repo.git("checkout", "--quiet", "main")
    theirs = repo.commit("theirs", {"src/app.py": "def answer():\n    return 40\n", "b.txt": "b\n"})
    forge = Forge(repo)
    found = conflicts_of(
        base,
        Side(ours, "feature", changed(repo, theirs, ours)),
        Side(theirs, "main", changed(repo, ours, theirs)),
        entry=forge.entry,
        blob=forge.blob,
        prefix="test-conflict-",
    )
    assert found.exact
    assert found.files == ("src/app.py",)
    assert "<<<<<<< feature" in found.detail
    assert ">>>>>>> main" in found.detail
    assert set(forge.asked) == {"src/app.py"}  # only what both sides changed


def test_stand_ins_of_sides_that_changed_different_files_do_not_conflict(repo: Repo) -> None:
    base = repo.head()
    repo.git("checkout", "--quiet", "-b", "feature")
    ours = repo.commit("ours", {"a.txt": "a\n"})
    repo.git("checkout", "--quiet", "main")
    theirs = repo.commit("theirs", {"b.txt": "b\n"})
    forge = Forge(repo)
    found = conflicts_of(
        base,
        Side(ours, "feature", changed(repo, theirs, ours)),
        Side(theirs, "main", changed(repo, ours, theirs)),
        entry=forge.entry,
        blob=forge.blob,
        prefix="test-conflict-",
    )
    assert found.files == ()
    assert forge.asked == []


def test_stand_ins_that_merge_cleanly_name_the_paths_both_sides_changed(repo: Repo) -> None:
    """Both changed one file, in places far apart: no textual conflict here, so the conflict
    GitLab or GitHub reported lies elsewhere; the paths both changed are named, not exact."""
    long_text = "".join(f"line {i}\n" for i in range(40))
    base = repo.commit("long", {"notes.txt": long_text})
    repo.git("checkout", "--quiet", "-b", "feature")
    ours = repo.commit("ours", {"notes.txt": long_text.replace("line 1\n", "one\n")})
    repo.git("checkout", "--quiet", "main")
    theirs = repo.commit("theirs", {"notes.txt": long_text.replace("line 38\n", "x\n")})
    forge = Forge(repo)
    found = conflicts_of(
        base,
        Side(ours, "feature", changed(repo, theirs, ours)),
        Side(theirs, "main", changed(repo, ours, theirs)),
        entry=forge.entry,
        blob=forge.blob,
        prefix="test-conflict-",
    )
    assert (found.files, found.exact) == (("notes.txt",), False)

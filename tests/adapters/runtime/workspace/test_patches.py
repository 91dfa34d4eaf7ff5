"""extract_patch on real worktrees: each kind of change applies with ``git apply`` onto main.

Every round-trip test checks the same two things: ``git apply`` of the patch on a fresh clone of
``main`` reproduces the worktree's tree exactly (``tree_of`` is plain git, independent of the
code under test), and ``apply_patch_check`` reaches the same tree through a throwaway index.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from adapters.runtime.workspace.patches import apply_patch_check, extract_patch
from adapters.runtime.workspace.worktrees import Worktree, WorktreeManager
from domain.errors import PatchError
from tests.support.git import (
    BINARY,
    apply_to_fresh_clone,
    git,
    isolate_git,
    make_mixed_repo,
    tree_of,
    write,
)


@pytest.fixture(autouse=True)
def _isolated_git(monkeypatch: pytest.MonkeyPatch) -> None:
    isolate_git(monkeypatch)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_mixed_repo(tmp_path)


@pytest.fixture
def worktree(repo: Path) -> Worktree:
    return WorktreeManager(repo, "main").create("cpe/patch")


def roundtrip(repo: Path, worktree: Worktree, tmp_path: Path) -> str:
    """Extract the patch and prove it reproduces the worktree on a fresh clone of main."""
    patch = extract_patch(worktree.path, "main")
    expected = tree_of(worktree.path)

    assert patch.startswith("diff --git ")
    assert patch.endswith("\n")
    assert apply_to_fresh_clone(repo, patch, tmp_path / "clone") == expected
    assert apply_patch_check(repo, "main", patch) == expected
    return patch


@pytest.mark.spec("S001-27")
@pytest.mark.spec("S000-21")
def test_untracked_new_files_are_in_the_patch(
    repo: Path, worktree: Worktree, tmp_path: Path
) -> None:
    write(worktree.path, "src/feature/new.py", "def feature() -> int:\n    return 1\n")
    write(worktree.path, "empty.txt", "")

    patch = roundtrip(repo, worktree, tmp_path)

    assert "new file mode 100644" in patch
    assert "+++ b/src/feature/new.py" in patch
    assert "diff --git a/empty.txt b/empty.txt" in patch


def test_untracked_files_ignored_by_gitignore_are_left_out(
    repo: Path, worktree: Worktree, tmp_path: Path
) -> None:
    write(worktree.path, "debug.log", "noise\n")
    write(worktree.path, "build/out.txt", "artifact\n")
    write(worktree.path, "kept.txt", "kept\n")

    patch = roundtrip(repo, worktree, tmp_path)

    assert "debug.log" not in patch
    assert "build/out.txt" not in patch
    assert "kept.txt" in patch


def test_unstaged_modification_is_in_the_patch(
    repo: Path, worktree: Worktree, tmp_path: Path
) -> None:
    write(worktree.path, "src/app.py", "".join(f"line {i}\n" for i in range(30) if i != 7))

    patch = roundtrip(repo, worktree, tmp_path)

    assert "-line 7\n" in patch


def test_staged_and_unstaged_edits_of_one_file_give_the_file_on_disk(
    repo: Path, worktree: Worktree, tmp_path: Path
) -> None:
    write(worktree.path, "README.md", "# demo\nstaged\n")
    git(worktree.path, "add", "README.md")
    write(worktree.path, "README.md", "# demo\nstaged\nthen unstaged\n")

    patch = roundtrip(repo, worktree, tmp_path)

    assert "+then unstaged\n" in patch


def test_deletions_staged_or_not_are_in_the_patch(
    repo: Path, worktree: Worktree, tmp_path: Path
) -> None:
    (worktree.path / "README.md").unlink()
    git(worktree.path, "rm", "--quiet", "tools/run.sh")

    patch = roundtrip(repo, worktree, tmp_path)

    assert patch.count("deleted file mode") == 2


def test_a_rename_is_a_rename(repo: Path, worktree: Worktree, tmp_path: Path) -> None:
    git(worktree.path, "mv", "src/app.py", "src/application.py")
    (worktree.path / "README.md").rename(worktree.path / "INTRO.md")  # a plain mv, unstaged

    patch = roundtrip(repo, worktree, tmp_path)

    assert "rename from src/app.py\nrename to src/application.py" in patch
    assert "rename from README.md\nrename to INTRO.md" in patch


def test_binary_files_use_git_binary_format(repo: Path, worktree: Worktree, tmp_path: Path) -> None:
    (worktree.path / "assets/logo.bin").write_bytes(BINARY[::-1])
    (worktree.path / "assets/new.bin").write_bytes(b"\x00\xff" * 500)

    patch = roundtrip(repo, worktree, tmp_path)

    assert patch.count("GIT binary patch") == 2
    assert "Binary files" not in patch


def test_a_mode_change_is_in_the_patch(repo: Path, worktree: Worktree, tmp_path: Path) -> None:
    (worktree.path / "README.md").chmod(0o755)
    (worktree.path / "tools/run.sh").chmod(0o644)

    patch = roundtrip(repo, worktree, tmp_path)

    assert "old mode 100644\nnew mode 100755" in patch
    assert "old mode 100755\nnew mode 100644" in patch


def test_a_symlink_is_in_the_patch(repo: Path, worktree: Worktree, tmp_path: Path) -> None:
    (worktree.path / "latest").symlink_to("src/app.py")

    patch = roundtrip(repo, worktree, tmp_path)

    assert "new file mode 120000" in patch


def test_crlf_line_endings_are_preserved(repo: Path, worktree: Worktree, tmp_path: Path) -> None:
    (worktree.path / "docs/windows.txt").write_bytes(b"first\r\nSECOND\r\nthird\r\n")
    (worktree.path / "docs/new-windows.txt").write_bytes(b"a\r\nb\r\n")

    patch = roundtrip(repo, worktree, tmp_path)

    assert "-second\r\n+SECOND\r\n" in patch
    assert "+a\r\n+b\r\n" in patch


def test_a_file_without_final_newline_round_trips(
    repo: Path, worktree: Worktree, tmp_path: Path
) -> None:
    (worktree.path / "notes.txt").write_bytes(b"still no final newline")

    patch = roundtrip(repo, worktree, tmp_path)

    assert "\\ No newline at end of file" in patch


def test_text_that_is_not_utf8_round_trips_byte_for_byte(
    repo: Path, worktree: Worktree, tmp_path: Path
) -> None:
    (worktree.path / "legacy.txt").write_bytes("caf\xe9 cr\xe8me br\xfbl\xe9e\n".encode("latin-1"))

    roundtrip(repo, worktree, tmp_path)


def test_paths_with_spaces_and_unicode_round_trip(
    repo: Path, worktree: Worktree, tmp_path: Path
) -> None:
    write(worktree.path, "docs/read me.md", "spaces\n")
    write(worktree.path, "docs/résumé.md", "unicode\n")

    roundtrip(repo, worktree, tmp_path)


def test_commits_on_the_branch_and_uncommitted_work_are_both_in_the_patch(
    repo: Path, worktree: Worktree, tmp_path: Path
) -> None:
    write(worktree.path, "committed.txt", "one\n")
    write(worktree.path, "README.md", "# demo\ncommitted edit\n")
    git(worktree.path, "add", "-A")
    git(worktree.path, "commit", "--quiet", "-m", "agent commit")
    write(worktree.path, "committed.txt", "one\ntwo, unstaged\n")
    write(worktree.path, "staged.txt", "staged\n")
    git(worktree.path, "add", "staged.txt")
    write(worktree.path, "untracked.txt", "untracked\n")

    patch = roundtrip(repo, worktree, tmp_path)

    for name in ("committed.txt", "README.md", "staged.txt", "untracked.txt"):
        assert f"+++ b/{name}" in patch


def test_the_patch_is_against_the_fork_point_when_main_moves_on(
    repo: Path, worktree: Worktree, tmp_path: Path
) -> None:
    write(worktree.path, "feature.txt", "agent work\n")
    write(repo, "upstream.txt", "landed on main meanwhile\n")
    git(repo, "add", "upstream.txt")
    git(repo, "commit", "--quiet", "-m", "main moves on")

    patch = extract_patch(worktree.path, "main")

    assert "upstream.txt" not in patch
    clone_tree = apply_to_fresh_clone(repo, patch, tmp_path / "clone")
    assert git(tmp_path / "clone", "ls-tree", "--name-only", clone_tree, "--").splitlines() == [
        ".gitignore",
        "README.md",
        "assets",
        "docs",
        "feature.txt",
        "legacy.txt",
        "notes.txt",
        "src",
        "tools",
        "upstream.txt",
    ]


def test_extraction_leaves_the_worktree_index_and_status_untouched(worktree: Worktree) -> None:
    write(worktree.path, "staged.txt", "staged\n")
    git(worktree.path, "add", "staged.txt")
    write(worktree.path, "untracked.txt", "untracked\n")
    write(worktree.path, "README.md", "unstaged edit\n")
    index = Path(git(worktree.path, "rev-parse", "--path-format=absolute", "--git-path", "index"))
    index_digest = hashlib.sha256(index.read_bytes()).hexdigest()
    status = git(worktree.path, "status", "--porcelain")

    extract_patch(worktree.path, "main")

    assert hashlib.sha256(index.read_bytes()).hexdigest() == index_digest
    assert git(worktree.path, "status", "--porcelain") == status


@pytest.mark.spec("S001-28")
@pytest.mark.spec("S000-22")
def test_no_changes_against_main_gives_an_empty_patch(worktree: Worktree) -> None:
    assert extract_patch(worktree.path, "main") == ""


def test_only_ignored_files_give_an_empty_patch(worktree: Worktree) -> None:
    write(worktree.path, "debug.log", "noise\n")

    assert extract_patch(worktree.path, "main") == ""


def test_a_change_committed_then_undone_gives_an_empty_patch(worktree: Worktree) -> None:
    write(worktree.path, "README.md", "changed\n")
    git(worktree.path, "commit", "--quiet", "-am", "change")
    write(worktree.path, "README.md", "# demo\n")

    assert extract_patch(worktree.path, "main") == ""


def test_a_path_that_is_not_a_worktree_raises_patch_error(tmp_path: Path) -> None:
    (tmp_path / "plain").mkdir()

    with pytest.raises(PatchError):
        extract_patch(tmp_path / "plain", "main")
    with pytest.raises(PatchError, match="no worktree"):
        extract_patch(tmp_path / "missing", "main")


def test_an_unknown_default_branch_raises_patch_error(worktree: Worktree) -> None:
    with pytest.raises(PatchError, match="merge-base"):
        extract_patch(worktree.path, "trunk")


@pytest.mark.parametrize("patch", ["", "not a patch\n"])
def test_apply_check_rejects_what_does_not_apply(repo: Path, patch: str) -> None:
    with pytest.raises(PatchError, match="apply"):
        apply_patch_check(repo, "main", patch)


def test_apply_check_rejects_a_patch_for_other_content(
    repo: Path, worktree: Worktree, tmp_path: Path
) -> None:
    write(worktree.path, "README.md", "# demo\nmore\n")
    patch = extract_patch(worktree.path, "main")
    write(repo, "README.md", "# rewritten on main\n")
    git(repo, "commit", "--quiet", "-am", "conflicting change")

    with pytest.raises(PatchError, match="patch does not apply"):
        apply_patch_check(repo, "main", patch)


def test_a_split_index_in_the_worktree_still_gives_the_full_patch(
    repo: Path, worktree: Worktree, tmp_path: Path
) -> None:
    git(worktree.path, "update-index", "--split-index")
    write(worktree.path, "staged.txt", "staged\n")
    git(worktree.path, "add", "staged.txt")
    write(worktree.path, "README.md", "unstaged edit\n")

    patch = roundtrip(repo, worktree, tmp_path)

    assert "+++ b/staged.txt" in patch


def test_the_patch_names_whole_blob_ids_so_a_provider_can_apply_it_three_way(
    repo: Path, worktree: Worktree, tmp_path: Path
) -> None:
    """The GitHub provider fetches the pre-image blobs by id through its API when the default
    branch moved under the patch: abbreviated ids could not be fetched."""
    readme = (worktree.path / "README.md").read_text()
    write(worktree.path, "README.md", readme + "one more line\n")
    patch = roundtrip(repo, worktree, tmp_path)
    (index,) = [line for line in patch.splitlines() if line.startswith("index ")]
    before, after = index.split()[1].split("..")
    assert len(before) == len(after) == 40
    assert before == git(repo, "rev-parse", "main:README.md")

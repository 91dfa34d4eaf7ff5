"""Specs from git: what is committed on the default branch, by glob, with git's blob SHAs."""

from __future__ import annotations

from pathlib import Path

import pytest
import structlog.testing

from adapters.providers.specs import GitSpecReader
from adapters.providers.specs.globs import PathMatcher
from adapters.providers.specs.reader import spec_problem
from domain.errors import NotFoundError
from tests.support.git import Repo, clone, isolate_git

SPECS = {
    "specs/auth.md": "# Auth\n\nUsers log in.\n",
    "specs/billing/invoices.md": "# Invoices\n",
    "specs/billing/notes.txt": "not a spec\n",
    "docs/guide.md": "# Not under specs\n",
    "README.md": "# Project\n",
}


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Repo:
    isolate_git(monkeypatch)
    return Repo.create(tmp_path / "repo", SPECS)


def reader(repo: Repo, *globs: str) -> GitSpecReader:
    return GitSpecReader(repo.root, globs or ("specs/**/*.md",), default_branch="main")


def test_specs_are_the_committed_files_matching_the_globs_with_their_blob_shas(
    repo: Repo,
) -> None:
    specs = {s.path: s.blob_sha for s in reader(repo).list_specs()}
    assert specs == {
        "specs/auth.md": repo.git("rev-parse", "main:specs/auth.md"),
        "specs/billing/invoices.md": repo.git("rev-parse", "main:specs/billing/invoices.md"),
    }


def test_several_globs_add_up(repo: Repo) -> None:
    paths = {s.path for s in reader(repo, "specs/*.md", "docs/**").list_specs()}
    assert paths == {"specs/auth.md", "docs/guide.md"}


def test_uncommitted_files_are_not_specs(repo: Repo) -> None:
    repo.write("specs/draft.md", "# Draft\n")  # untracked
    repo.write("specs/auth.md", "# Auth, edited but not committed\n")
    repo.git("add", "specs/auth.md")  # staged is not committed either
    specs = reader(repo)
    assert "specs/draft.md" not in {s.path for s in specs.list_specs()}
    assert specs.read_spec("specs/auth.md") == SPECS["specs/auth.md"]


def test_specs_come_from_the_default_branch_not_the_checked_out_one(repo: Repo) -> None:
    repo.git("checkout", "--quiet", "-b", "feature")
    repo.commit("feature spec", {"specs/feature.md": "# Feature\n"})
    assert "specs/feature.md" not in {s.path for s in reader(repo).list_specs()}


def test_an_old_version_is_read_by_its_blob_sha(repo: Repo) -> None:
    specs = reader(repo)
    [old] = [s for s in specs.list_specs() if s.path == "specs/auth.md"]
    repo.commit("change auth", {"specs/auth.md": "# Auth\n\nUsers log in with a passkey.\n"})
    [new] = [s for s in specs.list_specs() if s.path == "specs/auth.md"]
    assert new.blob_sha != old.blob_sha
    assert specs.read_blob(old.blob_sha) == SPECS["specs/auth.md"]
    assert specs.read_spec("specs/auth.md") == "# Auth\n\nUsers log in with a passkey.\n"


def test_a_deleted_spec_disappears_from_the_listing(repo: Repo) -> None:
    repo.commit("drop billing", {"specs/billing/invoices.md": None})
    assert [s.path for s in reader(repo).list_specs()] == ["specs/auth.md"]


@pytest.mark.parametrize("path", ["specs/missing.md", "specs/billing"])
def test_reading_a_missing_spec_raises_not_found(repo: Repo, path: str) -> None:
    with pytest.raises(NotFoundError, match="specs/"):
        reader(repo).read_spec(path)


@pytest.mark.parametrize("sha", ["0" * 40, "main:README.md", "not-hex"])
def test_reading_an_unknown_blob_raises_not_found(repo: Repo, sha: str) -> None:
    with pytest.raises(NotFoundError):
        reader(repo).read_blob(sha)


def test_a_tree_sha_is_not_a_blob(repo: Repo) -> None:
    with pytest.raises(NotFoundError, match="no blob"):
        reader(repo).read_blob(repo.git("rev-parse", "main:specs"))


def test_the_default_branch_is_detected_when_not_given(repo: Repo) -> None:
    repo.git("checkout", "--quiet", "-b", "feature")
    assert len(GitSpecReader(repo.root).list_specs()) == 2


def test_a_missing_default_branch_raises_not_found(repo: Repo) -> None:
    specs = GitSpecReader(repo.root, default_branch="trunk")
    with pytest.raises(NotFoundError, match="trunk"):
        specs.list_specs()


@pytest.mark.parametrize(
    ("glob", "path", "matches"),
    [
        ("specs/**/*.md", "specs/a.md", True),
        ("specs/**/*.md", "specs/x/y/a.md", True),
        ("specs/**/*.md", "specs/a.txt", False),
        ("specs/**/*.md", "other/specs/a.md", False),
        ("specs/*.md", "specs/x/a.md", False),
        ("*.md", "README.md", True),
        ("*.md", "docs/README.md", False),
        ("**/*.md", "docs/README.md", True),
        ("specs/?.md", "specs/a.md", True),
        ("specs/?.md", "specs/ab.md", False),
        ("specs/[ab].md", "specs/b.md", True),
        ("specs/[!ab].md", "specs/b.md", False),
        ("specs/a+b.md", "specs/a+b.md", True),
        ("docs/**", "docs/x/y.md", True),
    ],
)
def test_globs_match_like_git(glob: str, path: str, matches: bool) -> None:
    assert PathMatcher([glob])(path) is matches


# ---------------------------------------------------------------------------- specs one by one


def test_a_spec_that_cannot_be_planned_says_why_and_its_neighbours_are_fine(repo: Repo) -> None:
    repo.commit(
        "odd specs",
        {
            "specs/binary.md": b"\x89PNG\r\n\x1a\n\x00\x00\xff\xfe",
            "specs/empty.md": "  \n\n",
            "specs/large.md": "# Large\n" + "x" * 2_000,
            "specs/broken.md": "---\ntitle: [unclosed\n---\n# Broken\n",
        },
    )
    specs = {
        s.path: s.problem
        for s in GitSpecReader(
            repo.root, ("specs/**/*.md",), default_branch="main", max_bytes=1_000
        ).list_specs()
    }
    assert specs["specs/auth.md"] is None
    assert specs["specs/billing/invoices.md"] is None
    assert specs["specs/binary.md"].startswith("not UTF-8 text (byte 0: b'\\x89')")
    assert specs["specs/empty.md"] == "empty"
    assert specs["specs/large.md"] == "2,008 bytes, more than specs.max_bytes (1,000)"
    assert specs["specs/broken.md"].startswith("broken YAML frontmatter: ")


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        ("# Spec\n\nDo it.\n", None),
        ("---\ntitle: Fine\ntags: [a, b]\n---\n# Spec\n", None),
        ("---\ntitle: x\n", "frontmatter opened with --- and never closed"),
        ("---\ntitle: x\n---\n\n", "empty (only frontmatter)"),
        ("a\x00b", "not text (it holds NUL bytes)"),
        ("", "empty"),
    ],
)
def test_spec_problem_judges_the_content(content: str, problem: str | None) -> None:
    assert spec_problem(content.encode()) == problem


def test_with_a_remote_specs_are_read_at_its_fetched_head_without_a_pull(
    tmp_path: Path, repo: Repo
) -> None:
    """The GitHub provider's case: the default branch moves on the code host. A spec pushed
    there is listed (and readable) at the next listing, while the local checkout and its
    ``main`` stay as they are."""
    local = clone(repo.root, tmp_path / "clone")
    reader = GitSpecReader(local.root, ("specs/**/*.md",), default_branch="main", remote="origin")
    before = local.git("rev-parse", "refs/heads/main")
    assert "specs/new.md" not in {s.path for s in reader.list_specs()}
    repo.commit("a new spec upstream", {"specs/new.md": "# New\n\nSomething new.\n"})

    listed = {s.path: s.blob_sha for s in reader.list_specs()}
    assert listed["specs/new.md"] == repo.git("rev-parse", "main:specs/new.md")
    assert reader.read_spec("specs/new.md") == "# New\n\nSomething new.\n"
    assert local.git("rev-parse", "refs/heads/main") == before  # nobody pulled
    assert not (local.root / "specs" / "new.md").exists()


def test_a_fetch_that_fails_is_logged_once_and_the_last_fetched_head_is_read(
    tmp_path: Path, repo: Repo
) -> None:
    local = clone(repo.root, tmp_path / "clone")
    reader = GitSpecReader(local.root, ("specs/**/*.md",), default_branch="main", remote="origin")
    known = {s.path for s in reader.list_specs()}
    local.git("remote", "set-url", "origin", str(tmp_path / "gone.git"))
    with structlog.testing.capture_logs() as logs:
        assert {s.path for s in reader.list_specs()} == known
        assert {s.path for s in reader.list_specs()} == known
    warnings = [e for e in logs if e["event"].startswith("cannot fetch the default branch")]
    assert len(warnings) == 1
    assert "gone.git" in warnings[0]["error"]

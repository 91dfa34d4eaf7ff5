"""Where a node gets the repository at the base commit: a git bundle the head makes once per
base commit, or ``[runtime.remote] clone_url`` the node fetches itself. No cluster: the head's
half (``repository_source``) and the node's (``_prepare``) are plain code over git."""

from __future__ import annotations

from pathlib import Path

import pytest

from adapters.runtime.remote.node import _prepare
from adapters.runtime.remote.ray_runtime import BundleCache, repository_source
from domain.errors import CpeError
from tests.support.git import Repo, git, isolate_git


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Repo:
    isolate_git(monkeypatch)
    made = Repo.create(tmp_path / "head", {"README.md": "one\n"})
    made.commit("two", {"README.md": "two\n"})
    return made


def node_checkout(tmp_path: Path, payload: dict[str, object]) -> Path:
    run_dir = tmp_path / "node" / "s1"
    _prepare(run_dir, payload)
    return run_dir / "repo"


def test_a_bundle_brings_the_base_commit_and_is_made_once_per_base(
    repo: Repo, tmp_path: Path
) -> None:
    cache = BundleCache()
    first = repository_source(repo.root, "main", "", cache)
    head = repo.git("rev-parse", "main")
    assert (first["base_ref"], first["base_sha"]) == ("refs/heads/main", head)
    assert repository_source(repo.root, "main", "", cache)["bundle"] is first["bundle"]
    checkout = node_checkout(tmp_path, first)
    assert git(checkout, "rev-parse", "HEAD") == head
    assert (checkout / "README.md").read_text() == "two\n"
    assert not (tmp_path / "node" / "s1" / "repo.bundle").exists()
    repo.commit("three", {"README.md": "three\n"})
    moved = repository_source(repo.root, "main", "", cache)
    assert moved["bundle"] is not first["bundle"]
    assert moved["base_sha"] == repo.git("rev-parse", "main")


def test_a_clone_url_ships_no_bundle_and_the_node_fetches_the_base_commit(
    repo: Repo, tmp_path: Path
) -> None:
    remote = tmp_path / "remote.git"
    git(tmp_path, "clone", "--quiet", "--bare", str(repo.root), str(remote))
    source = repository_source(repo.root, "main", remote.as_uri(), BundleCache())
    assert "bundle" not in source
    assert source["clone_url"] == remote.as_uri()
    checkout = node_checkout(tmp_path, source)
    assert git(checkout, "rev-parse", "HEAD") == repo.git("rev-parse", "main")


def test_a_base_commit_not_pushed_to_the_clone_url_fails_saying_what_to_do(
    repo: Repo, tmp_path: Path
) -> None:
    remote = tmp_path / "remote.git"
    git(tmp_path, "clone", "--quiet", "--bare", str(repo.root), str(remote))
    repo.commit("not pushed", {"README.md": "three\n"})
    source = repository_source(repo.root, "main", remote.as_uri(), BundleCache())
    with pytest.raises(CpeError, match=r"is on no branch of .*push the default branch there"):
        node_checkout(tmp_path, source)

"""WorktreeManager on real repositories: create, setup, remove, stale paths, reaper, threads."""

from __future__ import annotations

import os
import select
import shutil
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from threading import Barrier

import pytest

from adapters.runtime.workspace.worktrees import Worktree, WorktreeManager
from domain.errors import WorktreeError
from tests.support.git import (
    git,
    head_branch,
    is_clean,
    isolate_git,
    local_branches,
    make_mixed_repo,
    worktree_paths,
    write,
)


@pytest.fixture(autouse=True)
def _isolated_git(monkeypatch: pytest.MonkeyPatch) -> None:
    isolate_git(monkeypatch)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_mixed_repo(tmp_path)


@pytest.fixture
def manager(repo: Path) -> WorktreeManager:
    return WorktreeManager(repo, "main", None, 30)


def only_main_left(repo: Path) -> bool:
    return worktree_paths(repo) == [str(repo)] and local_branches(repo) == ["main"]


# ---------------------------------------------------------------- create


@pytest.mark.spec("S000-08")
def test_create_checks_out_branch_name_at_default_branch_head(
    repo: Path, manager: WorktreeManager
) -> None:
    worktree = manager.create("cpe/issue-1")

    assert worktree == Worktree(repo / ".worktrees/cpe/issue-1", "cpe/issue-1")
    assert head_branch(worktree.path) == "cpe/issue-1"
    assert git(worktree.path, "rev-parse", "HEAD") == git(repo, "rev-parse", "main")
    assert is_clean(worktree.path)


def test_worktrees_dir_is_ignored_through_info_exclude_not_gitignore(
    repo: Path, manager: WorktreeManager
) -> None:
    gitignore = (repo / ".gitignore").read_text()

    manager.create("cpe/a")
    WorktreeManager(repo, "main").create("cpe/b")

    assert is_clean(repo)
    assert (repo / ".gitignore").read_text() == gitignore
    exclude = (repo / ".git/info/exclude").read_text().splitlines()
    assert exclude.count("/.worktrees/") == 1


@pytest.mark.spec("S001-04")
def test_existing_branch_is_force_reset_to_default_branch_and_worktree_starts_clean(
    repo: Path, manager: WorktreeManager
) -> None:
    git(repo, "switch", "--quiet", "-c", "cpe/old")
    write(repo, "leftover.txt", "from an earlier run\n")
    git(repo, "add", "-A")
    git(repo, "commit", "--quiet", "-m", "earlier run")
    git(repo, "switch", "--quiet", "main")

    worktree = manager.create("cpe/old")

    assert git(worktree.path, "rev-parse", "HEAD") == git(repo, "rev-parse", "main")
    assert not (worktree.path / "leftover.txt").exists()
    assert is_clean(worktree.path)


@pytest.mark.parametrize(
    "name",
    ["", "-rf", "a..b", "a b", "@{-1}", "HEAD", "main", "x.lock", "x/", "a~1", "a:b", "../../x"],
)
def test_invalid_branch_name_is_refused_and_nothing_is_created(
    repo: Path, manager: WorktreeManager, name: str
) -> None:
    with pytest.raises(WorktreeError):
        manager.create(name)

    assert only_main_left(repo)
    assert not (repo / ".worktrees").exists() or not any((repo / ".worktrees").iterdir())


def test_branch_under_a_symlink_leading_outside_is_refused(
    tmp_path: Path, repo: Path, manager: WorktreeManager
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (repo / ".worktrees").mkdir()
    (repo / ".worktrees/cpe").symlink_to(outside)

    with pytest.raises(WorktreeError, match="outside"):
        manager.create("cpe/escape")

    assert list(outside.iterdir()) == []
    assert local_branches(repo) == ["main"]


def test_worktrees_dir_that_is_a_symlink_outside_the_repo_is_refused(
    tmp_path: Path, repo: Path, manager: WorktreeManager
) -> None:
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (repo / ".worktrees").symlink_to(outside)

    with pytest.raises(WorktreeError, match="outside the repository"):
        manager.create("cpe/escape")

    assert list(outside.iterdir()) == []


def test_unknown_default_branch_raises_worktree_error(repo: Path) -> None:
    with pytest.raises(WorktreeError, match="develop"):
        WorktreeManager(repo, "develop").create("cpe/x")


def test_a_directory_that_is_not_a_repository_raises_worktree_error(tmp_path: Path) -> None:
    with pytest.raises(WorktreeError):
        WorktreeManager(tmp_path, "main").create("cpe/x")


def test_a_missing_repository_raises_and_creates_nothing(tmp_path: Path) -> None:
    with pytest.raises(WorktreeError, match="not a directory"):
        WorktreeManager(tmp_path / "missing", "main").create("cpe/x")

    assert not (tmp_path / "missing").exists()


def test_a_subdirectory_of_a_repository_is_refused(repo: Path) -> None:
    with pytest.raises(WorktreeError, match="not the top"):
        WorktreeManager(repo / "src", "main").create("cpe/x")

    assert not (repo / "src/.worktrees").exists()
    assert local_branches(repo) == ["main"]


# ---------------------------------------------------------------- setup command


@pytest.mark.spec("S001-01")
def test_failing_setup_command_rejects_and_removes_worktree_and_branch(repo: Path) -> None:
    manager = WorktreeManager(repo, "main", "echo resolving packages; echo 'boom' >&2; exit 3", 30)

    with pytest.raises(WorktreeError, match=r"(?s)exit 3\).*resolving packages\nboom") as caught:
        manager.create("cpe/setup-fails")

    assert "boom" in str(caught.value)
    assert not (repo / ".worktrees/cpe/setup-fails").exists()
    assert only_main_left(repo)


@pytest.mark.spec("S001-01")
def test_setup_argv_that_cannot_start_rejects_and_cleans_up(repo: Path) -> None:
    manager = WorktreeManager(repo, "main", ["/nonexistent/yarn", "install"], 30)

    with pytest.raises(WorktreeError, match="could not start"):
        manager.create("cpe/no-yarn")

    assert only_main_left(repo)


@pytest.mark.spec("S001-01")
def test_setup_timeout_kills_the_command_tree_and_cleans_up(tmp_path: Path, repo: Path) -> None:
    pid_file = tmp_path / "grandchild.pid"
    # The shell forks a grandchild: the timeout must kill the whole group, not just the shell.
    command = f"sleep 60 & echo $! > {pid_file}; wait"
    manager = WorktreeManager(repo, "main", command, setup_timeout=0.5)

    with pytest.raises(WorktreeError, match="timed out"):
        manager.create("cpe/hangs")

    assert_process_ends(int(pid_file.read_text()))
    assert only_main_left(repo)


def assert_process_ends(pid: int) -> None:
    """Wait for ``pid`` to exit through a pidfd (an event, not a sleep); a zombie counts as gone."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return
    try:
        readable, _, _ = select.select([fd], [], [], 10)
        assert readable, f"process {pid} outlived the setup timeout"
    finally:
        os.close(fd)


def test_setup_runs_inside_the_worktree_without_secrets(
    monkeypatch: pytest.MonkeyPatch, repo: Path
) -> None:
    monkeypatch.setenv("GITHUB_TOKEN", "ghp_" + "a" * 36)
    script = (
        "import os, pathlib; "
        "pathlib.Path('setup.out').write_text(os.getcwd() + '\\n' + str(sorted(os.environ)))"
    )
    manager = WorktreeManager(repo, "main", [sys.executable, "-c", script], 30)

    worktree = manager.create("cpe/setup-ok")

    cwd, names = (worktree.path / "setup.out").read_text().split("\n")
    assert cwd == str(worktree.path)
    assert "GITHUB_TOKEN" not in names
    assert "PATH" in names


# ---------------------------------------------------------------- remove


@pytest.mark.spec("S001-02")
@pytest.mark.spec("S000-09")
def test_remove_deletes_worktree_and_local_branch_even_when_dirty(
    repo: Path, manager: WorktreeManager
) -> None:
    worktree = manager.create("cpe/done")
    write(worktree.path, "src/app.py", "changed\n")
    write(worktree.path, "new.txt", "untracked\n")
    git(worktree.path, "add", "new.txt")

    manager.remove(worktree)

    assert not worktree.path.exists()
    assert not (repo / ".worktrees/cpe").exists()
    assert only_main_left(repo)


def test_remove_is_idempotent(repo: Path, manager: WorktreeManager) -> None:
    worktree = manager.create("cpe/twice")

    manager.remove(worktree)
    manager.remove(worktree)

    assert only_main_left(repo)


def test_remove_with_the_directory_already_gone_still_deletes_branch_and_record(
    repo: Path, manager: WorktreeManager
) -> None:
    worktree = manager.create("cpe/vanished")
    shutil.rmtree(worktree.path)

    manager.remove(worktree)

    assert only_main_left(repo)


def test_remove_refuses_a_path_it_did_not_derive(tmp_path: Path, manager: WorktreeManager) -> None:
    precious = tmp_path / "precious"
    precious.mkdir()

    with pytest.raises(WorktreeError, match="not the worktree"):
        manager.remove(Worktree(precious, "cpe/x"))

    assert precious.is_dir()


# ---------------------------------------------------------------- stale worktrees


@pytest.mark.spec("S001-03")
def test_stale_worktree_at_the_target_path_is_removed_before_creating(
    repo: Path, manager: WorktreeManager
) -> None:
    stale = manager.create("cpe/retry")
    write(stale.path, "half-done.txt", "from the crashed run\n")
    write(stale.path, "README.md", "edited by the crashed run\n")

    fresh = WorktreeManager(repo, "main").create("cpe/retry")

    assert fresh.path == stale.path
    assert not (fresh.path / "half-done.txt").exists()
    assert is_clean(fresh.path)
    assert len(worktree_paths(repo)) == 2


@pytest.mark.spec("S001-03")
def test_stale_directory_unknown_to_git_is_removed_before_creating(
    repo: Path, manager: WorktreeManager
) -> None:
    leftover = repo / ".worktrees/cpe/orphan"
    write(leftover, "junk.txt", "not a worktree any more\n")

    worktree = manager.create("cpe/orphan")

    assert not (worktree.path / "junk.txt").exists()
    assert is_clean(worktree.path)


@pytest.mark.spec("S001-03")
def test_stale_record_whose_directory_is_gone_is_pruned_before_creating(
    repo: Path, manager: WorktreeManager
) -> None:
    stale = manager.create("cpe/ghost")
    shutil.rmtree(stale.path)  # git still lists it: "missing but already registered"

    worktree = manager.create("cpe/ghost")

    assert head_branch(worktree.path) == "cpe/ghost"
    assert is_clean(worktree.path)


@pytest.mark.spec("S001-03")
def test_stale_worktree_that_cannot_be_removed_rejects_with_git_stderr(
    repo: Path, manager: WorktreeManager
) -> None:
    stale = manager.create("cpe/locked")
    git(repo, "worktree", "lock", "--reason", "a human is debugging", str(stale.path))

    with pytest.raises(WorktreeError, match="locked"):
        manager.create("cpe/locked")

    assert stale.path.is_dir()


def test_a_stale_directory_holding_live_worktrees_is_not_deleted(
    repo: Path, manager: WorktreeManager
) -> None:
    live = manager.create("feature/x")

    with pytest.raises(WorktreeError):
        manager.create("feature")

    assert live.path.is_dir()
    assert head_branch(live.path) == "feature/x"


# ---------------------------------------------------------------- reaper


def test_reaper_removes_leftovers_under_prefix_and_keeps_the_rest(
    repo: Path, manager: WorktreeManager
) -> None:
    manager.create("cpe/a")
    manager.create("cpe/b")
    kept = manager.create("cpe/keep")
    write(kept.path, "work.txt", "in progress\n")
    git(repo, "branch", "cpe/orphan-branch")
    git(repo, "branch", "feature/human")
    pruned = manager.create("cpe/pruned-record")
    admin_dir = Path(git(pruned.path, "rev-parse", "--absolute-git-dir"))
    for path in sorted(admin_dir.rglob("*"), reverse=True):
        path.unlink() if path.is_file() else path.rmdir()
    admin_dir.rmdir()  # git forgot the worktree; its directory with a .git file remains

    report = WorktreeManager(repo, "main").reap(prefix="cpe/", keep={"cpe/keep"})

    assert worktree_paths(repo) == [str(repo), str(kept.path)]
    assert sorted(local_branches(repo)) == ["cpe/keep", "feature/human", "main"]
    assert (kept.path / "work.txt").is_file()
    assert not (repo / ".worktrees/cpe/pruned-record").exists()
    assert sorted(report.deleted_branches) == [
        "cpe/a",
        "cpe/b",
        "cpe/orphan-branch",
        "cpe/pruned-record",
    ]
    assert len(report.removed_worktrees) == 3
    assert report.failures == ()


def test_reaper_reports_a_locked_leftover_and_removes_the_others(
    repo: Path, manager: WorktreeManager
) -> None:
    locked = manager.create("cpe/locked")
    manager.create("cpe/free")
    git(repo, "worktree", "lock", str(locked.path))

    report = manager.reap()

    assert worktree_paths(repo) == [str(repo), str(locked.path)]
    assert local_branches(repo) == ["cpe/locked", "main"]
    assert len(report.failures) == 2  # the worktree, then its branch (still checked out)
    assert "locked" in report.failures[0]


def test_reaper_never_deletes_the_default_branch(repo: Path, manager: WorktreeManager) -> None:
    git(repo, "switch", "--quiet", "--detach")

    manager.reap(prefix="ma")

    assert local_branches(repo) == ["main"]


def test_reaper_refuses_an_empty_prefix(manager: WorktreeManager) -> None:
    with pytest.raises(ValueError, match="prefix"):
        manager.reap(prefix="")


def test_reaper_on_a_repository_without_worktrees_is_a_no_op(
    repo: Path, manager: WorktreeManager
) -> None:
    report = manager.reap()

    assert report.removed_worktrees == ()
    assert report.failures == ()
    assert only_main_left(repo)


# ---------------------------------------------------------------- threads


def test_eight_threads_create_and_remove_worktrees_at_once(repo: Path) -> None:
    managers = [WorktreeManager(repo, "main"), WorktreeManager(repo, "main")]
    start = Barrier(8)

    def session(i: int) -> str:
        manager = managers[i % 2]
        start.wait(timeout=30)
        worktree = manager.create(f"cpe/thread-{i}")
        write(worktree.path, f"thread-{i}.txt", "work\n")
        branch = head_branch(worktree.path)
        manager.remove(worktree)
        return branch

    with ThreadPoolExecutor(max_workers=8) as pool:
        futures = [pool.submit(session, i) for i in range(8)]
        branches = [future.result(timeout=60) for future in futures]

    assert branches == [f"cpe/thread-{i}" for i in range(8)]
    assert only_main_left(repo)
    assert not (repo / ".worktrees/cpe").exists()


# ---------------------------------------------------------------- the other workspace hooks


def test_workspace_hooks_run_in_the_worktree_and_report_their_failures(
    repo: Path, tmp_path: Path
) -> None:
    """before_run fails the run when it fails; after_run and before_remove are logged; each
    has its own timeout; before_remove runs while the worktree is still there."""
    trace = tmp_path / "trace"
    hooks = {
        "before_run": (f"echo before_run $(basename $PWD) >> {trace}", 30.0),
        "after_run": ("echo formatting; exit 4", 30.0),
        "before_remove": (f"test -e .git && echo before_remove >> {trace}", 30.0),
    }
    manager = WorktreeManager(repo, "main", None, 30, hooks=hooks)
    worktree = manager.create("cpe/hooked")
    manager.run_hook(worktree, "before_run", required=True)
    from structlog.testing import capture_logs  # noqa: PLC0415

    with capture_logs() as logs:
        manager.run_hook(worktree, "after_run", required=False)  # fails: logged, no raise
        manager.remove(worktree)
    assert trace.read_text() == "before_run hooked\nbefore_remove\n"
    [failed] = [e for e in logs if e["event"] == "workspace hook failed"]
    assert failed["hook"] == "after_run"
    assert "the after_run hook 'echo formatting; exit 4' failed (exit 4)" in failed["error"]
    assert only_main_left(repo)
    slow = WorktreeManager(repo, "main", None, 30, hooks={"before_run": ("sleep 30", 0.5)})
    worktree = slow.create("cpe/slow-hook")
    with pytest.raises(WorktreeError, match=r"the before_run hook 'sleep 30' timed out after 0.5s"):
        slow.run_hook(worktree, "before_run", required=True)
    slow.remove(worktree)
    assert only_main_left(repo)


def test_a_worktree_at_a_remote_branch_starts_at_its_newest_head(tmp_path: Path) -> None:
    """On a code host the default branch moves there (a merge), not in this clone: a worktree
    that starts at ``origin/main`` fetches it first, so an item unblocked by a merge a moment
    ago builds on it (it used to start at the head of the last spec poll's fetch)."""
    origin = make_mixed_repo(tmp_path, "origin")
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "--quiet", str(origin), str(clone))
    write(origin, "merged.txt", "merged on the code host\n")
    git(origin, "add", "merged.txt")
    git(origin, "commit", "--quiet", "-m", "a merge on the code host")
    merged = git(origin, "rev-parse", "HEAD")
    manager = WorktreeManager(clone, "origin/main")
    worktree = manager.create("cpe/2-next")
    assert git(worktree.path, "rev-parse", "HEAD") == merged
    assert (worktree.path / "merged.txt").exists()
    manager.remove(worktree)
    # the remote gone: a worktree still starts, at the last fetched head
    git(clone, "remote", "set-url", "origin", str(tmp_path / "nowhere"))
    again = manager.create("cpe/3-later")
    assert git(again.path, "rev-parse", "HEAD") == merged
    manager.remove(again)

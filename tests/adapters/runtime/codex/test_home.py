"""Where an isolated codex run's ``CODEX_HOME`` goes (``codex/home.py``): never under the
temporary directory codex sees (there codex 0.169.0 makes no helper aliases and, with a system
bubblewrap, its sandbox runs nothing), in the run's state when it can, else in a private
directory that is gone when the run ends. ``TMPDIR`` in each test's environment says where
codex's temporary directory is, so every path stays under ``tmp_path``."""

from __future__ import annotations

import fcntl
import json
from pathlib import Path

import pytest

from adapters.runtime.cli.request import RunRequest
from adapters.runtime.codex.home import (
    LOCK,
    PREFIX,
    CodexHome,
    codex_home_of,
    under_codex_temp_dir,
)
from adapters.runtime.codex.runner import CodexCliRunner
from tests.fakes.codex_cli_fixture import FakeCodex
from tests.support.git import make_repo


def held(home: Path) -> bool:
    """Whether a run holds the home's lock (a second lock on it would block)."""
    with (home / LOCK).open("rb") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(lock, fcntl.LOCK_UN)
        return False


def test_codex_s_temporary_directory_is_tmpdir_else_tmp_compared_by_components(
    tmp_path: Path,
) -> None:
    assert under_codex_temp_dir(Path("/tmp/x/.codex"), {})
    assert not under_codex_temp_dir(Path("/tmpfoo/.codex"), {})
    assert not under_codex_temp_dir(Path("/var/tmp/x"), {})
    assert under_codex_temp_dir(tmp_path / "a", {"TMPDIR": str(tmp_path)})
    assert not under_codex_temp_dir(tmp_path / "a", {"TMPDIR": str(tmp_path / "t")})
    assert under_codex_temp_dir(Path("/home/u/.codex"), {"TMPDIR": ""})  # "" prefixes all
    # codex compares its canonical CODEX_HOME: a link into the temporary directory is in it
    (tmp_path / "t").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "t")
    assert under_codex_temp_dir(tmp_path / "link" / "home", {"TMPDIR": str(tmp_path / "t")})


def test_the_codex_home_of_an_environment_is_codex_home_else_home_dot_codex() -> None:
    assert codex_home_of({"CODEX_HOME": "/c", "HOME": "/h"}) == Path("/c")
    assert codex_home_of({"HOME": "/h"}) == Path("/h/.codex")
    assert codex_home_of({}) is None


def test_a_state_directory_outside_the_temporary_directory_keeps_the_home_with_the_run(
    tmp_path: Path,
) -> None:
    env = {"TMPDIR": str(tmp_path / "tmp")}
    home = CodexHome.isolated(tmp_path / "state", "run-1", env, roots=[tmp_path / "cache"])
    assert home.path == tmp_path / "state" / "homes" / "run-1" / ".codex"
    assert (home.removable, home.accepted) == (False, True)
    assert home.path.is_dir()
    home.release()
    assert home.path.is_dir()  # kept, like the run's other state
    assert not (tmp_path / "cache").exists()


def test_under_the_temporary_directory_the_home_goes_to_the_first_root_outside_it(
    tmp_path: Path,
) -> None:
    env = {"TMPDIR": str(tmp_path / "tmp")}
    state = tmp_path / "tmp" / "state"
    inside, outside = tmp_path / "tmp" / "cache", tmp_path / "cache"
    home = CodexHome.isolated(state, "run-1", env, roots=[inside, outside])
    assert (home.removable, home.accepted) == (True, True)
    assert home.path.parent == outside
    assert home.path.name.startswith(f"{PREFIX}run-1-")
    assert home.path.stat().st_mode & 0o777 == 0o700
    assert not under_codex_temp_dir(home.path, env)
    assert held(home.path)
    assert not inside.exists()
    assert not (state / "homes").exists()
    home.release()
    assert not home.path.exists()
    assert list(outside.iterdir()) == []
    home.release()  # idempotent


def test_a_home_a_killed_run_left_is_removed_by_the_next_one_and_live_ones_are_kept(
    tmp_path: Path,
) -> None:
    env = {"TMPDIR": str(tmp_path / "tmp")}
    state, root = tmp_path / "tmp" / "state", tmp_path / "cache"
    live = CodexHome.isolated(state, "live", env, roots=[root])
    killed = CodexHome.isolated(state, "killed", env, roots=[root])
    assert killed._lock is not None
    killed._lock.close()  # its cpe died: the kernel let the lock go, the directory stayed
    not_ours = [root / f"{PREFIX}no-lock", root / "someone-else"]
    for directory in not_ours:
        directory.mkdir()
    (root / f"{PREFIX}a-file").write_text("x")

    fresh = CodexHome.isolated(state, "fresh", env, roots=[root])

    assert not killed.path.exists()
    assert live.path.is_dir()
    assert held(live.path)
    assert all(directory.is_dir() for directory in not_ours)
    assert (root / f"{PREFIX}a-file").is_file()
    for home in (live, fresh):
        home.release()


def test_when_every_place_is_under_the_temporary_directory_the_home_says_codex_refuses_it(
    tmp_path: Path,
) -> None:
    env = {"TMPDIR": str(tmp_path)}
    home = CodexHome.isolated(tmp_path / "state", "run-1", env, roots=[tmp_path / "cache"])
    assert home.path == tmp_path / "state" / "homes" / "run-1" / ".codex"
    assert (home.removable, home.accepted) == (False, False)
    assert not (tmp_path / "cache").exists()


def test_a_root_that_cannot_be_made_is_passed_over(tmp_path: Path) -> None:
    env = {"TMPDIR": str(tmp_path / "tmp")}
    blocked = tmp_path / "a-file"
    blocked.write_text("not a directory")
    home = CodexHome.isolated(
        tmp_path / "tmp" / "state", "run-1", env, roots=[blocked / "cache", tmp_path / "cache"]
    )
    assert home.path.parent == tmp_path / "cache"
    home.release()


@pytest.mark.parametrize("mode", ["ok", "sandbox_broken"])
def test_an_isolated_run_gets_its_own_codex_home_and_leaves_nothing_outside_its_state(
    tmp_path: Path, mode: str
) -> None:
    """The runner sets ``CODEX_HOME`` to the run's home whatever it was given (never the
    user's), reads codex's session log there when the run ends, then removes the home."""
    fake = FakeCodex.install(tmp_path / "fake")
    tmp, outside, users = tmp_path / "tmp", tmp_path / "cache", tmp_path / "user-codex"
    users.mkdir()
    env = {
        **fake.env(mode, hang_seconds=60, output={"role": "implementor", "outcome": "blocked"}),
        "PATH": "/usr/bin:/bin",
        "TMPDIR": str(tmp),
        "CODEX_HOME": str(users),
    }
    runner = CodexCliRunner(
        tmp / "state",
        cli_path=str(fake.path),
        kill_grace=1,
        isolated_home=True,
        home_roots=[tmp / "cache", outside],
    )
    request = RunRequest(
        run_id="run-1", worktree_path=make_repo(tmp_path / "repo"), prompt="go", env=env
    )
    outcome = runner.start(request).wait(timeout=60)

    meta = json.loads((tmp / "state" / "runs" / "run-1" / "runner_metadata.json").read_text())
    home = Path(meta["extra"]["codex_home"])
    assert home.parent == outside
    assert (meta["extra"]["codex_home_kept"], meta["extra"]["codex_home_accepted"]) == (
        False,
        True,
    )
    assert list(users.iterdir()) == []  # the CODEX_HOME it was given stayed untouched
    assert list(outside.iterdir()) == []  # the run's home is gone...
    kept = tmp / "state" / "runs" / "run-1" / "codex-session.jsonl"  # ...its session log is not
    assert '"function_call_output"' in kept.read_text()
    # the session log was read before the home went: a broken sandbox is still told apart
    assert (outcome.termination, outcome.infrastructure) == (
        ("completed", None) if mode == "ok" else ("error", "sandbox")
    )

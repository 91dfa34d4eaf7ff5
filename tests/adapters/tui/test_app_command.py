"""``cpe tui`` where it cannot show anything: a repository no engine has run on (a clear line,
and how to start one), a configuration that does not parse, no terminal (its keys read from
/dev/null), a dumb terminal; an engine starting (its lock held, no journal yet): the console
opens and waits for it; and its help."""

from __future__ import annotations

import contextlib
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from actors.journal import JOURNAL_NAME
from actors.journal_file import InstanceLock
from tests.adapters.cli.test_cli import ROOT, cpe, one_line_error
from tests.adapters.tui.terminal import Tmux
from tests.e2e.running import wait_for
from tests.support.git import make_repo


def test_cpe_tui_where_no_engine_has_run_says_how_to_start_one(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", {"supervisor.toml": "[provider.local]\n"})
    line = one_line_error(cpe("tui", "--repo", str(repo)), 1)
    assert "no engine has run here" in line
    assert str(repo / ".cpe") in line
    assert "start one with cpe run" in line


def test_cpe_tui_with_a_broken_configuration_says_what_is_wrong(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", {"supervisor.toml": "[workflow]\nmax_attempts = 'x'\n"})
    line = one_line_error(cpe("tui", "--repo", str(repo)), 78)
    assert "configuration error" in line
    assert "max_attempts" in line


def test_cpe_tui_is_listed_with_its_options() -> None:
    helped = cpe("tui", "--help")
    assert helped.returncode == 0
    assert "--config" in helped.stdout
    assert "--repo" in helped.stdout
    assert "q or Ctrl-C quits" in " ".join(helped.stdout.split())


@pytest.fixture
def journaled(tmp_path: Path) -> Path:
    """A repository whose journal exists (a pause journaled while no engine ran)."""
    repo = make_repo(tmp_path / "repo", {"supervisor.toml": "[provider.local]\n"})
    paused = cpe("pause", "--repo", str(repo))
    assert paused.returncode == 0, paused.stderr
    assert (repo / ".cpe" / "journal.sqlite3").exists()
    return repo


def test_cpe_tui_off_a_terminal_says_it_needs_one(journaled: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "adapters.cli", "tui", "--repo", str(journaled)],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
        check=False,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "TERM": "xterm"},
    )
    line = one_line_error(result, 2)
    assert line.startswith("cpe: the console needs a terminal: standard input is not one")


def test_cpe_tui_on_a_dumb_terminal_says_what_to_use_instead(journaled: Path) -> None:
    command = shlex.join([sys.executable, "-m", "adapters.cli", "tui", "--repo", str(journaled)])
    result = subprocess.run(  # a pseudo-terminal of its own, as ssh gives one
        ["script", "-qec", command, "/dev/null"],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
        check=False,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "TERM": "dumb"},
    )
    assert result.returncode == 2, result.stdout
    assert "TERM=dumb cannot draw a screen; use cpe status --watch" in result.stdout


def test_cpe_tui_on_an_engine_starting_before_its_journal_opens_and_waits(
    tmp_path: Path,
) -> None:
    repo = make_repo(tmp_path / "repo", {"supervisor.toml": "[provider.local]\n"})
    state_dir = repo / ".cpe"
    state_dir.mkdir()
    lock = InstanceLock(str(state_dir / JOURNAL_NAME))  # as cpe run takes it, at its start
    lock.acquire()
    command = shlex.join([sys.executable, "-m", "adapters.cli", "tui", "--repo", str(repo)])
    code = tmp_path / "code"
    environment = f"env -i PATH=/usr/bin:/bin PYTHONPATH={shlex.quote(str(ROOT))} TERM=xterm"
    try:
        with contextlib.closing(Tmux((80, 24))) as tmux:
            tmux.start(f"cd {shlex.quote(str(ROOT))} && {environment} {command}; echo $? > {code}")
            assert tmux.shows("holds the state but does not answer yet"), tmux.screen()
            assert tmux.shows("no work items"), tmux.screen()  # the board drawn too
            assert not (state_dir / JOURNAL_NAME).exists()  # the console made none
            tmux.keys("q")
            assert wait_for(lambda: code.exists() and not tmux.alive()), tmux.screen()
            assert code.read_text().strip() == "0"
    finally:
        lock.release()

"""``cpe tui`` where it has nothing to show: a repository no engine has run on (a clear line,
and how to start one), a configuration that does not parse; and its help."""

from __future__ import annotations

from pathlib import Path

from tests.adapters.cli.test_cli import cpe, one_line_error
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

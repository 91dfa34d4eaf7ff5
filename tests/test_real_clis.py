"""The two ways the real-codex tests run codex (``real_clis.py``): with the system ``bwrap`` on
its PATH, and with it hidden. In CI the first may not quietly disappear."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from tests.real_clis import WITH_BWRAP, WITHOUT_BWRAP, bwrap_variants, codex_path


def fake_bwrap(directory: Path) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    bwrap = directory / "bwrap"
    bwrap.write_text("#!/bin/sh\nexit 0\n")
    bwrap.chmod(0o755)
    return bwrap


def test_in_ci_the_with_bwrap_variant_runs_even_where_bwrap_is_missing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("CI", raising=False)
    assert bwrap_variants() == [WITHOUT_BWRAP]
    monkeypatch.setenv("CI", "true")
    assert bwrap_variants() == [WITH_BWRAP, WITHOUT_BWRAP]
    fake_bwrap(tmp_path / "bin")
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    monkeypatch.delenv("CI")
    assert bwrap_variants() == [WITH_BWRAP, WITHOUT_BWRAP]


def test_the_with_bwrap_variant_fails_the_test_when_bwrap_is_not_on_the_path(
    tmp_path: Path,
) -> None:
    with pytest.raises(pytest.fail.Exception, match="apt-get install -y bubblewrap"):
        codex_path(WITH_BWRAP, str(tmp_path), tmp_path)
    fake_bwrap(tmp_path / "bin")
    assert codex_path(WITH_BWRAP, str(tmp_path / "bin"), tmp_path) == str(tmp_path / "bin")


def test_the_without_bwrap_path_hides_bwrap_and_keeps_everything_else(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    fake_bwrap(bin_dir)
    (bin_dir / "tool").symlink_to(shutil.which("true") or "/bin/true")
    path = os.pathsep.join([str(bin_dir), "/usr/bin"])

    hidden = codex_path(WITHOUT_BWRAP, path, tmp_path / "scratch")

    assert shutil.which("bwrap", path=hidden) is None
    assert shutil.which("tool", path=hidden) is not None
    assert shutil.which("python3", path=hidden) is not None
    assert hidden.split(os.pathsep)[0] != str(bin_dir)

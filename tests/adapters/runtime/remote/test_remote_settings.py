"""``[runtime.remote]`` without a cluster: Ray is imported only when a role runs remotely, and
asking for it where it is not installed is one line and exit 78."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from adapters.cli.settings import parse_config
from tests.e2e.running import CPE, make_cpe_repo

ROOT = Path(__file__).resolve().parents[4]


def test_nothing_imports_ray_unless_a_role_runs_remotely() -> None:
    probe = (
        "import sys, adapters.cli, adapters.cli.build, adapters.cli.settings, actors.engine, "
        "adapters.runtime.remote.settings; print('ray' in sys.modules)"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe],
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert result.stdout.strip() == "False", result.stderr


def test_the_remote_roles_are_those_the_section_names() -> None:
    config = parse_config(
        {"runtime": {"remote": {"address": "auto", "roles": {"implementor": True}}}}
    )
    assert config.runtime.remote_roles() == {"implementor"}
    assert parse_config({}).runtime.remote_roles() == frozenset()


def test_asking_for_ray_without_it_installed_is_one_line_and_exit_78(tmp_path: Path) -> None:
    repo = make_cpe_repo(
        tmp_path / "repo",
        extra='[runtime.remote]\nkind = "ray"\n[runtime.remote.roles]\nimplementor = true\n',
    )
    shim = tmp_path / "shim" / "ray"  # Ray as a machine without the extra has it: absent
    shim.mkdir(parents=True)
    (shim / "__init__.py").write_text("raise ImportError('No module named ray')\n")
    result = subprocess.run(
        [str(CPE), "run", "--repo", str(repo)],
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        env={
            "PATH": os.environ["PATH"],
            "HOME": str(tmp_path),
            "LANG": "C.UTF-8",
            "PYTHONPATH": str(shim.parent),
            "ANTHROPIC_API_KEY": "sk-ant-test-never-sent",
        },
    )
    assert result.returncode == 78, result.stdout + result.stderr
    lines = [line for line in (result.stdout + result.stderr).splitlines() if line.strip()]
    assert len(lines) == 1, lines
    assert "needs Ray" in lines[0]
    assert "cpe[ray]" in lines[0]

"""``cpe run`` with a remote forge after a ``cpe init`` (or a spec) committed and not pushed: the
agents start from, and the specs are read at, the default branch on the forge, so neither sees
those commits. The start says so, naming the branch and the push to make; once pushed, nothing
is said. (Found by trying cpe on a GitLab project as a newcomer: a committed spec was never
planned, and nothing said why.)"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.adapters.cli.test_cli import ROOT
from tests.e2e.running import wait_for
from tests.fakes.gitlab import FakeGitLab
from tests.support.git import git
from tests.support.gitlab import running_gitlab

TOKEN_ENV = "CPE_UNPUSHED_GITLAB_TOKEN"
TOKEN = "glpat-unpushed"


@pytest.fixture
def fake_gitlab(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeGitLab]:
    with running_gitlab(tmp_path, monkeypatch, tokens={TOKEN: "cpe-bot"}) as gl:
        yield gl


def warnings_at_start(repo: Path, log: Path, home: Path) -> list[dict[str, object]]:
    """``cpe run --scripted`` until its start is over (the control socket listens after the
    start's warnings), then stopped: the ``not pushed`` lines it logged."""
    with log.open("w") as out:
        run = subprocess.Popen(
            [sys.executable, "-m", "adapters.cli", "run", "--scripted", "--repo", str(repo)],
            stdout=out,
            stderr=subprocess.STDOUT,
            text=True,
            env={
                "PATH": "/usr/bin:/bin",
                "PYTHONPATH": str(ROOT),
                "HOME": str(home),
                TOKEN_ENV: TOKEN,
            },
        )
        try:
            assert wait_for(lambda: "control socket listening" in log.read_text()), log.read_text()
        finally:
            run.send_signal(signal.SIGTERM)
            run.wait(120)
    lines = [json.loads(line) for line in log.read_text().splitlines() if line[:1] == "{"]
    return [line for line in lines if str(line["event"]).startswith("not pushed")]


def test_run_says_which_commits_the_forge_lacks_until_they_are_pushed(
    tmp_path: Path, fake_gitlab: FakeGitLab
) -> None:
    repo = tmp_path / "repo"
    git(tmp_path, "clone", "--quiet", str(fake_gitlab.git.path), str(repo))
    (repo / "supervisor.toml").write_text(
        '[provider.work_items]\nkind = "local"\n[provider.revisions]\nkind = "gitlab"\n'
        "[provider.gitlab]\n"
        f'project = "{fake_gitlab.project_path}"\n'
        f'base_url = "{fake_gitlab.base_url}"\n'
        f'token_env = "{TOKEN_ENV}"\n'
        '[dashboard]\nlisten = "127.0.0.1:0"\n'
    )
    (repo / "specs").mkdir()
    (repo / "specs" / "greeting.md").write_text("# Greeting\n\nSay hello.\n")
    (repo / ".gitignore").write_text(".cpe/\n.worktrees/\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "cpe")
    git(repo, "commit", "-qm", "a second one", "--allow-empty")
    home = tmp_path / "home"
    home.mkdir()

    [said] = warnings_at_start(repo, tmp_path / "first.log", home)
    assert said["event"] == (
        "not pushed: main has 2 commit(s) that origin/main lacks; with the revisions on gitlab, "
        "agents start from origin's main and specs are read there: push them (git push origin "
        "main)"
    )
    assert said["level"] == "warning"

    git(repo, "push", "-q", "origin", "main")
    assert warnings_at_start(repo, tmp_path / "second.log", home) == []

"""A person merges an approved revision by hand on the local provider (``auto_merge = false``,
as ``cpe init`` writes it): the running engine notices and marks the item done, as the README
promises ("otherwise you merge and cpe marks the item done"). It once waited for ever."""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path

import pytest

from adapters.scripted_model import Match, ScriptedModelServer, load_scenario
from tests.e2e.running import (
    CPE,
    add_work_item,
    make_cpe_repo,
    revisions,
    run_command,
    start_cpe,
    wait_for,
    work_items,
)
from tests.support.git import git_raw

pytestmark = pytest.mark.timeout(600)


def status(repo: Path) -> str:
    [item] = work_items(repo)
    return item.status


@pytest.mark.parametrize("how", ["--ff-only", "--no-ff"])
def test_a_revision_merged_by_hand_marks_its_item_done(
    tmp_path: Path, processes: list[subprocess.Popen[str]], how: str
) -> None:
    repo = make_cpe_repo(tmp_path / "repo")
    config = repo / "supervisor.toml"
    config.write_text(config.read_text().replace("auto_merge = true", "auto_merge = false"))
    git_raw(repo, "commit", "-qam", "a person merges")
    add_work_item(repo, "Greeting", "Add greet(name).")
    home = tmp_path / "home"
    home.mkdir()
    book = [load_scenario("implement"), load_scenario("approve", match=Match(role="reviewer"))]
    log_path = home / "cpe.log"
    with log_path.open("a") as log, ScriptedModelServer(book) as model:
        engine = start_cpe(repo, home, log, model.client_env())
        processes.append(engine)
        assert wait_for(lambda: status(repo) == "approved", 300), log_path.read_text()[-3000:]
        [revision] = [r for r in revisions(repo) if r.state == "open"]
        git_raw(repo, "merge", "-q", how, "-m", "merged by a person", revision.branch)
        # a person looks meanwhile: the table only, whoever notices the merge first
        listed = run_command([str(CPE), "work", "list", "--repo", str(repo)], home=home)
        assert listed.returncode == 0, listed.stderr
        assert [line.split()[0] for line in listed.stdout.splitlines()] == ["item", "#1"]
        assert wait_for(lambda: status(repo) == "done", 120), log_path.read_text()[-3000:]
        engine.send_signal(signal.SIGTERM)
        assert engine.wait(120) == 0
    [merged] = revisions(repo)
    assert merged.state == "merged"

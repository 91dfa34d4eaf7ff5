"""`cpe run` landing two items that agents implement at once, through the merge queue: the real
`claude` CLI, the scripted model, the local provider and pipeline.

- Two items edit the same line: the first lands, the second no longer merges; it goes back to
  its implementor, whose prompt names the conflicting file, and lands after the re-run.
- One item renames a function, the other adds a caller of the old name: each passes on its own
  branch. The second is tested merged with the first before it lands, fails there, is sent back
  and fixed; no commit on the default branch is ever red.

In both, neither item spends an attempt on the other's landing.
"""

from __future__ import annotations

import contextlib
import signal
import subprocess
from pathlib import Path

import pytest

from actors.journal import Journal
from adapters.scripted_model import Match, ScriptedModelServer, load_scenario
from adapters.scripted_model.scenario import Scenario
from tests.adapters.cli.test_cli import cpe
from tests.e2e.queue_loop import (
    CHECK,
    OLD,
    RENAME_TITLES,
    SENT_BACK,
    implementor,
    queue_repo,
    red_commits,
    rename_book,
)
from tests.e2e.running import start_cpe, wait_for, work_items
from tests.support.git import git_raw


def run_until_done(
    repo: Path, home: Path, book: list[Scenario], processes: list[subprocess.Popen[str]]
) -> tuple[bool, str, ScriptedModelServer]:
    status = ""

    def all_done() -> bool:
        nonlocal status
        status = cpe("status", cwd=repo).stdout
        items = work_items(repo)
        return len(items) == 2 and all(i.status in ("done", "blocked") for i in items)

    with contextlib.ExitStack() as stack:
        server = stack.enter_context(ScriptedModelServer(book))
        log = stack.enter_context((home / "cpe.log").open("a"))
        cpe_run = start_cpe(repo, home, log, server.client_env())
        processes.append(cpe_run)
        finished = wait_for(all_done, 300)
        cpe_run.send_signal(signal.SIGTERM)
        assert cpe_run.wait(120) == 0
    log_text = (home / "cpe.log").read_text()
    return finished, status + log_text[-4000:], server


def attempts(repo: Path) -> dict[str, int]:
    journal = Journal(repo / ".cpe" / "journal.sqlite3")
    try:
        return dict(journal.replay().attempts)
    finally:
        journal.close()


def prompts_played(server: ScriptedModelServer, scenario: str) -> list[str]:
    """The task prompts of the conversations ``scenario`` answered."""
    return [
        request.conversation.prompt
        for request in server.requests
        if request.scenario == scenario and request.conversation is not None
    ]


def setup(tmp_path: Path, files: dict[str, str], titles: tuple[str, ...]) -> tuple[Path, Path]:
    repo = queue_repo(tmp_path / "repo", files, titles)
    home = tmp_path / "home"
    home.mkdir()
    return repo, home


@pytest.mark.timeout(600)
def test_two_items_editing_the_same_line_both_land_the_second_after_a_free_rerun(
    tmp_path: Path, processes: list[subprocess.Popen[str]]
) -> None:
    repo, home = setup(
        tmp_path,
        {"check.py": CHECK, "app.py": "GREETING = 'hello'\n"},
        ("Greet in English", "Greet in French"),
    )
    book = [
        implementor("1", {"app.py": "GREETING = 'hello, world'\n"}, sent_back=True),
        implementor(
            "2", {"app.py": "GREETING = 'hello, world'\nFRENCH = 'bonjour'\n"}, sent_back=True
        ),
        implementor("1", {"app.py": "GREETING = 'hello, world'\n"}),
        implementor("2", {"app.py": "GREETING = 'bonjour'\n"}),
        load_scenario("approve", match=Match(role="reviewer")),
    ]
    done, said, server = run_until_done(repo, home, book, processes)
    assert done, said
    assert [i.status for i in work_items(repo)] == ["done", "done"], said
    # Exactly one of them was sent back: the one that landed second.
    again = [name for name in ("implement-1-again", "implement-2-again")
             if prompts_played(server, name)]  # fmt: skip
    assert len(again) == 1, said
    [prompt, *_] = prompts_played(server, again[0])
    assert SENT_BACK in prompt
    assert "app.py" in prompt
    assert "<<<<<<<" in prompt
    assert "the merge of #" in prompt  # which landing moved the branch
    assert attempts(repo) == {"1": 1, "2": 1}  # the re-run was free
    final = git_raw(repo, "show", "main:app.py")
    assert "hello, world" in final
    assert "<<<<<<<" not in final


@pytest.mark.timeout(600)
def test_a_rename_and_a_caller_of_the_old_name_never_turn_the_default_branch_red(
    tmp_path: Path, processes: list[subprocess.Popen[str]]
) -> None:
    repo, home = setup(tmp_path, {"lib.py": OLD}, RENAME_TITLES)
    start = git_raw(repo, "rev-parse", "main").strip()
    book = rename_book()
    done, said, server = run_until_done(repo, home, book, processes)
    assert done, said
    assert [i.status for i in work_items(repo)] == ["done", "done"], said
    assert attempts(repo) == {"1": 1, "2": 1}
    # Every commit the default branch has been at since (its first parents) passes the check.
    assert len(git_raw(repo, "rev-list", "--first-parent", f"{start}..main").split()) == 2
    assert red_commits(repo, start, tmp_path) == []
    again = [name for name in ("implement-1-again", "implement-2-again")
             if prompts_played(server, name)]  # fmt: skip
    assert len(again) == 1, said
    [prompt, *_] = prompts_played(server, again[0])
    assert SENT_BACK in prompt
    assert "ImportError" in prompt or "cannot import" in prompt

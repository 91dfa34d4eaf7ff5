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
from typing import Any

import pytest

from actors.journal import Journal
from adapters.scripted_model import Match, ScriptedModelServer, load_scenario
from adapters.scripted_model.scenario import Scenario, parse_scenario
from tests.e2e.running import add_work_item, make_cpe_repo, start_cpe, wait_for, work_items
from tests.support.git import git_raw
from tests.test_cli import cpe

SENT_BACK = "Sent Back by the Merge Queue"
# Imports every module of the repository: a caller of a name that is gone fails.
CHECK = (
    "import importlib, pathlib, sys\n"
    "sys.path.insert(0, '.')\n"
    "for path in sorted(pathlib.Path('.').glob('*.py')):\n"
    "    if path.stem != 'check':\n"
    "        importlib.import_module(path.stem)\n"
    "print('all modules import')\n"
)
PIPELINE = 'pipeline_command = ["python3", "-B", "check.py"]'


def implementor(item: str, files: dict[str, str], *, sent_back: bool = False) -> Scenario:
    """An implementor for work item ``item`` that writes ``files``; with ``sent_back`` it plays
    only for a run whose prompt carries the merge queue's report."""
    prompt = rf"Work Item #{item}\b" + (rf"[\s\S]*{SENT_BACK}" if sent_back else "")
    writes: list[dict[str, Any]] = [
        {"tool": "Write", "input": {"file_path": "{cwd}/" + name, "content": content}}
        for name, content in files.items()
    ]
    done = {"role": "implementor", "outcome": "completed", "summary": f"item {item}"}
    return parse_scenario(
        {
            "name": f"implement-{item}" + ("-again" if sent_back else ""),
            "match": {"role": "implementor", "prompt": prompt},
            "turns": [writes, [{"tool": "StructuredOutput", "input": done}]],
        }
    )


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


def setup(tmp_path: Path, files: dict[str, str], titles: tuple[str, str]) -> tuple[Path, Path]:
    repo = make_cpe_repo(tmp_path / "repo")
    for name, text in files.items():
        (repo / name).write_text(text)
    config = repo / "supervisor.toml"
    config.write_text(config.read_text().replace("pipeline_command = []", PIPELINE))
    git_raw(repo, "add", "-A")
    git_raw(repo, "commit", "-qm", "the project and its check")
    for title in titles:
        add_work_item(repo, title, f"{title}.")
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
    old = "def old_name():\n    return 1\n"
    new = "def new_name():\n    return 1\n"
    repo, home = setup(
        tmp_path, {"check.py": CHECK, "lib.py": old}, ("Rename old_name", "Use the library")
    )
    start = git_raw(repo, "rev-parse", "main").strip()
    caller_old = "from lib import old_name\n\nVALUE = old_name()\n"
    caller_new = "from lib import new_name\n\nVALUE = new_name()\n"
    book = [
        implementor("1", {"lib.py": new, "caller.py": caller_new}, sent_back=True),
        implementor("2", {"caller.py": caller_new}, sent_back=True),
        implementor("1", {"lib.py": new}),
        implementor("2", {"caller.py": caller_old}),
        load_scenario("approve", match=Match(role="reviewer")),
    ]
    done, said, server = run_until_done(repo, home, book, processes)
    assert done, said
    assert [i.status for i in work_items(repo)] == ["done", "done"], said
    assert attempts(repo) == {"1": 1, "2": 1}
    # Every commit the default branch has been at since (its first parents) passes the check.
    commits = git_raw(repo, "rev-list", "--first-parent", f"{start}..main").split()
    assert len(commits) == 2, said
    for commit in commits:
        checkout = tmp_path / f"at-{commit[:12]}"
        git_raw(repo, "worktree", "add", "--quiet", "--detach", str(checkout), commit)
        result = subprocess.run(
            ["python3", "-B", "check.py"], cwd=checkout, capture_output=True, text=True, check=False
        )
        assert result.returncode == 0, f"{commit}: {result.stdout}{result.stderr}"
    again = [name for name in ("implement-1-again", "implement-2-again")
             if prompts_played(server, name)]  # fmt: skip
    assert len(again) == 1, said
    [prompt, *_] = prompts_played(server, again[0])
    assert SENT_BACK in prompt
    assert "ImportError" in prompt or "cannot import" in prompt

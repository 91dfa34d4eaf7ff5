"""Two items implemented at once and landed through the merge queue, as the end-to-end tests
and the crash suite run it: a repository with a check that imports every module, a book of
implementor scenarios (a first run, and a run answering the merge queue's send-back), the real
`claude` CLI on the scripted model, and ``cpe run`` on the local provider.

The *rename* pair: item 1 renames ``old_name``, item 2 adds a caller of the old name. Each
passes on its own branch; whichever lands second fails merged with the first, is sent back,
and its re-run writes code that works with both."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

from adapters.scripted_model import Match, load_scenario
from adapters.scripted_model.scenario import Scenario, parse_scenario
from tests.e2e.running import add_work_item, make_cpe_repo
from tests.support.git import git_raw

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
OLD = "def old_name():\n    return 1\n"
NEW = "def new_name():\n    return 1\n"
CALLER_OLD = "from lib import old_name\n\nVALUE = old_name()\n"
CALLER_NEW = "from lib import new_name\n\nVALUE = new_name()\n"
RENAME_TITLES = ("Rename old_name", "Use the library")


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


def rename_book() -> list[Scenario]:
    return [
        implementor("1", {"lib.py": NEW, "caller.py": CALLER_NEW}, sent_back=True),
        implementor("2", {"caller.py": CALLER_NEW}, sent_back=True),
        implementor("1", {"lib.py": NEW}),
        implementor("2", {"caller.py": CALLER_OLD}),
        load_scenario("approve", match=Match(role="reviewer")),
    ]


def queue_repo(path: Path, files: dict[str, str], titles: tuple[str, ...]) -> Path:
    """A cpe repository with ``files``, the check as its pipeline, and a work item per title."""
    repo = make_cpe_repo(path)
    for name, text in {"check.py": CHECK, **files}.items():
        (repo / name).write_text(text)
    config = repo / "supervisor.toml"
    config.write_text(config.read_text().replace("pipeline_command = []", PIPELINE))
    git_raw(repo, "add", "-A")
    git_raw(repo, "commit", "-qm", "the project and its check")
    for title in titles:
        add_work_item(repo, title, f"{title}.")
    return repo


def red_commits(repo: Path, since: str, scratch: Path) -> list[str]:
    """The commits the default branch has been at since ``since`` (its first parents) whose
    check fails, each with its output."""
    red = []
    for commit in git_raw(repo, "rev-list", "--first-parent", f"{since}..main").split():
        checkout = scratch / f"at-{commit[:12]}"
        git_raw(repo, "worktree", "add", "--quiet", "--detach", str(checkout), commit)
        result = subprocess.run(
            ["python3", "-B", "check.py"], cwd=checkout, capture_output=True, text=True,
            check=False,
        )  # fmt: skip
        git_raw(repo, "worktree", "remove", "--force", str(checkout))
        if result.returncode != 0:
            red.append(f"{commit}: {result.stdout}{result.stderr}")
    return red

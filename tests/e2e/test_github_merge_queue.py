"""The merge queue on GitHub: a real ``cpe run`` with ``[provider] kind = "github"`` against the
fake GitHub (which answers ``mergeable``, ``POST /merges`` and refuses a conflicting merge with
405 as GitHub does), a fake CI running the repository's check on every pull request head, the
real ``claude`` CLI and the scripted model; the pairs of ``tests/e2e/forge_queue.py``."""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import pytest

from tests.e2e.forge_queue import PAIRS, TITLES, QueueForge, land_the_colliding_pair, project_files
from tests.e2e.github_loop import TOKEN, TOKEN_ENV, FakeCI, clone_for_cpe
from tests.fakes.github import FakeGitHub
from tests.support.git import isolate_git

pytestmark = pytest.mark.timeout(900)


@pytest.fixture
def github(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeGitHub]:
    isolate_git(monkeypatch)
    with FakeGitHub(tmp_path / "github", tokens={TOKEN: "cpe-bot"}) as fake:
        fake.seed(project_files(tmp_path), "the project")
        for title in TITLES:
            fake.add_issue(title, f"{title}.", user="cpe-bot")
        yield fake


def on(github: FakeGitHub, base: Path) -> QueueForge:
    def landed() -> bool:
        with github.lock:
            pulls = list(github.pulls.values())
        return len(pulls) == 2 and all(p.merged for p in pulls)

    def items_closed() -> dict[int, bool]:
        with github.lock:
            return {i.number: i.state == "closed" for i in github.issues.values() if not i.is_pull}

    def ci(check: Sequence[str], start_when: Callable[[], bool]) -> FakeCI:
        return FakeCI(github, check, start_when=start_when)

    return QueueForge(
        clone_for_cpe(github, base),
        {TOKEN_ENV: TOKEN},
        github.git.path,
        github.default_head,
        landed,
        items_closed,
        ci,
    )


@pytest.mark.parametrize("pair", sorted(PAIRS))
def test_two_items_that_collide_both_land_on_github_the_second_after_a_free_rerun(
    tmp_path: Path, github: FakeGitHub, processes: list[subprocess.Popen[str]], pair: str
) -> None:
    land_the_colliding_pair(tmp_path, on(github, tmp_path), pair, processes)

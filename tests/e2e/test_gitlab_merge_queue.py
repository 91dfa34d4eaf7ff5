"""The merge queue on GitLab: a real ``cpe run`` with ``[provider] kind = "gitlab"`` against the
fake GitLab, a runner reporting the repository's check on every merge request head, the real
``claude`` CLI and the scripted model; the pairs of ``tests/e2e/forge_queue.py``. The second
merge request is brought up to date by GitLab's own rebase (``PUT /rebase``, done in the
background and polled), tested on top of the first, and landed or sent back; and a kill just
after the rebase was asked for, then a restart, lands both once."""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import pytest

from tests.e2e.crash import Crash, gitlab_queue_cases
from tests.e2e.forge_queue import PAIRS, TITLES, QueueForge, land_the_colliding_pair, project_files
from tests.e2e.gitlab_loop import TOKEN, TOKEN_ENV, USERNAME, FakeRunner, clone_for_cpe
from tests.fakes.gitlab import FakeGitLab
from tests.support.git import isolate_git

pytestmark = pytest.mark.timeout(900)


@pytest.fixture
def gitlab(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeGitLab]:
    isolate_git(monkeypatch)
    with FakeGitLab(tmp_path / "gitlab", tokens={TOKEN: USERNAME}) as fake:
        fake.seed(project_files(tmp_path), "the project")
        for title in TITLES:
            fake.open_issue(title, f"{title}.", author=USERNAME)
        yield fake


def on(gitlab: FakeGitLab, base: Path) -> QueueForge:
    def landed() -> bool:
        with gitlab.lock:
            mrs = list(gitlab.merge_requests.values())
        return len(mrs) == 2 and all(m.state == "merged" for m in mrs)

    def items_closed() -> dict[int, bool]:
        with gitlab.lock:
            return {i.iid: i.state == "closed" for i in gitlab.issues.values()}

    def ci(check: Sequence[str], start_when: Callable[[], bool]) -> FakeRunner:
        return FakeRunner(gitlab, check, start_when=start_when)

    return QueueForge(
        clone_for_cpe(gitlab, base),
        {TOKEN_ENV: TOKEN},
        gitlab.git.path,
        gitlab.default_head,
        landed,
        items_closed,
        ci,
    )


@pytest.mark.parametrize("pair", sorted(PAIRS))
def test_two_items_that_collide_both_land_on_gitlab_the_second_after_a_free_rerun(
    tmp_path: Path, gitlab: FakeGitLab, processes: list[subprocess.Popen[str]], pair: str
) -> None:
    trace = tmp_path / "crash-trace"
    land_the_colliding_pair(tmp_path, on(gitlab, tmp_path), pair, processes, trace=trace)
    if pair == "rename":  # the second passes apart: it is rebased to be tested on the first
        assert "gitlab.update.after_rebase" in trace.read_text().splitlines()


@pytest.mark.parametrize("crash", gitlab_queue_cases(), ids=str)
def test_a_kill_after_gitlab_was_asked_to_rebase_then_a_restart_lands_both_once(
    tmp_path: Path, gitlab: FakeGitLab, processes: list[subprocess.Popen[str]], crash: Crash
) -> None:
    land_the_colliding_pair(tmp_path, on(gitlab, tmp_path), "rename", processes, crash=crash)

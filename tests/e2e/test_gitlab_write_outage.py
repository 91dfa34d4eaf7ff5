"""The whole loop on GitLab (``tests/e2e/gitlab_loop.py``) when GitLab refuses a write longer than
cpe's retries last: a status change and a merge each fail with a 503 on every try of one write
(four: ``RetrySettings.attempts``), so the write ends failed. Nothing changes on
GitLab after that, so no poll would ever show a reason to make it again: the item stayed
in-progress with a green merge request and no review, or approved at the head of the merge queue,
until cpe was restarted (found by trying cpe on a GitLab project with
GitLab stopped for a minute). Now the next poll cycle reports what the failed write was about, and
the loop finishes without a restart, each write made once when GitLab takes it."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.gitlab_loop import TOKEN, USERNAME, GitLabLoop, seed_with_the_sample
from tests.fakes.gitlab import FakeGitLab
from tests.fakes.http import Fault
from tests.support.git import isolate_git

pytestmark = pytest.mark.timeout(900)

TRIES = 4  # the executor's tries of one write (RetrySettings.attempts)


@pytest.fixture
def gitlab(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeGitLab]:
    isolate_git(monkeypatch)
    with FakeGitLab(tmp_path / "gitlab", tokens={TOKEN: USERNAME}) as fake:
        seed_with_the_sample(fake, tmp_path)
        yield fake


def failed_writes(log: Path) -> list[str]:
    """The writes the log says ended failed, past their retries."""
    found = []
    for line in log.read_text().splitlines():
        if line[:1] == "{" and (entry := json.loads(line))["event"] == "command execution failed":
            found.append(str(entry["command"]))
    return found


def test_a_write_gitlab_refused_past_every_retry_is_made_again_without_a_restart(
    tmp_path: Path, gitlab: FakeGitLab
) -> None:
    status = gitlab.fail(Fault("PUT", r"/issues/\d+$", 503, times=TRIES))
    merge = gitlab.fail(Fault("PUT", r"/merge_requests/\d+/merge$", 503, times=TRIES))
    loop = GitLabLoop(tmp_path, gitlab)
    try:
        loop.finish()  # one cpe run, never restarted
        loop.check_invariants()
    finally:
        loop.close()
    assert (status.hits, merge.hits) == (TRIES, TRIES)
    assert sorted(failed_writes(loop.log_path)) == ["MergeRevision", "TransitionStatus"]

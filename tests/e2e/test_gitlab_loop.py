"""The whole loop on GitLab: a real ``cpe run`` with ``[provider] kind = "gitlab"`` against the
fake GitLab, the demo's sample repository as the project's content, the real ``claude`` CLI and
the scripted model playing the demo's book (``tests/e2e/gitlab_loop.py``).

The planner's items become issues, revisions merge requests built through the Commits API, a
runner (here: the sample's tests run on each merge request's head) reports commit statuses, the
reviewer's verdicts become notes and diff discussions (one round of changes), and merge requests
whose pipeline is green are merged. The same loop runs under GitLab's faults, and killed at
every crashpoint around a GitLab write then restarted (a subset chosen by the commit;
``make crash-all`` runs all)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.crash import Crash, gitlab_cases, selected
from tests.e2e.gitlab_loop import REAL_PACING, TOKEN, USERNAME, GitLabLoop, seed_with_the_sample
from tests.fakes.gitlab import FakeGitLab
from tests.fakes.gitlab.records import Tier
from tests.fakes.http import Fault
from tests.support.git import isolate_git

# A loop waits up to 300 s for both items (under a minute on an idle machine, several times that
# on a loaded CI one), then stops cpe: the per-test limit is above that (twice, with a crash).
pytestmark = pytest.mark.timeout(900)

CI_CRASHES = 1  # crash cases a default run takes, chosen by the commit


# Points only a loop on GitLab Premium reaches (blocking links are Premium).
PREMIUM_POINTS = ("gitlab.issue.after_link",)


@contextlib.contextmanager
def seeded_gitlab(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tier: Tier = "free"
) -> Iterator[FakeGitLab]:
    """A fake GitLab on ``tier`` whose project holds the demo's sample."""
    isolate_git(monkeypatch)
    with FakeGitLab(tmp_path / "gitlab", tokens={TOKEN: USERNAME}, tier=tier) as fake:
        seed_with_the_sample(fake, tmp_path)
        yield fake


@pytest.fixture
def gitlab(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeGitLab]:
    with seeded_gitlab(tmp_path, monkeypatch) as fake:
        yield fake


@contextlib.contextmanager
def gitlab_loop(tmp_path: Path, gitlab: FakeGitLab, **options: Any) -> Iterator[GitLabLoop]:
    loop = GitLabLoop(tmp_path, gitlab, **options)
    try:
        yield loop
    finally:
        loop.close()


def test_the_whole_loop_runs_on_gitlab(tmp_path: Path, gitlab: FakeGitLab) -> None:
    """On GitLab Free; and it passes every crashpoint the crash cases on GitLab need but the
    Premium loop's; at the provider's own write rates (the other loops pace a hundred times
    faster)."""
    with gitlab_loop(tmp_path, gitlab, extra=REAL_PACING) as loop:
        loop.finish(trace=True)
        loop.check_invariants()
        counts = loop.counts()
        hits = loop.trace.read_text().splitlines()
    # what the loop cost GitLab (the figures docs/benchmarks.md states)
    print(
        f"\nthe loop on GitLab: {counts.requests} requests, {counts.counted} counted, "
        f"{counts.writes} writes, {counts.not_modified} answered 304"
    )
    assert counts.writes < 100
    missed = [
        str(c)
        for c in gitlab_cases()
        if c.point not in PREMIUM_POINTS and hits.count(c.point) < c.nth
    ]
    assert missed == [], f"crash cases the loop does not reach: {missed}"


def test_the_whole_loop_runs_on_gitlab_premium(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On GitLab Premium: the second issue is linked as blocked by the first, scoped status
    labels displace each other, and the points only Premium reaches are passed."""
    with (
        seeded_gitlab(tmp_path, monkeypatch, "premium") as gitlab,
        gitlab_loop(tmp_path, gitlab) as loop,
    ):
        loop.finish(trace=True)
        loop.check_invariants()
        hits = loop.trace.read_text().splitlines()
        removed = [e for e in gitlab.label_events if e.action == "remove"]
    assert all(hits.count(point) >= 1 for point in PREMIUM_POINTS), hits
    assert removed, "no status label ever left an issue"


def test_the_loop_on_gitlab_survives_writes_applied_whose_answers_were_lost(
    tmp_path: Path, gitlab: FakeGitLab
) -> None:
    """A 502 after GitLab applied the write, once for each kind of write the loop makes:
    creating an issue, a commit, a merge request, a review's note, and merging; and a dropped
    connection after a status change was applied. Each is found done: no duplicate issue,
    commit, merge request, review or merge."""
    faults = [
        gitlab.fail(Fault("POST", r"/issues$", 502, apply_first=True)),
        gitlab.fail(Fault("POST", r"/repository/commits$", 502, apply_first=True)),
        gitlab.fail(Fault("POST", r"/merge_requests$", 502, apply_first=True)),
        gitlab.fail(Fault("POST", r"/merge_requests/\d+/notes$", 502, apply_first=True)),
        gitlab.fail(Fault("PUT", r"/merge_requests/\d+/merge$", 502, apply_first=True)),
        gitlab.fail(Fault("PUT", r"/issues/\d+$", 0, apply_first=True, drop=True)),
    ]
    with gitlab_loop(tmp_path, gitlab) as loop:
        loop.finish()
        loop.check_invariants()
    assert [f.hits for f in faults] == [1] * len(faults)


def test_the_loop_on_gitlab_waits_out_a_429_in_the_middle_of_a_merge_request(
    tmp_path: Path, gitlab: FakeGitLab
) -> None:
    """GitLab's rate limit, a 429 with ``Retry-After``, on the commit of a merge request's
    first revision: cpe waits it out and makes the commit and the merge request once."""
    limit = gitlab.fail(
        Fault("POST", r"/repository/commits$", 429, retry_after=1, message="Retry later")
    )
    with gitlab_loop(tmp_path, gitlab) as loop:
        loop.finish()
        loop.check_invariants()
    assert limit.hits == 1
    refused = [i for i, r in enumerate(gitlab.requests) if r.status == 429]
    assert len(refused) == 1, "a request was sent into the wait and refused again"
    after = gitlab.requests[refused[0] + 1 :]
    assert any(r.path.endswith("/repository/commits") and r.status == 201 for r in after)


@pytest.mark.parametrize("crash", selected(gitlab_cases(), CI_CRASHES), ids=str)
def test_a_kill_at_a_gitlab_write_then_a_restart_finishes_the_loop_exactly_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, crash: Crash
) -> None:
    """``kill -9`` of ``cpe run`` at a crashpoint around (or inside) a GitLab write, then a
    restart on the same state: nothing duplicated on GitLab, nothing wedged, nothing left (on
    Premium for the points only it reaches)."""
    tier: Tier = "premium" if crash.point in PREMIUM_POINTS else "free"
    with (
        seeded_gitlab(tmp_path, monkeypatch, tier) as gitlab,
        gitlab_loop(tmp_path, gitlab) as loop,
    ):
        loop.crash_at(crash)
        loop.finish()
        loop.check_invariants()

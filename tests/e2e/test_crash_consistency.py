"""The crash suite: a real ``cpe run`` on the demo's sample, killed at each named crashpoint
(``adapters.support.crashpoints.POINTS``), restarted on the same state, must finish the loop
exactly once: every item done, one revision each, merged once, ``main`` holding each feature once
with its tests passing, no intent left pending, no worktree and no process left.

By default a subset of the cases runs, chosen by the commit (``tests.e2e.crash.selected``);
``make crash-all`` (``CPE_CRASH_ALL=1``) runs every one. The report header says which."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from adapters.support.crashpoints import POINTS, WRITES
from tests.e2e.crash import (
    Crash,
    Loop,
    QueueLoop,
    cases,
    github_cases,
    gitlab_cases,
    gitlab_queue_cases,
    gitlab_tracker_cases,
    queue_cases,
    selected,
    tracker_cases,
)

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def loop(tmp_path: Path) -> Iterator[Loop]:
    running = Loop(tmp_path)
    try:
        yield running
    finally:
        running.close()


@pytest.mark.timeout(900)
@pytest.mark.parametrize("crash", selected(cases()), ids=str)
def test_a_crash_at_the_point_then_a_restart_finishes_the_loop_exactly_once(
    loop: Loop, crash: Crash
) -> None:
    loop.crash_at(crash)
    loop.finish()
    loop.check_invariants()


@pytest.mark.timeout(900)
@pytest.mark.parametrize("crash", selected(queue_cases(), subset=2), ids=str)
def test_a_crash_in_the_merge_queue_then_a_restart_lands_both_items_once_and_green(
    tmp_path: Path, crash: Crash
) -> None:
    loop = QueueLoop(tmp_path)
    try:
        loop.crash_at(crash)
        loop.finish()
        loop.check_invariants()
    finally:
        loop.close()


@pytest.mark.timeout(600)
def test_the_merge_queue_loop_passes_every_queue_crashpoint_as_often_as_its_cases_need(
    tmp_path: Path,
) -> None:
    loop = QueueLoop(tmp_path)
    try:
        loop.finish(trace=True)
        hits = loop.trace.read_text().splitlines()
    finally:
        loop.close()
    for case in queue_cases():
        assert hits.count(case.point) >= case.nth, f"{case} is not reached by the queue's loop"


@pytest.mark.timeout(900)
@pytest.mark.parametrize(
    ("first", "second"),
    [
        (Crash("write.CreateRevision.after"), Crash("write.PostReview.before")),
        (Crash("session.after_terminal", 2), Crash("local.merge.after_ref")),
    ],
    ids=str,
)
def test_two_crashes_in_a_row_at_different_points_then_a_restart_finishes(
    loop: Loop, first: Crash, second: Crash
) -> None:
    loop.crash_at(first)
    loop.crash_at(second)
    loop.finish()
    loop.check_invariants()


@pytest.mark.timeout(900)
def test_a_kill_right_after_an_implementor_run_completed_does_not_wedge_its_item(
    loop: Loop,
) -> None:
    """The create-revision intent is committed, the revision not made: the restart makes it."""
    loop.crash_at(Crash("write.CreateRevision.before"))
    loop.finish()
    loop.check_invariants()


@pytest.mark.timeout(900)
def test_a_kill_right_after_a_review_was_posted_does_not_wedge_its_item(loop: Loop) -> None:
    """The tracker holds the review, the journal neither its result nor a finished intent: the
    restart finds the review instead of posting it again, and the item is merged."""
    loop.crash_at(Crash("write.PostReview.after"))
    loop.finish()
    loop.check_invariants()


@pytest.mark.timeout(600)
def test_a_full_loop_passes_every_registered_crashpoint_as_often_as_the_cases_need(
    loop: Loop,
) -> None:
    """A point no loop reaches would make its case pass without crashing anything."""
    loop.finish(trace=True)
    hits = loop.trace.read_text().splitlines()
    for case in cases():
        assert hits.count(case.point) >= case.nth, f"{case} is not reached by the demo's loop"


def test_every_crashpoint_in_the_code_is_registered_and_every_registered_one_is_placed() -> None:
    sources = "\n".join(
        path.read_text()
        for folder in ("actors", "adapters")
        for path in (ROOT / folder).rglob("*.py")
    )
    placed = set(re.findall(r"crashpoint\(\"([^\"]+)\"\)", sources))
    assert placed <= set(POINTS), f"unregistered: {placed - set(POINTS)}"
    writes = {f"write.{w}.{when}" for w in WRITES for when in ("before", "after")}
    assert 'crashpoint(f"write.{command.type}.before")' in sources
    assert 'crashpoint(f"write.{command.type}.after")' in sources
    assert set(POINTS) == placed | writes, (
        f"registered, never placed: {set(POINTS) - placed - writes}"
    )
    # GitHub's own points are the GitHub loop's cases (tests/e2e/test_github_loop.py), GitLab's
    # the GitLab loop's (tests/e2e/test_gitlab_loop.py), its merge queue's and the GitLab
    # tracker's own crash test's (tests/adapters/providers/gitlab/test_gitlab_crashes.py)
    every = [
        *cases(),
        *github_cases(),
        *gitlab_cases(),
        *gitlab_queue_cases(),
        *gitlab_tracker_cases(),
        *tracker_cases(),
        *queue_cases(),
    ]
    assert {case.point for case in every} == set(POINTS)

"""The whole loop with Linear keeping the work items and GitHub the revisions: a real ``cpe
run`` against the fake Linear and the fake GitHub (``tests/e2e/linear_loop.py``). The planner's
items become Linear issues (the second blocked by the first), the revisions pull requests that
name them, and both issues end in ``Done``; the same loop killed at a Linear write (or at cpe's
comment on a Linear issue) and restarted ends the same, nothing made twice (a case chosen by
the commit; ``make crash-all`` runs all)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.crash import Crash, selected, tracker_cases
from tests.e2e.linear_loop import REAL_PACING, LinearAndGitHubLoop, prepare_linear
from tests.e2e.test_mixed_pairs import github
from tests.fakes.github import FakeGitHub
from tests.fakes.linear.fake import FakeLinear

__all__ = ["github"]  # the fake GitHub holding the sample and two bystander issues

# A loop waits up to 300 s for both items; twice that with a crash, under the per-test limit.
pytestmark = pytest.mark.timeout(900)

CI_CRASHES = 1  # crash cases a default run takes, chosen by the commit


# Points of Linear's the demo's loop never passes: it edits no issue's description or labels
# (the provider's own crash test, tests/adapters/providers/linear/, kills a process there).
NOT_IN_THE_LOOP = ("linear.issue.after_update",)


def linear_cases() -> list[Crash]:
    """The points of a Linear write and of cpe's comment on an item of such a tracker that the
    loop passes."""
    return [
        c
        for c in tracker_cases()
        if c.point.startswith(("linear.", "tracker.")) and c.point not in NOT_IN_THE_LOOP
    ]


@pytest.fixture
def linear() -> Iterator[FakeLinear]:
    with FakeLinear() as fake:
        prepare_linear(fake)
        yield fake


def test_linear_issues_land_as_github_pull_requests(
    tmp_path: Path, github: FakeGitHub, linear: FakeLinear
) -> None:
    """The loop ends with both issues done in Linear and both pull requests merged; and it
    passes every point the crash cases below kill it at. At the provider's own write rates
    (the other loops pace Linear's writes a hundred times faster)."""
    loop = LinearAndGitHubLoop(tmp_path, github, linear, extra=REAL_PACING)
    try:
        loop.finish(trace=True)
        loop.check_invariants()
        hits = loop.trace.read_text().splitlines()
    finally:
        loop.close()
    requests = list(linear.requests)
    writes = [r for r in requests if r.operation == "mutation"]
    points = sum(r.complexity or 0 for r in requests)
    # what the loop cost Linear (the figures docs/benchmarks.md states)
    print(
        f"\nthe loop on Linear: {len(requests)} requests, {len(writes)} mutations, "
        f"{points} complexity points"
    )
    assert len(writes) < 40
    missed = [str(c) for c in linear_cases() if hits.count(c.point) < c.nth]
    assert missed == [], f"crash cases the loop does not reach: {missed}"


@pytest.mark.parametrize("crash", selected(linear_cases(), CI_CRASHES), ids=str)
def test_a_kill_at_a_linear_write_then_a_restart_finishes_the_loop_exactly_once(
    tmp_path: Path, github: FakeGitHub, linear: FakeLinear, crash: Crash
) -> None:
    """``kill -9`` of ``cpe run`` at a crashpoint around a Linear write, then a restart on the
    same state: no issue, relation or comment made twice, nothing wedged, nothing left."""
    loop = LinearAndGitHubLoop(tmp_path, github, linear)
    try:
        loop.crash_at(crash)
        loop.finish()
        loop.check_invariants()
    finally:
        loop.close()


def test_the_loop_on_linear_survives_writes_applied_whose_answers_were_lost(
    tmp_path: Path, github: FakeGitHub, linear: FakeLinear
) -> None:
    """A 502 after Linear applied the write, once for each kind of Linear write the loop makes
    (an issue, a relation, a comment), and a dropped connection after a state change was
    applied: each is found done, nothing is made twice."""
    faults = [
        linear.fail_operation("^issueCreate$", 502, apply_first=True),
        linear.fail_operation("^issueRelationCreate$", 502, apply_first=True),
        linear.fail_operation("^commentCreate$", 502, apply_first=True),
        linear.fail_operation("^issueUpdate$", apply_first=True, drop=True),
    ]
    loop = LinearAndGitHubLoop(tmp_path, github, linear)
    try:
        loop.finish()
        loop.check_invariants()
    finally:
        loop.close()
    assert [f.hits for f in faults] == [1] * len(faults)


def test_the_loop_on_linear_waits_out_ratelimited(
    tmp_path: Path, github: FakeGitHub, linear: FakeLinear
) -> None:
    """Linear's RATELIMITED on the first issue's creation (and on a poll): cpe waits as the
    answer says and makes the issue once."""
    limited = linear.ratelimit_operation("^issueCreate$", seconds=1)
    loop = LinearAndGitHubLoop(tmp_path, github, linear)
    try:
        loop.finish()
        loop.check_invariants()
    finally:
        loop.close()
    assert limited.hits == 1
    creates = [r for r in linear.requests if r.fields == ("issueCreate",)]
    assert [r.status for r in creates] == [400, 200, 200]

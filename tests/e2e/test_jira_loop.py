"""The whole loop with the work items on Jira and the revisions local: a real ``cpe run`` with
``[provider.work_items] kind = "jira"`` against the fake Jira, ``[provider.revisions] kind =
"local"``, the scripted model playing the demo's book (``tests/e2e/jira_loop.py``).

The planner's items become Jira issues (the second blocked by the first), the implementors'
revisions are local revisions named by the issues' keys, reviewed (one round of changes),
merged, and the issues are moved through the workflow to Done, on Jira Cloud and on Data
Center. The loop also runs through Jira's refusals (a write applied whose answer was lost, a
429), and killed at Jira writes then restarted: nothing is made twice."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.crash import Crash, selected
from tests.e2e.jira_loop import JiraLoop, jira_for_the_loop
from tests.fakes.http import Fault
from tests.fakes.jira import FakeJira
from tests.support.git import isolate_git

pytestmark = pytest.mark.timeout(900)

# Kills at Jira's writes the loop reaches: the second issue's create (its blocking link still to
# make), that link, a status transition, cpe's comment on an item (the provider's point inside
# the write, and the engine's after it: ``tracker.comment.after`` is the loops' to cover).
# A default run takes CI_CRASHES of them, chosen by the commit; ``make crash-all`` runs all.
CRASHES = (
    Crash("jira.issue.after_create", 2),
    Crash("jira.issue.after_link"),
    Crash("jira.issue.after_transition"),
    Crash("jira.issue.after_comment"),
    Crash("tracker.comment.after"),
)
CI_CRASHES = 2


@contextlib.contextmanager
def jira_loop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, **options: Any
) -> Iterator[tuple[FakeJira, JiraLoop]]:
    isolate_git(monkeypatch)
    with jira_for_the_loop(**options) as jira:
        loop = JiraLoop(tmp_path, jira)
        try:
            yield jira, loop
        finally:
            loop.close()


def test_the_whole_loop_runs_on_jira_cloud(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """On Jira Cloud; and it passes every crashpoint the crash cases below need."""
    with jira_loop(tmp_path, monkeypatch) as (jira, loop):
        loop.finish(trace=True)
        loop.check_invariants()
        writes = [r for r in jira.requests if r.write]
        hits = loop.trace.read_text().splitlines()
    print(f"\nthe loop on Jira Cloud: {len(jira.requests)} requests, {len(writes)} writes")
    assert all(r.scheme == "basic" for r in jira.requests)
    missed = [str(c) for c in CRASHES if hits.count(c.point) < c.nth]
    assert missed == [], f"crash cases the loop does not reach: {missed}"


def test_the_whole_loop_runs_on_jira_data_center(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with jira_loop(tmp_path, monkeypatch, deployment="data_center") as (jira, loop):
        loop.finish()
        loop.check_invariants()
        descriptions = [jira.issue(key)["description"] for key in jira.issue_keys()]
    assert all(r.scheme == "bearer" for r in jira.requests)
    assert all(d is None or isinstance(d, str) for d in descriptions)  # wiki markup, not ADF


def test_the_loop_on_jira_survives_writes_applied_whose_answers_were_lost(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A 502 after Jira applied the write, for an issue's create, a transition and a comment,
    and 429s (Jira's rate limit) on a search, a transition and the second issue's blocking link
    (waited out for longer than a poll: the issue is listed without its blocker meanwhile): each
    write is found done or waited out, nothing made twice, and the blocked item does not run
    before its blocker is done."""
    with jira_loop(tmp_path, monkeypatch) as (jira, loop):
        faults = [
            jira.fail(Fault("POST", r"/issue$", 502, apply_first=True)),
            jira.fail(Fault("POST", r"/transitions$", 502, apply_first=True)),
            jira.fail(Fault("POST", r"/comment$", 502, apply_first=True)),
            jira.fail(Fault("POST", r"/search/jql$", 429, retry_after=1)),
            jira.fail(Fault("POST", r"/transitions$", 429, retry_after=1)),
            # Longer than a poll: the engine lists the new issue without its blocker meanwhile.
            jira.fail(Fault("POST", r"/issueLink$", 429, retry_after=3)),
        ]
        loop.finish()
        loop.check_invariants()
    assert [f.hits for f in faults] == [1] * len(faults)


@pytest.mark.parametrize("crash", selected(CRASHES, CI_CRASHES), ids=str)
def test_a_kill_at_a_jira_write_then_a_restart_finishes_the_loop_exactly_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, crash: Crash
) -> None:
    """``kill -9`` of ``cpe run`` just after a Jira write took effect, then a restart on the
    same state: no issue, link, transition or comment twice, nothing wedged, nothing left."""
    with jira_loop(tmp_path, monkeypatch) as (_, loop):
        loop.crash_at(crash)
        loop.finish()
        loop.check_invariants()

"""cpe killed (SIGKILL, as ``kill -9``) at each crashpoint of the Jira provider's writes, then
the same work done again by a new process: everything is made exactly once, found again by its
key (issues, comments), by reading what is there (links) or by comparing (a status, a body).

The killed process is a real one (``CPE_CRASH_AT``); the second run is this test's own provider
on the same fake Jira."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from adapters.providers.jira import JiraProvider
from adapters.support.crashpoints import POINTS
from domain.models import WorkItemId
from tests.e2e.crash import tracker_cases
from tests.fakes.jira import BOT, FakeJira
from tests.support.jira_provider import TOKEN_ENV, jira_provider

ROOT = Path(__file__).resolve().parents[4]

WORK = textwrap.dedent(
    """
    def work(provider):
        writer = provider.work_item_writer
        first = writer.create_work_item("First", "b", idempotency_key="plan:7:first")
        second = writer.create_work_item(
            "Second", "b", ("feature",), (first,), idempotency_key="plan:7:second"
        )
        writer.update_work_item(second, body="Edited")
        writer.transition_status(second, "in-progress")
        writer.comment(second, "Opened a revision.", idempotency_key="say:second:opened")
        return first, second
    """
)
RUN = WORK + textwrap.dedent(
    """
    import sys
    from adapters.providers.jira import JiraProvider, JiraSettings
    base_url, deployment, email, token_env = sys.argv[1:5]
    settings = JiraSettings(
        base_url=base_url, deployment=deployment, project="PROJ", email=email or None,
        token_env=token_env,
    )
    with JiraProvider(settings) as provider:
        work(provider)
    """
)

KILLED_AT = [
    "jira.issue.after_create:1",
    "jira.issue.after_create:2",
    "jira.issue.after_link",
    "jira.issue.after_update",
    "jira.issue.after_transition",
    "jira.issue.after_comment",
]


def work(provider: JiraProvider) -> tuple[WorkItemId, WorkItemId]:
    scope: dict[str, object] = {}
    exec(WORK, scope)  # the very steps the killed process ran
    return scope["work"](provider)  # type: ignore[operator,no-any-return]


def test_every_jira_point_is_killed_here() -> None:
    # The crash suite leaves the trackers' own points to their tests (tests/e2e/crash.py).
    ours = {c.point for c in tracker_cases() if c.point.startswith("jira.")}
    assert ours == {p for p in POINTS if p.startswith("jira.")}
    assert ours == {point.partition(":")[0] for point in KILLED_AT}


@pytest.mark.parametrize("point", KILLED_AT)
def test_work_killed_at_a_crashpoint_is_finished_once_by_the_next_process(
    jira: FakeJira, point: str
) -> None:
    env = {**os.environ, TOKEN_ENV: "test-token", "CPE_CRASH_AT": point, "PYTHONPATH": str(ROOT)}
    env.pop("CPE_CRASH_TRACE", None)
    email = jira.email(BOT) if jira.deployment == "cloud" else ""
    died = subprocess.run(
        [sys.executable, "-c", RUN, jira.base_url, jira.deployment, email, TOKEN_ENV],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert died.returncode == -9, died.stderr
    assert f"crashpoint {point.partition(':')[0]}" in died.stderr
    with jira_provider(jira) as provider:
        first, second = work(provider)
        jira.clear_requests()
        assert work(provider) == (first, second)  # once more: nothing left to write
        assert [r.path for r in jira.requests if r.write] == []
    made_keys = jira.issue_keys()
    assert sorted(jira.issue(k)["summary"] for k in made_keys) == ["First", "Second"]
    made = jira.issue(second)
    assert made["blocked_by"] == [first]
    assert made["labels"] == ["feature"]
    assert made["status"] == "In Progress"
    assert made["text"].startswith("Edited")
    assert [c["text"].splitlines()[0] for c in made["comments"]] == ["Opened a revision."]

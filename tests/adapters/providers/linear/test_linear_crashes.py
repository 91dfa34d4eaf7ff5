"""cpe killed (SIGKILL, as ``kill -9``) at each crashpoint of the Linear tracker's writes, then
the same work done again by a new process: everything is made exactly once, found again by the
id derived from its key (issues, relations, comments) or by reading what is there (labels,
states).

The killed process is a real one (``CPE_CRASH_AT``); the second run is this test's own provider
on the same fake Linear."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from adapters.providers.linear import LinearProvider
from adapters.support.crashpoints import POINTS
from domain.models import WorkItemId
from tests.fakes.linear.fake import API_KEY, FakeLinear
from tests.support.linear import TOKEN_ENV
from tests.support.linear_provider import linear_provider, with_cpe_states

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
        writer.comment(second, "Started", idempotency_key="said:started")
        return first, second
    """
)
RUN = WORK + textwrap.dedent(
    """
    import sys
    from adapters.providers.linear import LinearProvider, LinearSettings
    settings = LinearSettings(team="ENG", api_url=sys.argv[1], token_env=sys.argv[2])
    with LinearProvider(settings) as provider:
        work(provider)
    """
)

KILLED_AT = [
    "linear.label.after_create",  # the admit label, at start
    "linear.label.after_create:2",  # "feature", for the second item
    "linear.issue.after_create:1",
    "linear.issue.after_create:2",
    "linear.issue.after_link",
    "linear.issue.after_update",
    "linear.issue.after_transition",
    "linear.issue.after_comment",
]


def work(provider: LinearProvider) -> tuple[WorkItemId, WorkItemId]:
    scope: dict[str, object] = {}
    exec(WORK, scope)  # the very steps the killed process ran
    return scope["work"](provider)  # type: ignore[operator,no-any-return]


def test_every_linear_point_is_killed_here() -> None:
    # The crash suite leaves the linear. points to this test (tests/e2e/crash.py).
    linear = {p for p in POINTS if p.startswith("linear.")}
    assert linear == {point.partition(":")[0] for point in KILLED_AT}


@pytest.mark.parametrize("point", KILLED_AT)
def test_work_killed_at_a_crashpoint_is_finished_once_by_the_next_process(
    fake_linear: FakeLinear, point: str
) -> None:
    linear = with_cpe_states(fake_linear)
    env = {**os.environ, TOKEN_ENV: API_KEY, "CPE_CRASH_AT": point, "PYTHONPATH": str(ROOT)}
    env.pop("CPE_CRASH_TRACE", None)
    died = subprocess.run(
        [sys.executable, "-c", RUN, linear.url, TOKEN_ENV],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert died.returncode == -9, died.stderr
    assert f"crashpoint {point.partition(':')[0]}" in died.stderr
    with linear_provider(linear) as provider:
        first, second = work(provider)
        linear.clear_requests()
        assert work(provider) == (first, second)  # once more: nothing left to write
        writes = [r for r in linear.requests if r.operation == "mutation"]
        assert writes == []
    assert sorted(linear.issue(i)["title"] for i in linear.identifiers()) == ["First", "Second"]
    made = linear.issue(second)
    assert made["blocked_by"] == [first]
    assert made["labels"] == ["feature"]
    assert made["state"] == "In Progress"
    assert made["description"] == "Edited"
    assert linear.comments(second) == [("cpe@example.com", "Started")]

"""cpe killed (SIGKILL, as ``kill -9``) at each crashpoint of the GitLab tracker's writes, then
the same work done again by a new process: everything is made exactly once, found again by its
key (issues), by reading what is there (labels, links) or by comparing (a status).

The killed process is a real one (``CPE_CRASH_AT``); the second run is this test's own provider
on the same fake GitLab (Premium: blocking links are made too)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from adapters.providers import ProviderRoles
from adapters.providers.gitlab import GitLabProvider
from domain.models import WorkItemId
from tests.e2e.crash import GITLAB_TRACKER_POINTS
from tests.fakes.gitlab import FakeGitLab
from tests.support.gitlab import TOKEN_ENV, running_gitlab
from tests.support.gitlab_provider import gitlab_provider

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
        return first, second
    """
)
RUN = WORK + textwrap.dedent(
    """
    import sys
    from adapters.providers import ProviderRoles
    from adapters.providers.gitlab import GitLabProvider, GitLabSettings
    settings = GitLabSettings(project=sys.argv[1], base_url=sys.argv[2], token_env=sys.argv[3])
    with GitLabProvider(settings, roles=ProviderRoles(revisions=False)) as provider:
        work(provider)
    """
)


def work(provider: GitLabProvider) -> tuple[WorkItemId, WorkItemId]:
    scope: dict[str, object] = {}
    exec(WORK, scope)  # the very steps the killed process ran
    return scope["work"](provider)  # type: ignore[operator,no-any-return]


@pytest.fixture
def premium(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeGitLab]:
    with running_gitlab(tmp_path, monkeypatch, tier="premium") as fake:
        yield fake


KILLED_AT = [
    "gitlab.label.after_create:3",
    "gitlab.issue.after_create:1",
    "gitlab.issue.after_create:2",
    "gitlab.issue.after_link",
    "gitlab.issue.after_update",
    "gitlab.issue.after_transition",
]


def test_the_points_no_loop_reaches_are_killed_here() -> None:
    # The crash suite leaves these to this test (tests/e2e/crash.py).
    assert set(GITLAB_TRACKER_POINTS) <= {point.partition(":")[0] for point in KILLED_AT}


@pytest.mark.parametrize("point", KILLED_AT)
def test_work_killed_at_a_crashpoint_is_finished_once_by_the_next_process(
    premium: FakeGitLab, point: str
) -> None:
    env = {**os.environ, TOKEN_ENV: "test-token", "CPE_CRASH_AT": point, "PYTHONPATH": str(ROOT)}
    env.pop("CPE_CRASH_TRACE", None)
    died = subprocess.run(
        [sys.executable, "-c", RUN, premium.project_path, premium.base_url, TOKEN_ENV],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert died.returncode == -9, died.stderr
    assert f"crashpoint {point.partition(':')[0]}" in died.stderr
    with gitlab_provider(premium, roles=ProviderRoles(revisions=False)) as provider:
        first, second = work(provider)
        premium.clear_requests()
        assert work(provider) == (first, second)  # once more: nothing left to write
        assert [r.method for r in premium.requests if r.method != "GET"] == []
    assert sorted(i.title for i in premium.issues.values()) == ["First", "Second"]
    assert [(k.source, k.target, k.link_type) for k in premium.links] == [
        (int(first), int(second), "blocks")
    ]
    made = premium.issues[int(second)]
    assert sorted(made.labels) == ["feature", "status::in-progress"]
    assert (made.description or "").startswith("Edited\n\n<!-- cpe:generated -->")
    assert {f"status::{s}" for s in ("pending", "blocked")} <= set(premium.labels)

"""cpe killed (SIGKILL, as ``kill -9``) at each crashpoint inside the GitLab forge's writes, then
the same work done again by a new process: the commit, the merge request, the review and the
rebase are each made exactly once, found again by their keys and markers or by reading what is
there.

The killed process is a real one (``CPE_CRASH_AT``); the second run is this test's own provider
on the same fake GitLab. The work: a revision built on the run's fork point (behind the default
branch), brought up to date by GitLab's rebase, then reviewed."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from adapters.providers.gitlab import GitLabProvider
from tests.adapters.providers.edits import EDITS
from tests.fakes.gitlab import FakeGitLab
from tests.support.git import make_patch
from tests.support.gitlab import TOKEN_ENV
from tests.support.gitlab_provider import gitlab_provider

ROOT = Path(__file__).resolve().parents[4]

WORK = textwrap.dedent(
    """
    from domain.results import AgentReview, AgentReviewComment

    def work(provider, patch, fork):
        items, writer = provider.work_item_writer, provider.revision_writer
        item = items.create_work_item("Answer", "Make it 42.", idempotency_key="plan:1:a")
        revision = writer.create_from_patch(
            item, "cpe/1-answer", "Answer", "", patch,
            idempotency_key="create-revision:s1", base_sha=fork,
        )
        update = writer.update_branch(revision.id, idempotency_key="update-branch:s2")
        review = AgentReview(
            verdict="needs-changes",
            summary="Return the right answer.",
            comments=(AgentReviewComment(path="src/app.py", line=2, body="Off by one."),),
        )
        head = update.revision.head_sha
        writer.post_review(revision.id, head, review, idempotency_key="post-review:s3")
        return revision.id, head, update.base_sha
    """
)
RUN = WORK + textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from adapters.providers.gitlab import GitLabProvider, GitLabSettings
    settings = GitLabSettings(project=sys.argv[1], base_url=sys.argv[2], token_env=sys.argv[3])
    with GitLabProvider(settings) as provider:
        work(provider, Path(sys.argv[4]).read_text(), sys.argv[5])
    """
)


def work(provider: GitLabProvider, patch: str, fork: str) -> tuple[str, str, str]:
    scope: dict[str, object] = {}
    exec(WORK, scope)  # the very steps the killed process ran
    return scope["work"](provider, patch, fork)  # type: ignore[operator,no-any-return]


@pytest.mark.parametrize(
    "point",
    [
        "gitlab.revision.after_commit",
        "gitlab.revision.after_mr",
        "gitlab.update.after_rebase",
        "gitlab.review.after_discussions",
    ],
)
def test_work_killed_at_a_forge_crashpoint_is_finished_once_by_the_next_process(
    fake_gitlab: FakeGitLab, tmp_path: Path, point: str
) -> None:
    fork = fake_gitlab.default_head()
    patch = make_patch(fake_gitlab.git.path, tmp_path / "patch", EDITS["modified"])
    patch_file = tmp_path / "cpe.patch"
    patch_file.write_text(patch)
    moved = fake_gitlab.commit_to_default({"docs/elsewhere.md": "elsewhere\n"}, "elsewhere")
    env = {**os.environ, TOKEN_ENV: "test-token", "CPE_CRASH_AT": point, "PYTHONPATH": str(ROOT)}
    env.pop("CPE_CRASH_TRACE", None)
    args = [fake_gitlab.project_path, fake_gitlab.base_url, TOKEN_ENV, str(patch_file), fork]
    died = subprocess.run(
        [sys.executable, "-c", RUN, *args],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert died.returncode == -9, died.stderr
    assert f"crashpoint {point}" in died.stderr
    with gitlab_provider(fake_gitlab) as provider:
        iid, head, base = work(provider, patch, fork)
        fake_gitlab.clear_requests()
        assert work(provider, patch, fork) == (iid, head, base)  # once more: nothing to write
        assert [r.route for r in fake_gitlab.requests if r.write] == []
    assert base == moved
    [mr] = fake_gitlab.merge_requests.values()
    assert (str(mr.iid), mr.source_branch, mr.head_sha) == (iid, "cpe/1-answer", head)
    assert fake_gitlab.git.line("rev-list", "--count", f"{moved}..{head}") == "1"
    assert fake_gitlab.git.line("rev-parse", f"{head}^") == moved
    notes = [n for n in fake_gitlab.notes if n.noteable == "MergeRequest" and not n.system]
    assert sorted((n.author, n.position is not None) for n in notes) == [
        ("cpe-bot", False),
        ("cpe-bot", True),
    ]

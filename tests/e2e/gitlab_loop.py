"""The whole loop on GitLab, as the end-to-end tests and the request benchmark run it: the fake
GitLab holding the demo's sample repository, a clone of it configured with ``[provider] kind =
"gitlab"``, the scripted model playing the demo's book, a runner reporting commit statuses, and
``cpe run`` on the clone (killed at a crashpoint and restarted, as the crash suite does it, when
a test asks).

On GitLab Free, blockers are "Blocked by #N" lines only (blocking links are Premium) and status
labels plain labels the provider swaps itself; on Premium an issue link says it too, and a
scoped label displaces its scope's other one. cpe cannot approve the merge requests it opened
(GitLab's default forbids authors to): its review says so. The local repository is a
clone of the fake's, never pulled by hand: cpe fetches it itself."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import MappingProxyType

from adapters.demo.sample import create_sample_repo
from tests.e2e.forge_loop import LOOP_SETTINGS, CommitCI, Counts, ForgeLoop, tracked_files
from tests.fakes.gitlab import FakeGitLab
from tests.support.git import git

TOKEN_ENV = "CPE_E2E_GITLAB_TOKEN"
TOKEN = "e2e-gitlab-token"
USERNAME = "cpe-bot"  # who the token acts as (a Maintainer of the project)
JOB = "unittest"  # the runner's job: one commit status per head
# Write pacing a hundred times the provider's defaults: a loop's writes are not spread over
# token-bucket waits. One test keeps the defaults (REAL_PACING), so that pacing runs for real.
FAST_PACING = "writes_per_minute = 3000\nwrites_per_hour = 60000\nwrite_burst = 100"
REAL_PACING = ""
BRANCHES = ("cpe/1-greet-a-person-by-name", "cpe/2-greet-several-people-at-once")

CONFIG = (
    """
[engine]
shutdown_timeout = 30
[provider]
kind = "gitlab"
[provider.gitlab]
project = "{project}"
base_url = "{base_url}"
token_env = "{token_env}"
request_timeout = 30
{extra}
"""
    + LOOP_SETTINGS
)


def clone_for_cpe(gitlab: FakeGitLab, base: Path, *, extra: str = FAST_PACING) -> Path:
    """A clone of the fake's repository at ``base / "repo"`` with a ``supervisor.toml`` for
    ``cpe run`` on it (``CONFIG``; ``extra``: more lines of ``[provider.gitlab]``)."""
    repo = base / "repo"
    git(base, "clone", "--quiet", str(gitlab.git.path), str(repo))
    config = CONFIG.format(
        project=gitlab.project_path, base_url=gitlab.base_url, token_env=TOKEN_ENV, extra=extra
    )
    (repo / "supervisor.toml").write_text(config)
    return repo


def seed_with_the_sample(gitlab: FakeGitLab, scratch: Path) -> None:
    """The fake's repository gets the demo's sample as its content."""
    sample = create_sample_repo(scratch / "sample")
    gitlab.seed(tracked_files(sample), "the sample")


class FakeRunner(CommitCI):
    """Plays a GitLab runner: each open merge request's head gets the job ``unittest``,
    reported ``running`` when it starts and ``success`` or ``failed`` when the sample's tests
    ran on a checkout of exactly that commit (commit statuses, as an external CI reports
    them: the head's pipeline)."""

    def __init__(
        self,
        gitlab: FakeGitLab,
        command: Sequence[str] | None = None,
        *,
        start_when: Callable[[], bool] = lambda: True,
    ) -> None:
        super().__init__(gitlab.git.path, command, start_when=start_when)
        self.gitlab = gitlab

    def heads(self) -> list[str]:
        with self.gitlab.lock:
            return [m.head_sha for m in self.gitlab.merge_requests.values() if m.state == "opened"]

    def starting(self, sha: str) -> None:
        self.gitlab.report_status(sha, JOB, "running")

    def report(self, sha: str, conclusion: str) -> None:
        self.gitlab.report_status(sha, JOB, "success" if conclusion == "success" else "failed")


class GitLabLoop(ForgeLoop):
    """The crash suite's loop with GitLab as the provider (``extra``: more lines of
    ``[provider.gitlab]``, ``env`` the token's variable). ``meanwhile`` is called while it
    waits for the loop to end."""

    def __init__(
        self,
        base: Path,
        gitlab: FakeGitLab,
        *,
        extra: str = FAST_PACING,
        env: Mapping[str, str] = MappingProxyType({TOKEN_ENV: TOKEN}),
        username: str = USERNAME,
    ) -> None:
        repo = clone_for_cpe(gitlab, base, extra=extra)
        super().__init__(base, repo, env, gitlab.git.path, FakeRunner(gitlab))
        self.gitlab = gitlab
        self.username = username

    def done(self) -> bool:
        self.meanwhile()
        with self.gitlab.lock:
            issues = list(self.gitlab.issues.values())
            mrs = list(self.gitlab.merge_requests.values())
        return (
            len(issues) == 2
            and all(i.state == "closed" for i in issues)
            and len(mrs) == 2
            and all(m.state == "merged" for m in mrs)
        )

    def state(self) -> str:
        with self.gitlab.lock:
            issues = list(self.gitlab.issues.values())
            mrs = list(self.gitlab.merge_requests.values())
        shown = ", ".join(f"#{i.iid} {i.state} {i.labels}" for i in issues)
        listed = ", ".join(f"!{m.iid} {m.state} {self.gitlab.mergeability(m)}" for m in mrs)
        return f"issues: {shown or 'none'}; merge requests: {listed or 'none'}"

    def counts(self) -> Counts:
        return Counts.of(self.gitlab.requests)

    def check_invariants(self) -> None:
        """What GitLab must hold after the loop, however often cpe died on the way: two issues,
        the second blocked by the first ("Blocked by #1", and on Premium a blocking link), both
        closed; one merge request each from its item's branch, each merged once by cpe;
        the reviews of the demo's book as notes; a commit status on every head the runner saw,
        all green; the default branch with both features and its tests passing; and nothing
        left behind locally."""
        gitlab = self.gitlab
        assert '"logger": "urllib3' not in self.log_path.read_text(), "a line per HTTP request"
        with gitlab.lock:
            issues = dict(gitlab.issues)
            mrs = list(gitlab.merge_requests.values())
            notes = list(gitlab.notes)
        assert sorted(issues) == [1, 2], self.state()
        assert "Blocked by #1" in (issues[2].description or ""), issues[2].description
        assert "Blocked by #" not in (issues[1].description or "")
        assert all(i.state == "closed" for i in issues.values()), self.state()
        links = [(k.source, k.link_type, k.target) for k in gitlab.links]
        assert links == ([(1, "blocks", 2)] if gitlab.premium else []), links
        by_branch = {m.source_branch: m for m in mrs}
        assert sorted(by_branch) == list(BRANCHES), self.state()
        assert all(m.state == "merged" and m.merged_by == self.username for m in mrs)
        # changes asked once on the first (the same merge request then updated: two heads
        # checked), then approved; the second approved at once
        verdicts = {
            branch: [
                n.body.split("**Verdict: ")[1].split("**")[0]
                for n in notes
                if n.noteable == "MergeRequest" and n.iid == mr.iid and "**Verdict: " in n.body
            ]
            for branch, mr in by_branch.items()
        }
        assert verdicts == {BRANCHES[0]: ["needs-changes", "approve"], BRANCHES[1]: ["approve"]}
        assert len(self.ci.checked) == 3, f"heads checked: {self.ci.checked}"
        assert set(self.ci.checked.values()) == {"success"}
        self.check_the_default_branch(gitlab.default_head())
        self.check_nothing_left()

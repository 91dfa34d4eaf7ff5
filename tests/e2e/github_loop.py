"""The whole loop on GitHub, as the end-to-end tests and the request benchmark run it: the fake
GitHub holding the demo's sample repository, a clone of it configured with ``[provider] kind =
"github"``, the scripted model playing the demo's book, a fake CI, and ``cpe run`` on the clone
(killed at a crashpoint and restarted, as the crash suite does it, when a test asks).

The local repository is a clone of the fake's, never pulled by hand: cpe fetches it itself."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import MappingProxyType

from adapters.demo.sample import create_sample_repo
from tests.e2e.forge_loop import LOOP_SETTINGS, CommitCI, Counts, ForgeLoop, tracked_files
from tests.fakes.github import FakeGitHub
from tests.support.git import git

TOKEN_ENV = "CPE_E2E_GITHUB_TOKEN"
TOKEN = "e2e-token"
LOGIN = "cpe-bot"  # who the token acts as
CHECK = "unittest"
# Write pacing a hundred times GitHub's rates: a loop's ~40 writes are not spread over 25 s of
# token-bucket waits. One test keeps the real rates (REAL_PACING), so that pacing runs for real.
FAST_PACING = "writes_per_minute = 6000\nwrites_per_hour = 42000\nwrite_burst = 100"
REAL_PACING = ""

CONFIG = (
    """
[engine]
shutdown_timeout = 30
[provider]
kind = "github"
[provider.github]
repository = "{repository}"
base_url = "{base_url}/"
request_timeout = 30
{auth}
"""
    + LOOP_SETTINGS
)


def clone_for_cpe(
    github: FakeGitHub,
    base: Path,
    *,
    auth: str = f'token_env = "{TOKEN_ENV}"',
    pacing: str = FAST_PACING,
    auto_merge: bool = True,
) -> Path:
    """A clone of the fake's repository at ``base / "repo"`` with a ``supervisor.toml`` for
    ``cpe run`` on it (``CONFIG``): the repository cpe works in."""
    repo = base / "repo"
    git(base, "clone", "--quiet", str(github.git.path), str(repo))
    config = CONFIG.format(
        repository=f"{github.owner}/{github.repo}",
        base_url=github.base_url,
        auth=f"{auth}\n{pacing}",
    )
    if not auto_merge:
        config = config.replace("auto_merge = true", "auto_merge = false")
    (repo / "supervisor.toml").write_text(config)
    return repo


def seed_with_the_sample(github: FakeGitHub, scratch: Path) -> None:
    """The fake's repository gets the demo's sample as its content."""
    sample = create_sample_repo(scratch / "sample")
    github.seed(tracked_files(sample), "the sample")


class FakeCI(CommitCI):
    """Plays GitHub Actions: each open pull request's head gets one check run, the sample's
    tests run on a checkout of exactly that commit."""

    def __init__(
        self,
        github: FakeGitHub,
        command: Sequence[str] | None = None,
        *,
        start_when: Callable[[], bool] = lambda: True,
    ) -> None:
        super().__init__(github.git.path, command, start_when=start_when)
        self.github = github

    def heads(self) -> list[str]:
        with self.github.lock:
            return [
                p.head_sha
                for p in self.github.pulls.values()
                if self.github.issues[p.number].state == "open"
            ]

    def report(self, sha: str, conclusion: str) -> None:
        self.github.add_check_run(sha, CHECK, conclusion=conclusion)


class GitHubLoop(ForgeLoop):
    """The crash suite's loop with GitHub as the provider (``auth``: the credential's lines of
    ``[provider.github]``, ``env`` its variables, ``login`` who it acts as). ``meanwhile`` is
    called while it waits for the loop to end."""

    def __init__(
        self,
        base: Path,
        github: FakeGitHub,
        *,
        auth: str = f'token_env = "{TOKEN_ENV}"',
        env: Mapping[str, str] = MappingProxyType({TOKEN_ENV: TOKEN}),
        login: str = LOGIN,
        pacing: str = FAST_PACING,
    ) -> None:
        repo = clone_for_cpe(github, base, auth=auth, pacing=pacing)
        super().__init__(base, repo, env, github.git.path, FakeCI(github))
        self.github = github
        self.login = login

    def done(self) -> bool:
        self.meanwhile()
        with self.github.lock:
            issues = [i for i in self.github.issues.values() if not i.is_pull]
            pulls = list(self.github.pulls.values())
        return (
            len(issues) == 2
            and all(i.state == "closed" for i in issues)
            and len(pulls) == 2
            and all(p.merged for p in pulls)
        )

    def state(self) -> str:
        with self.github.lock:
            issues = [i for i in self.github.issues.values() if not i.is_pull]
            pulls = list(self.github.pulls.values())
        shown = ", ".join(f"#{i.number} {i.state} {i.labels}" for i in issues)
        prs = ", ".join(f"#{p.number} {'merged' if p.merged else 'open'}" for p in pulls)
        return f"issues: {shown or 'none'}; pull requests: {prs or 'none'}"

    def counts(self) -> Counts:
        return Counts.of(self.github.requests)

    def check_invariants(self) -> None:
        """What GitHub must hold after the loop, however often cpe died on the way: two issues,
        the second blocked by the first, both closed as completed; one pull request each, each
        merged once; the reviews of the demo's book; the default branch with both features and
        its tests passing; and nothing left behind locally."""
        github = self.github
        assert '"logger": "httpx"' not in self.log_path.read_text(), "a line per HTTP request"
        with github.lock:
            issues = [i for i in github.issues.values() if not i.is_pull]
            pulls = list(github.pulls.values())
            reviews = list(github.reviews)
        assert sorted(i.number for i in issues) == [1, 2], self.state()
        assert {i.number: i.blocked_by for i in issues} == {1: [], 2: [1]}
        assert {i.state_reason for i in issues} == {"completed"}
        by_branch = {p.head_ref: p for p in pulls}
        assert sorted(by_branch) == [
            "cpe/1-greet-a-person-by-name",
            "cpe/2-greet-several-people-at-once",
        ], self.state()
        assert all(p.merged and p.merged_by == self.login for p in pulls)
        # changes asked once on the first (the same pull request then updated: two heads
        # checked), then approved; the second approved at once
        first, second = (by_branch[b].number for b in sorted(by_branch))
        verdicts = {
            n: [r.body.split("**Verdict: ")[1].split("**")[0] for r in reviews if r.pull == n]
            for n in (first, second)
        }
        assert verdicts == {first: ["needs-changes", "approve"], second: ["approve"]}
        heads = {r.pull: [] for r in reviews}
        for r in reviews:
            heads[r.pull].append(r.commit_id)
        assert len(self.ci.checked) == 3, f"heads checked: {self.ci.checked}; reviewed: {heads}"
        assert set(self.ci.checked.values()) == {"success"}
        self._check_the_default_branch()
        self.check_nothing_left()

    def _check_the_default_branch(self) -> None:
        """The default branch as the loop must leave it (``ForgeLoop.check_the_default_branch``
        at GitHub's head; the mixed pairs' loops call it by this name)."""
        self.check_the_default_branch(self.github.default_head())

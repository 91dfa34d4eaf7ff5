"""The whole loop on GitHub, as the end-to-end tests and the request benchmark run it: the fake
GitHub holding the demo's sample repository, a clone of it configured with ``[provider] kind =
"github"``, the scripted model playing the demo's book, a fake CI, and ``cpe run`` on the clone
(killed at a crashpoint and restarted, as the crash suite does it, when a test asks).

The local repository is a clone of the fake's, never pulled by hand: cpe fetches it itself."""

from __future__ import annotations

import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType

from actors.journal import Journal
from adapters.cli.demo import FEATURES
from adapters.demo.sample import PIPELINE_COMMAND, create_sample_repo
from tests.e2e.crash import Loop
from tests.fakes.github import FakeGitHub
from tests.fakes.github.records import RecordedRequest
from tests.support.git import git

TOKEN_ENV = "CPE_E2E_GITHUB_TOKEN"
TOKEN = "e2e-token"
LOGIN = "cpe-bot"  # who the token acts as
CHECK = "unittest"
WRITES = ("POST", "PATCH", "PUT", "DELETE")
# Write pacing a hundred times GitHub's rates: a loop's ~40 writes are not spread over 25 s of
# token-bucket waits. One test keeps the real rates (REAL_PACING), so that pacing runs for real.
FAST_PACING = "writes_per_minute = 6000\nwrites_per_hour = 42000\nwrite_burst = 100"
REAL_PACING = ""

CONFIG = """
[engine]
shutdown_timeout = 30
[provider]
kind = "github"
[provider.github]
repository = "{repository}"
base_url = "{base_url}/"
request_timeout = 30
{auth}
[workflow]
auto_merge = true
retry_backoff_initial = 0.2
retry_backoff_max = 1
[pollers]
work_items_interval = 0.5
revisions_interval = 0.5
specs_interval = 0.5
[runtime]
max_agent_duration = 120
[dashboard]
listen = "127.0.0.1:0"
"""


def tracked_files(repo: Path) -> dict[str, bytes]:
    names = git(repo, "ls-files", "-z").split("\0")
    return {name: (repo / name).read_bytes() for name in names if name}


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


class FakeCI:
    """Plays GitHub Actions: each open pull request's head gets one check run, the sample's
    tests run on a checkout of exactly that commit."""

    def __init__(
        self,
        github: FakeGitHub,
        command: Sequence[str] | None = None,
        *,
        start_when: Callable[[], bool] = lambda: True,
    ) -> None:
        self.github = github
        # CI reports nothing until this holds (a test that needs runs to overlap holds landings).
        self.start_when = start_when
        # What the CI runs in a checkout of the head: the sample's tests by default.
        self.command = list(command or [sys.executable, *PIPELINE_COMMAND[1:]])
        self.checked: dict[str, str] = {}  # head sha -> conclusion
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="fake-ci", daemon=True)

    def __enter__(self) -> FakeCI:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(60)

    def _run(self) -> None:
        while not self._stop.wait(0.2):
            if not self.start_when():
                continue
            with self.github.lock:
                heads = [
                    p.head_sha
                    for p in self.github.pulls.values()
                    if self.github.issues[p.number].state == "open"
                ]
            for sha in heads:
                if sha not in self.checked:
                    self.checked[sha] = self._test(sha)
                    self.github.add_check_run(sha, CHECK, conclusion=self.checked[sha])

    def _test(self, sha: str) -> str:
        with tempfile.TemporaryDirectory(prefix="fake-ci-") as scratch:
            tree = Path(scratch)
            archive = subprocess.run(
                ["git", "-C", str(self.github.git.path), "archive", sha],
                capture_output=True,
                check=True,
                timeout=60,
            ).stdout
            subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True, timeout=60)
            done = subprocess.run(
                self.command, cwd=tree, capture_output=True, timeout=120, check=False
            )
        return "success" if done.returncode == 0 else "failure"


@dataclass(frozen=True)
class Counts:
    """What a loop cost GitHub: every request, those counted against the rate limit (all but
    304s), and the content-creating writes."""

    requests: int
    counted: int
    writes: int

    @classmethod
    def of(cls, requests: list[RecordedRequest]) -> Counts:
        return cls(
            len(requests),
            sum(1 for r in requests if r.counted),
            sum(1 for r in requests if r.method in WRITES),
        )


class GitHubLoop(Loop):
    """The crash suite's loop with GitHub as the provider (``auth``: the credential's lines of
    ``[provider.github]``, ``env`` its variables, ``login`` who it acts as). ``meanwhile`` is
    called while it waits for the loop to end."""

    finish_timeout = 300.0  # about 45 s on an idle machine, several times that on a loaded one

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
        super().__init__(base, repo, env)
        self.github = github
        self.login = login
        self.ci = FakeCI(github).__enter__()
        self.meanwhile: Callable[[], object] = lambda: None

    def close(self) -> None:
        try:
            super().close()
        finally:
            self.ci.__exit__(None, None, None)

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
        journal = Journal(self.repo / ".cpe" / "journal.sqlite3")
        try:
            pending = journal.intents("pending")
        finally:
            journal.close()
        assert pending == [], f"intents left pending: {[i.key for i in pending]}"
        listed = git(self.repo, "worktree", "list", "--porcelain").splitlines()
        trees = [line for line in listed if line.startswith("worktree ")]
        assert trees == [f"worktree {self.repo}"], f"worktrees left: {trees}"
        self._check_no_process_left()

    def _check_the_default_branch(self) -> None:
        checkout = self.base / "final"
        git(self.base, "clone", "--quiet", str(self.github.git.path), str(checkout))
        assert git(checkout, "rev-parse", "HEAD") == self.github.default_head()
        final = subprocess.run(
            [sys.executable, *PIPELINE_COMMAND[1:]], cwd=checkout, capture_output=True, check=False
        )
        assert final.returncode == 0, final.stderr
        for path, needles in FEATURES.items():
            text = (checkout / path).read_text()
            assert all(needle in text for needle in needles), path
            assert text.count("def greet(") <= 1, text

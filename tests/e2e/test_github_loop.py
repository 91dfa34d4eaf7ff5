"""The whole loop on GitHub: a real ``cpe run`` with ``[provider] kind = "github"`` against the
fake GitHub, the demo's sample repository as the repository's content, the real ``claude`` CLI
and the scripted model playing the demo's book.

The planner's items become issues, revisions pull requests built through the Git Data API, a
fake CI (here: the sample's tests run on each pull request's head) posts check runs, the
reviewer's verdicts become pull-request reviews (one round of changes), and approved pull
requests are merged; the local repository is a clone of the fake's, never pulled by hand."""

from __future__ import annotations

import contextlib
import signal
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any

import pytest

from adapters.cli.demo import FEATURES
from adapters.demo.book import demo_book
from adapters.demo.sample import PIPELINE_COMMAND, create_sample_repo
from adapters.scripted_model import ScriptedModelServer
from tests.e2e.running import start_cpe, wait_for
from tests.fakes.github import FakeGitHub
from tests.fakes.github.app import FakeApp, rsa_key_pair
from tests.fakes.github.records import Fault, RecordedRequest
from tests.support.git import git, isolate_git

# A loop waits up to 300 s for both items (about 45 s on an idle machine, several times that on
# a loaded CI one), then stops cpe: the per-test limit is above that.
pytestmark = pytest.mark.timeout(600)

TOKEN_ENV = "CPE_E2E_GITHUB_TOKEN"
TOKEN = "e2e-token"
CHECK = "unittest"

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


class FakeCI:
    """Plays GitHub Actions: each open pull request's head gets one check run, the sample's
    tests run on a checkout of exactly that commit."""

    def __init__(self, github: FakeGitHub) -> None:
        self.github = github
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
            command = [sys.executable, *PIPELINE_COMMAND[1:]]
            done = subprocess.run(command, cwd=tree, capture_output=True, timeout=120, check=False)
        return "success" if done.returncode == 0 else "failure"


@contextlib.contextmanager
def seeded_github(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, **options: Any
) -> Iterator[FakeGitHub]:
    """A fake GitHub whose repository holds the demo's sample (``options``: ``FakeGitHub``'s)."""
    isolate_git(monkeypatch)
    with FakeGitHub(tmp_path / "github", **options) as fake:
        sample = create_sample_repo(tmp_path / "sample")
        fake.seed(tracked_files(sample), "the sample")
        yield fake


@pytest.fixture
def github(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeGitHub]:
    with seeded_github(tmp_path, monkeypatch, tokens={TOKEN: "cpe-bot"}) as fake:
        yield fake


def test_the_whole_loop_runs_on_github(
    tmp_path: Path, github: FakeGitHub, processes: list[subprocess.Popen[str]]
) -> None:
    requests = run_the_loop(tmp_path, github, processes)
    # what the loop cost GitHub (the figures the README's GitHub section states)
    counted = sum(1 for r in requests if r.counted)
    writes = sum(1 for r in requests if r.method in ("POST", "PATCH", "PUT", "DELETE"))
    print(f"\nthe loop on GitHub: {len(requests)} requests, {counted} counted, {writes} writes")
    assert writes < 100


def test_the_loop_on_github_survives_writes_applied_whose_answers_were_lost(
    tmp_path: Path, github: FakeGitHub, processes: list[subprocess.Popen[str]]
) -> None:
    """A 502 after GitHub applied the write, once for each kind of write the loop makes:
    creating an issue, a pull request, a review, and merging. Each is retried with its key and
    found done: no duplicate issue, pull request, review or merge (run_the_loop counts them)."""
    faults = [
        github.fail(Fault("POST", r"/issues$", 502, apply_first=True)),
        github.fail(Fault("POST", r"/pulls$", 502, apply_first=True)),
        github.fail(Fault("POST", r"/pulls/\d+/reviews$", 502, apply_first=True)),
        github.fail(Fault("PUT", r"/pulls/\d+/merge$", 502, apply_first=True)),
    ]
    run_the_loop(tmp_path, github, processes)
    assert [f.hits for f in faults] == [1, 1, 1, 1]


def test_the_loop_on_github_goes_on_when_the_apps_token_is_revoked_midway(
    tmp_path: Path, processes: list[subprocess.Popen[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Authenticated as a GitHub App: once the first pull request exists, every installation
    token issued so far is revoked; cpe buys a new one with the App's key and the loop ends
    as it would have."""
    private, public = rsa_key_pair()
    app = FakeApp(990_001, 4242, public)
    revoked: list[str] = []

    def revoke_once_a_pull_request_exists() -> None:
        with github.lock:
            started = bool(github.pulls)
        if started and not revoked:
            revoked.extend(grant.token for grant in app.grants)
            for token in revoked:
                app.revoke(token)

    auth = f"app_id = {app.app_id}\napp_installation_id = {app.installation_id}\n"
    auth += 'app_private_key_env = "CPE_E2E_APP_KEY"'
    with seeded_github(tmp_path, monkeypatch, app=app) as github:
        run_the_loop(
            tmp_path,
            github,
            processes,
            auth=auth,
            env={"CPE_E2E_APP_KEY": private},
            login=app.bot_login,
            meanwhile=revoke_once_a_pull_request_exists,
        )
    assert revoked, "no pull request was ever made"
    fresh = [grant.token for grant in app.grants if grant.token not in revoked]
    assert fresh, "cpe never bought a new installation token"


def run_the_loop(
    tmp_path: Path,
    github: FakeGitHub,
    processes: list[subprocess.Popen[str]],
    *,
    auth: str = f'token_env = "{TOKEN_ENV}"',
    env: Mapping[str, str] = MappingProxyType({TOKEN_ENV: TOKEN}),
    login: str = "cpe-bot",
    meanwhile: Callable[[], object] = lambda: None,
) -> list[RecordedRequest]:
    """``cpe run`` on a clone of the fake's repository until both items are done (``auth``: the
    credential's lines of ``[provider.github]``, ``env`` its variables, ``login`` who it acts
    as; ``meanwhile`` is called while it runs); checks what GitHub holds then, and returns the
    requests it saw."""
    repo = tmp_path / "repo"
    git(tmp_path, "clone", "--quiet", str(github.git.path), str(repo))
    (repo / "supervisor.toml").write_text(
        CONFIG.format(
            repository=f"{github.owner}/{github.repo}", base_url=github.base_url, auth=auth
        )
    )
    home = tmp_path / "home"
    home.mkdir()

    def done() -> bool:
        meanwhile()
        with github.lock:
            issues = [i for i in github.issues.values() if not i.is_pull]
            pulls = list(github.pulls.values())
        return (
            len(issues) == 2
            and all(i.state == "closed" for i in issues)
            and len(pulls) == 2
            and all(p.merged for p in pulls)
        )

    with contextlib.ExitStack() as stack:
        server = stack.enter_context(ScriptedModelServer(demo_book()))
        ci = stack.enter_context(FakeCI(github))
        log = stack.enter_context((home / "cpe.log").open("a"))
        cpe_run = start_cpe(repo, home, log, {**server.client_env(), **env})
        processes.append(cpe_run)
        finished = wait_for(done, 300)
        cpe_run.send_signal(signal.SIGTERM)
        assert cpe_run.wait(120) == 0
    log_text = (home / "cpe.log").read_text()
    assert finished, log_text[-4000:]
    # every poll is an HTTP request: the client library's line for each is not in the log
    assert '"logger": "httpx"' not in log_text
    with github.lock:
        issues = [i for i in github.issues.values() if not i.is_pull]
        pulls = list(github.pulls.values())
        reviews = list(github.reviews)
    # the planner's items: two issues, the second blocked by the first (GitHub's native
    # dependency), both closed as completed when their pull requests merged
    assert sorted(i.number for i in issues) == [1, 2]
    assert {i.number: i.blocked_by for i in issues} == {1: [], 2: [1]}
    assert {i.state_reason for i in issues} == {"completed"}
    # one pull request per item, built through the Git Data API, each merged once
    by_branch = {p.head_ref: p for p in pulls}
    assert sorted(by_branch) == [
        "cpe/1-greet-a-person-by-name",
        "cpe/2-greet-several-people-at-once",
    ]
    assert all(p.merged and p.merged_by == login for p in pulls)
    # the reviewer's verdicts as pull-request reviews: changes asked once on the first (the same
    # pull request then updated: two heads checked), then approved; the second approved at once
    first, second = (by_branch[b].number for b in sorted(by_branch))
    verdicts = {
        n: [r.body.split("**Verdict: ")[1].split("**")[0] for r in reviews if r.pull == n]
        for n in (first, second)
    }
    assert verdicts == {first: ["needs-changes", "approve"], second: ["approve"]}
    assert len(ci.checked) == 3
    assert set(ci.checked.values()) == {"success"}
    head = github.default_head()
    checkout = tmp_path / "final"
    git(tmp_path, "clone", "--quiet", str(github.git.path), str(checkout))
    assert git(checkout, "rev-parse", "HEAD") == head
    final = subprocess.run(
        [sys.executable, *PIPELINE_COMMAND[1:]], cwd=checkout, capture_output=True, check=False
    )
    assert final.returncode == 0, final.stderr
    # both features, as the demo checks them
    for path, needles in FEATURES.items():
        text = (checkout / path).read_text()
        assert all(needle in text for needle in needles), path
    return github.requests

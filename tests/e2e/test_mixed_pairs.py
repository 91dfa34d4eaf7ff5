"""The whole loop with the work items and the revisions kept by two systems: a real ``cpe run``
with ``[provider.work_items]`` on the local tracker or the fake GitLab and ``[provider.revisions]``
on the fake GitHub (``tests/e2e/github_loop.py``'s harness: the demo's sample as the repository's
content, the scripted model playing the demo's book, a fake CI on every pull request's head).

The planner's items are made in the tracker (local items, or GitLab issues); the implementors'
revisions are pull requests on GitHub that name their item (a marker and a visible line, never
"Closes #N": GitHub's issue #1 is not the tracker's item 1); they are reviewed (one round of
changes), merged, and the items are done (a GitLab issue closed by cpe). GitHub's issues are none
of cpe's business here: none is created, closed or labelled, and no status label is made; GitLab
is asked about no merge request."""

from __future__ import annotations

import re
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

from actors.journal import Journal
from adapters.cli.demo import FEATURES
from adapters.demo.book import ITEM_ONE_TITLE, ITEM_TWO_TITLE
from adapters.demo.sample import PIPELINE_COMMAND, create_sample_repo
from adapters.providers import ProviderRoles
from adapters.providers.local.provider import DATABASE_NAME, LocalProvider
from adapters.providers.markers import work_item_reference
from domain.dispatch import branch_name
from domain.events import StatusTransitioned
from domain.models import WorkItem, WorkItemId
from tests.e2e.crash import Loop
from tests.e2e.github_loop import (
    TOKEN,
    TOKEN_ENV,
    GitHubLoop,
    seed_with_the_sample,
    tracked_files,
)
from tests.fakes.github import FakeGitHub
from tests.fakes.gitlab import FakeGitLab
from tests.support.git import git, isolate_git

pytestmark = pytest.mark.timeout(900)

TRACKER = ProviderRoles(work_items=True, revisions=False)
ONE_SYSTEM = '[provider]\nkind = "github"\n'
APART = '[provider.work_items]\nkind = "local"\n[provider.revisions]\nkind = "github"\n'
GITLAB_TOKEN_ENV = "CPE_E2E_GITLAB_TOKEN"
GITLAB_TOKEN = "e2e-gitlab-token"
# Someone's GitHub issues, numbered as the tracker's items will be: cpe must leave them alone.
BYSTANDERS = ("A question about the README", "A feature request")


class TrackerAndGitHubLoop(GitHubLoop):
    """``GitHubLoop`` with the work items in another tracker (``items``, ``tracker``: its
    ``[provider.work_items]`` and settings): done when both items are done and both pull
    requests merged."""

    tracker = "local"
    tracker_section = ""

    def __init__(self, base: Path, github: FakeGitHub, env: Mapping[str, str]) -> None:
        super().__init__(base, github, env={TOKEN_ENV: TOKEN, **env})
        toml = self.repo / "supervisor.toml"
        text = toml.read_text()
        assert ONE_SYSTEM in text
        apart = APART.replace('kind = "local"', f'kind = "{self.tracker}"')
        toml.write_text(text.replace(ONE_SYSTEM, apart) + self.tracker_section)

    def items(self) -> list[WorkItem]:
        raise NotImplementedError

    def done(self) -> bool:
        self.meanwhile()
        items = self.items()
        with self.github.lock:
            pulls = list(self.github.pulls.values())
        return (
            len(items) == 2
            and all(i.status == "done" for i in items)
            and len(pulls) == 2
            and all(p.merged for p in pulls)
        )

    def state(self) -> str:
        items = ", ".join(f"#{i.id} {i.status}" for i in self.items())
        with self.github.lock:
            pulls = list(self.github.pulls.values())
        prs = ", ".join(f"#{p.number} {'merged' if p.merged else 'open'}" for p in pulls)
        return f"{self.tracker} items: {items or 'none'}; pull requests: {prs or 'none'}"

    def check_invariants(self) -> None:
        github = self.github
        items = {i.title: i for i in self.items()}
        assert sorted(items) == sorted([ITEM_ONE_TITLE, ITEM_TWO_TITLE]), self.state()
        first, second = items[ITEM_ONE_TITLE], items[ITEM_TWO_TITLE]
        assert second.blocked_by == (first.id,)
        assert all(i.status == "done" for i in items.values()), self.state()
        with github.lock:
            issues = {n: i for n, i in github.issues.items() if not i.is_pull}
            pulls = {p.head_ref: p for p in github.pulls.values()}
            bodies = {p.head_ref: github.issues[p.number].body or "" for p in pulls.values()}
            reviews = list(github.reviews)
            labels = dict(github.labels)
            requests = list(github.requests)
        # GitHub's issues untouched: the bystanders as they were, none made, closed or labelled.
        assert [(i.title, i.state, i.labels) for i in issues.values()] == [
            (title, "open", []) for title in BYSTANDERS
        ]
        assert labels == {}
        touched = [
            f"{r.method} {r.path}"
            for r in requests
            if r.method != "GET" and ("/issues" in r.path or "/labels" in r.path)
        ]
        assert touched == []
        # One pull request per item, named by it, merged once by cpe.
        # As the engine names them (a key keeps its case: cpe/ENG-2-greet-a-person-by-name).
        branches = {branch_name(first): first, branch_name(second): second}
        assert sorted(pulls) == sorted(branches), self.state()
        for branch, item in branches.items():
            assert work_item_reference(item.id) in bodies[branch]
            assert "closes" not in bodies[branch].lower()
            assert pulls[branch].merged
            assert pulls[branch].merged_by == self.login
        numbers = [pulls[b].number for b in branches]
        verdicts = {
            n: [r.body.split("**Verdict: ")[1].split("**")[0] for r in reviews if r.pull == n]
            for n in numbers
        }
        assert verdicts == {numbers[0]: ["needs-changes", "approve"], numbers[1]: ["approve"]}
        assert set(self.ci.checked.values()) == {"success"}
        self._check_the_default_branch()
        journal = Journal(self.repo / ".cpe" / "journal.sqlite3")
        try:
            pending = journal.intents("pending")
            done = [
                entry.event.work_item_id
                for entry in journal.entries()
                if isinstance(entry.event, StatusTransitioned) and entry.event.to == "done"
            ]
        finally:
            journal.close()
        assert pending == [], f"intents left pending: {[i.key for i in pending]}"
        assert sorted(done) == sorted([first.id, second.id]), f"done transitions: {done}"
        listed = git(self.repo, "worktree", "list", "--porcelain").splitlines()
        trees = [line for line in listed if line.startswith("worktree ")]
        assert trees == [f"worktree {self.repo}"], f"worktrees left: {trees}"
        self._check_no_process_left()


class LocalAndGitHubLoop(TrackerAndGitHubLoop):
    """The work items in the local tracker (read from its database, the tracker alone)."""

    def items(self) -> list[WorkItem]:
        if not (self.repo / ".cpe" / DATABASE_NAME).exists():
            return []  # cpe has not made its state yet: nothing to read, nothing to create
        with LocalProvider(self.repo, self.repo / ".cpe", roles=TRACKER) as tracker:
            return list(tracker.work_item_reader.list_work_items())

    def check_invariants(self) -> None:
        super().check_invariants()
        assert sorted(i.id for i in self.items()) == ["1", "2"]


class GitLabAndGitHubLoop(TrackerAndGitHubLoop):
    """The work items as issues of the fake GitLab (read from its records: an issue is done
    when closed)."""

    tracker = "gitlab"

    def __init__(self, base: Path, github: FakeGitHub, gitlab: FakeGitLab) -> None:
        self.gitlab = gitlab
        self.tracker_section = (
            "[provider.gitlab]\n"
            f'project = "{gitlab.project_path}"\n'
            f'base_url = "{gitlab.base_url}"\n'
            f'token_env = "{GITLAB_TOKEN_ENV}"\n'
            "writes_per_minute = 6000\nwrites_per_hour = 42000\nwrite_burst = 100\n"
        )
        super().__init__(base, github, {GITLAB_TOKEN_ENV: GITLAB_TOKEN})

    def items(self) -> list[WorkItem]:
        with self.gitlab.lock:
            issues = [i for i in self.gitlab.issues.values() if i.author == "cpe-bot"]
            return [
                WorkItem(
                    id=WorkItemId(str(i.iid)),
                    title=i.title,
                    status="done" if i.state == "closed" else "pending",
                    blocked_by=tuple(
                        WorkItemId(b) for b in re.findall(r"Blocked by #(\d+)", i.description or "")
                    ),
                )
                for i in issues
            ]

    def check_invariants(self) -> None:
        super().check_invariants()
        with self.gitlab.lock:
            # GitLab keeps no revision: nothing asked of its merge requests.
            asked = [r.path for r in self.gitlab.core.requests if "merge_requests" in r.path]
            closed_by = {i.iid: i.closed_by for i in self.gitlab.issues.values()}
        assert asked == []
        assert set(closed_by.values()) == {"cpe-bot"}


@pytest.fixture
def github(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeGitHub]:
    isolate_git(monkeypatch)
    with FakeGitHub(tmp_path / "github", tokens={TOKEN: "cpe-bot"}) as fake:
        seed_with_the_sample(fake, tmp_path)
        for title in BYSTANDERS:  # issues #1 and #2, filed by a teammate
            fake.add_issue(title)
        yield fake


def test_local_work_items_land_as_github_pull_requests(tmp_path: Path, github: FakeGitHub) -> None:
    loop = LocalAndGitHubLoop(tmp_path, github, {})
    try:
        loop.finish()
        loop.check_invariants()
    finally:
        loop.close()


def test_gitlab_issues_land_as_github_pull_requests(tmp_path: Path, github: FakeGitHub) -> None:
    with FakeGitLab(tmp_path / "gitlab", tokens={GITLAB_TOKEN: "cpe-bot"}) as gitlab:
        gitlab.seed({"README.md": "the tracker's project\n"})
        loop = GitLabAndGitHubLoop(tmp_path, github, gitlab)
        try:
            loop.finish()
            loop.check_invariants()
        finally:
            loop.close()


# ------------------------------------------------------------------ local items, GitLab MRs

GITLAB_CONFIG = """
[engine]
shutdown_timeout = 30
[provider.work_items]
kind = "local"
[provider.revisions]
kind = "gitlab"
[provider.gitlab]
project = "{project}"
base_url = "{base_url}"
token_env = "{token_env}"
request_timeout = 30
writes_per_minute = 6000
writes_per_hour = 42000
write_burst = 100
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


class GitLabCI:
    """Plays GitLab CI reporting a commit status: each open merge request's head gets one,
    the sample's tests run on a checkout of exactly that commit."""

    def __init__(self, gitlab: FakeGitLab) -> None:
        self.gitlab = gitlab
        self.checked: dict[str, str] = {}  # head sha -> state
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="fake-gitlab-ci", daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(60)

    def _run(self) -> None:
        while not self._stop.wait(0.2):
            with self.gitlab.lock:
                heads = [
                    (mr.head_sha, mr.source_branch)
                    for mr in self.gitlab.merge_requests.values()
                    if mr.state == "opened"
                ]
            for sha, branch in heads:
                if sha not in self.checked:
                    self.checked[sha] = self._test(sha)
                    self.gitlab.report_status(sha, "unittest", self.checked[sha], ref=branch)

    def _test(self, sha: str) -> str:
        with tempfile.TemporaryDirectory(prefix="fake-gitlab-ci-") as scratch:
            archive = subprocess.run(
                ["git", "-C", str(self.gitlab.git.path), "archive", sha],
                capture_output=True,
                check=True,
                timeout=60,
            ).stdout
            subprocess.run(["tar", "-x", "-C", scratch], input=archive, check=True, timeout=60)
            done = subprocess.run(
                [sys.executable, *PIPELINE_COMMAND[1:]],
                cwd=scratch,
                capture_output=True,
                timeout=120,
                check=False,
            )
        return "success" if done.returncode == 0 else "failed"


class LocalAndGitLabLoop(Loop):
    """The crash suite's loop with the local tracker and the fake GitLab as the forge: done when
    both local items are done and both merge requests merged."""

    finish_timeout = 300.0

    def __init__(self, base: Path, gitlab: FakeGitLab) -> None:
        repo = base / "repo"
        git(base, "clone", "--quiet", str(gitlab.git.path), str(repo))
        (repo / "supervisor.toml").write_text(
            GITLAB_CONFIG.format(
                project=gitlab.project_path, base_url=gitlab.base_url, token_env=GITLAB_TOKEN_ENV
            )
        )
        super().__init__(base, repo, {GITLAB_TOKEN_ENV: GITLAB_TOKEN})
        self.gitlab = gitlab
        self.ci = GitLabCI(gitlab)

    def close(self) -> None:
        try:
            super().close()
        finally:
            self.ci.close()

    def items(self) -> list[WorkItem]:
        if not (self.repo / ".cpe" / DATABASE_NAME).exists():
            return []
        with LocalProvider(self.repo, self.repo / ".cpe", roles=TRACKER) as tracker:
            return list(tracker.work_item_reader.list_work_items())

    def done(self) -> bool:
        items = self.items()
        with self.gitlab.lock:
            mrs = list(self.gitlab.merge_requests.values())
        return (
            len(items) == 2
            and all(i.status == "done" for i in items)
            and len(mrs) == 2
            and all(mr.state == "merged" for mr in mrs)
        )

    def state(self) -> str:
        items = ", ".join(f"#{i.id} {i.status}" for i in self.items())
        with self.gitlab.lock:
            mrs = ", ".join(f"!{m.iid} {m.state}" for m in self.gitlab.merge_requests.values())
        return f"local items: {items or 'none'}; merge requests: {mrs or 'none'}"

    def check_invariants(self) -> None:
        gitlab = self.gitlab
        items = {i.title: i for i in self.items()}
        assert sorted(items) == sorted([ITEM_ONE_TITLE, ITEM_TWO_TITLE]), self.state()
        first, second = items[ITEM_ONE_TITLE], items[ITEM_TWO_TITLE]
        assert (first.id, second.id) == ("1", "2")
        assert second.blocked_by == (first.id,)
        with gitlab.lock:
            issues = [(i.title, i.state, list(i.labels)) for i in gitlab.issues.values()]
            labels = set(gitlab.labels)
            mrs = {mr.source_branch: mr for mr in gitlab.merge_requests.values()}
            written = [
                f"{r.method} {r.path}"
                for r in gitlab.core.requests
                if r.method != "GET" and ("/issues" in r.path or "/labels" in r.path)
            ]
        # GitLab's issues untouched: the bystanders as they were, no label made.
        assert issues == [(title, "opened", []) for title in BYSTANDERS]
        assert labels == set()
        assert written == []
        branches = {
            "cpe/1-greet-a-person-by-name": first,
            "cpe/2-greet-several-people-at-once": second,
        }
        assert sorted(mrs) == sorted(branches), self.state()
        for branch, item in branches.items():
            description = mrs[branch].description or ""
            assert work_item_reference(item.id) in description
            assert "closes" not in description.lower()
            assert mrs[branch].state == "merged"
            assert mrs[branch].merged_by == "cpe-bot"
        assert set(self.ci.checked.values()) == {"success"}
        checkout = self.base / "final"
        git(self.base, "clone", "--quiet", str(gitlab.git.path), str(checkout))
        final = subprocess.run(
            [sys.executable, *PIPELINE_COMMAND[1:]], cwd=checkout, capture_output=True, check=False
        )
        assert final.returncode == 0, final.stderr
        for path, needles in FEATURES.items():
            text = (checkout / path).read_text()
            assert all(needle in text for needle in needles), path
        journal = Journal(self.repo / ".cpe" / "journal.sqlite3")
        try:
            pending = journal.intents("pending")
        finally:
            journal.close()
        assert pending == [], f"intents left pending: {[i.key for i in pending]}"
        self._check_no_process_left()


def test_local_work_items_land_as_gitlab_merge_requests(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    isolate_git(monkeypatch)
    with FakeGitLab(tmp_path / "gitlab", tokens={GITLAB_TOKEN: "cpe-bot"}) as gitlab:
        sample = create_sample_repo(tmp_path / "sample")
        gitlab.seed(tracked_files(sample), "the sample")
        for title in BYSTANDERS:  # issues #1 and #2, opened by a teammate
            gitlab.open_issue(title)
        loop = LocalAndGitLabLoop(tmp_path, gitlab)
        try:
            loop.finish()
            loop.check_invariants()
        finally:
            loop.close()

"""The whole loop with the work items and the revisions kept by two systems: a real ``cpe run``
with ``[provider.work_items] kind = "local"`` and ``[provider.revisions] kind = "github"``
against the fake GitHub (``tests/e2e/github_loop.py``'s harness: the demo's sample as the
repository's content, the scripted model playing the demo's book, a fake CI on every pull
request's head).

The planner's items are made in the local tracker; the implementors' revisions are pull requests
on GitHub that name their local item (a marker and a visible line, never "Closes #N": GitHub's
issue #1 is not the tracker's item 1); they are reviewed (one round of changes), merged, and the
local items are done. GitHub's issues are none of cpe's business here: none is created, closed
or labelled, and no status label is made."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from actors.journal import Journal
from adapters.demo.book import ITEM_ONE_TITLE, ITEM_TWO_TITLE
from adapters.providers import ProviderRoles
from adapters.providers.local.provider import DATABASE_NAME, LocalProvider
from adapters.providers.markers import work_item_reference
from domain.events import StatusTransitioned
from domain.models import WorkItem
from tests.e2e.github_loop import TOKEN, GitHubLoop, seed_with_the_sample
from tests.fakes.github import FakeGitHub
from tests.support.git import git, isolate_git

pytestmark = pytest.mark.timeout(900)

TRACKER = ProviderRoles(work_items=True, revisions=False)
ONE_SYSTEM = '[provider]\nkind = "github"\n'
APART = '[provider.work_items]\nkind = "local"\n[provider.revisions]\nkind = "github"\n'
# Someone's GitHub issues, numbered as the tracker's items will be: cpe must leave them alone.
BYSTANDERS = ("A question about the README", "A feature request")


class LocalAndGitHubLoop(GitHubLoop):
    """``GitHubLoop`` with the work items in the local tracker: done when both local items are
    done and both pull requests merged."""

    def __init__(self, base: Path, github: FakeGitHub) -> None:
        super().__init__(base, github)
        toml = self.repo / "supervisor.toml"
        text = toml.read_text()
        assert ONE_SYSTEM in text
        toml.write_text(text.replace(ONE_SYSTEM, APART))

    def items(self) -> list[WorkItem]:
        if not (self.repo / ".cpe" / DATABASE_NAME).exists():
            return []  # cpe has not made its state yet: nothing to read, nothing to create
        with LocalProvider(self.repo, self.repo / ".cpe", roles=TRACKER) as tracker:
            return list(tracker.work_item_reader.list_work_items())

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
        return f"local items: {items or 'none'}; pull requests: {prs or 'none'}"

    def check_invariants(self) -> None:
        github = self.github
        items = {i.title: i for i in self.items()}
        assert sorted(items) == sorted([ITEM_ONE_TITLE, ITEM_TWO_TITLE]), self.state()
        first, second = items[ITEM_ONE_TITLE], items[ITEM_TWO_TITLE]
        assert (first.id, second.id) == ("1", "2")
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
        # One pull request per local item, named by it, merged once by cpe.
        assert sorted(pulls) == [
            "cpe/1-greet-a-person-by-name",
            "cpe/2-greet-several-people-at-once",
        ], self.state()
        for branch, item in (
            ("cpe/1-greet-a-person-by-name", first),
            ("cpe/2-greet-several-people-at-once", second),
        ):
            assert work_item_reference(item.id) in bodies[branch]
            assert "closes" not in bodies[branch].lower()
            assert pulls[branch].merged
            assert pulls[branch].merged_by == self.login
        numbers = [pulls[b].number for b in sorted(pulls)]
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
        assert sorted(done) == ["1", "2"], f"done transitions: {done}"
        listed = git(self.repo, "worktree", "list", "--porcelain").splitlines()
        trees = [line for line in listed if line.startswith("worktree ")]
        assert trees == [f"worktree {self.repo}"], f"worktrees left: {trees}"
        self._check_no_process_left()


@pytest.fixture
def github(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeGitHub]:
    isolate_git(monkeypatch)
    with FakeGitHub(tmp_path / "github", tokens={TOKEN: "cpe-bot"}) as fake:
        seed_with_the_sample(fake, tmp_path)
        for title in BYSTANDERS:  # issues #1 and #2, filed by a teammate
            fake.add_issue(title)
        yield fake


@contextlib.contextmanager
def mixed_loop(tmp_path: Path, github: FakeGitHub) -> Iterator[LocalAndGitHubLoop]:
    loop = LocalAndGitHubLoop(tmp_path, github)
    try:
        yield loop
    finally:
        loop.close()


def test_local_work_items_land_as_github_pull_requests(tmp_path: Path, github: FakeGitHub) -> None:
    with mixed_loop(tmp_path, github) as loop:
        loop.finish()
        loop.check_invariants()

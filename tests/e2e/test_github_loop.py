"""The whole loop on GitHub: a real ``cpe run`` with ``[provider] kind = "github"`` against the
fake GitHub, the demo's sample repository as the repository's content, the real ``claude`` CLI
and the scripted model playing the demo's book (``tests/e2e/github_loop.py``).

The planner's items become issues, revisions pull requests built through the Git Data API, a
fake CI (here: the sample's tests run on each pull request's head) posts check runs, the
reviewer's verdicts become pull-request reviews (one round of changes), and approved pull
requests are merged. The same loop runs under GitHub's faults, and killed at every crashpoint
around a GitHub write then restarted (a subset chosen by the commit; ``make crash-all`` runs
all)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.crash import Crash, github_cases, selected
from tests.e2e.github_loop import (
    REAL_PACING,
    TOKEN,
    TOKEN_ENV,
    GitHubLoop,
    seed_with_the_sample,
)
from tests.fakes.github import FakeGitHub
from tests.fakes.github.app import FakeApp, rsa_key_pair
from tests.fakes.http import Fault
from tests.support.git import isolate_git

# A loop waits up to 300 s for both items (about 45 s on an idle machine, several times that on
# a loaded CI one), then stops cpe: the per-test limit is above that (twice, with a crash).
pytestmark = pytest.mark.timeout(900)

CI_CRASHES = 1  # crash cases a default run takes, chosen by the commit


@contextlib.contextmanager
def seeded_github(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, **options: Any
) -> Iterator[FakeGitHub]:
    """A fake GitHub whose repository holds the demo's sample (``options``: ``FakeGitHub``'s)."""
    isolate_git(monkeypatch)
    with FakeGitHub(tmp_path / "github", **options) as fake:
        seed_with_the_sample(fake, tmp_path)
        yield fake


@pytest.fixture
def github(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeGitHub]:
    with seeded_github(tmp_path, monkeypatch, tokens={TOKEN: "cpe-bot"}) as fake:
        yield fake


@contextlib.contextmanager
def github_loop(tmp_path: Path, github: FakeGitHub, **options: Any) -> Iterator[GitHubLoop]:
    loop = GitHubLoop(tmp_path, github, **options)
    try:
        yield loop
    finally:
        loop.close()


def test_the_whole_loop_runs_on_github(tmp_path: Path, github: FakeGitHub) -> None:
    """And it passes every crashpoint the crash cases on GitHub need; at GitHub's own write
    rates (the other loops pace a hundred times faster)."""
    with github_loop(tmp_path, github, pacing=REAL_PACING) as loop:
        loop.finish(trace=True)
        loop.check_invariants()
        counts = loop.counts()
        hits = loop.trace.read_text().splitlines()
    # what the loop cost GitHub (the figures the README's GitHub section states)
    print(
        f"\nthe loop on GitHub: {counts.requests} requests, {counts.counted} counted, "
        f"{counts.writes} writes"
    )
    assert counts.writes < 100
    for case in github_cases():
        assert hits.count(case.point) >= case.nth, f"{case} is not reached by the loop"


def test_the_loop_on_github_survives_writes_applied_whose_answers_were_lost(
    tmp_path: Path, github: FakeGitHub
) -> None:
    """A 502 after GitHub applied the write, once for each kind of write the loop makes:
    creating an issue, a pull request, a review, and merging. Each is retried with its key and
    found done: no duplicate issue, pull request, review or merge."""
    faults = [
        github.fail(Fault("POST", r"/issues$", 502, apply_first=True)),
        github.fail(Fault("POST", r"/pulls$", 502, apply_first=True)),
        github.fail(Fault("POST", r"/pulls/\d+/reviews$", 502, apply_first=True)),
        github.fail(Fault("PUT", r"/pulls/\d+/merge$", 502, apply_first=True)),
    ]
    with github_loop(tmp_path, github) as loop:
        loop.finish()
        loop.check_invariants()
    assert [f.hits for f in faults] == [1, 1, 1, 1]


def test_the_loop_on_github_waits_out_a_secondary_limit_in_the_middle_of_a_pull_request(
    tmp_path: Path, github: FakeGitHub
) -> None:
    """GitHub's secondary limit, a 403 without ``Retry-After``, on the commit of a pull
    request's first revision (its blobs and tree already made): cpe holds every request for
    the configured wait (a minute by default; one second here), then makes the pull request
    once, resuming its write with the same key."""
    limit = github.secondary_limit("POST", r"/git/commits$")
    auth = f'token_env = "{TOKEN_ENV}"\nsecondary_limit_wait = 1'
    with github_loop(tmp_path, github, auth=auth) as loop:
        loop.finish()
        loop.check_invariants()
        log_text = loop.log_path.read_text()
    assert limit.hits == 1
    assert "GitHub rate limit (403, secondary): no request is sent for 1 s" in log_text
    refused = [i for i, r in enumerate(github.requests) if r.status == 403]
    assert len(refused) == 1, "a request was sent into the hold and refused again"
    after = github.requests[refused[0] + 1 :]
    assert any(r.path.endswith("/git/commits") and r.status == 201 for r in after)


def test_the_loop_on_github_goes_on_when_the_apps_token_is_revoked_midway(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Authenticated as a GitHub App: once the first pull request exists, every installation
    token issued so far is revoked; cpe buys a new one with the App's key and the loop ends
    as it would have."""
    private, public = rsa_key_pair()
    app = FakeApp(990_001, 4242, public)
    revoked: list[str] = []
    auth = f"app_id = {app.app_id}\napp_installation_id = {app.installation_id}\n"
    auth += 'app_private_key_env = "CPE_E2E_APP_KEY"'
    with (
        seeded_github(tmp_path, monkeypatch, app=app) as github,
        github_loop(
            tmp_path, github, auth=auth, env={"CPE_E2E_APP_KEY": private}, login=app.bot_login
        ) as loop,
    ):

        def revoke_once_a_pull_request_exists() -> None:
            with github.lock:
                started = bool(github.pulls)
            if started and not revoked:
                revoked.extend(grant.token for grant in app.grants)
                for token in revoked:
                    app.revoke(token)

        loop.meanwhile = revoke_once_a_pull_request_exists
        loop.finish()
        loop.check_invariants()
    assert revoked, "no pull request was ever made"
    fresh = [grant.token for grant in app.grants if grant.token not in revoked]
    assert fresh, "cpe never bought a new installation token"


@pytest.mark.parametrize("crash", selected(github_cases(), CI_CRASHES), ids=str)
def test_a_kill_at_a_github_write_then_a_restart_finishes_the_loop_exactly_once(
    tmp_path: Path, github: FakeGitHub, crash: Crash
) -> None:
    """``kill -9`` of ``cpe run`` at a crashpoint around (or inside) a GitHub write, then a
    restart on the same state: nothing duplicated on GitHub, nothing wedged, nothing left."""
    with github_loop(tmp_path, github) as loop:
        loop.crash_at(crash)
        loop.finish()
        loop.check_invariants()

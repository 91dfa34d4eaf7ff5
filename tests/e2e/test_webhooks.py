"""Webhooks end to end: a real ``cpe run`` on the fake GitHub with its pollers' interval an
hour long, the fake's repository hook pointed at cpe's ``/hooks/github`` (the dashboard's
address), the real ``claude`` CLI and a scripted model whose implementor hangs.

Within a test only a delivery can make cpe poll: a maintainer's ``cpe:admit`` label on a
stranger's issue reaches cpe as GitHub's ``issues`` ``labeled`` delivery and the item is
dispatched at once. A delivery signed with another secret, one in the form content type and one
over ``max_body_bytes`` are refused and poll nothing; the one refused for its signature,
redelivered once the hook's secret is right, is taken, and replayed it is answered "already
delivered" and polls nothing. A burst of a hundred deliveries makes a few polls, bounded by its
duration over ``min_gap``, not a hundred."""

from __future__ import annotations

import contextlib
import json
import re
import signal
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from adapters.scripted_model import ScriptedModelServer
from tests.e2e.github_loop import TOKEN, TOKEN_ENV, clone_for_cpe, tracked_files
from tests.e2e.running import make_cpe_repo, start_cpe_with_a_hanging_implementor, wait_for
from tests.fakes.deliveries import Delivery
from tests.fakes.github import FakeGitHub
from tests.support.git import git, isolate_git

pytestmark = pytest.mark.timeout(900)

SECRET_ENV = "CPE_E2E_GITHUB_HOOK_SECRET"
SECRET = "the hook's secret, shared with GitHub"
STRANGER, MAINTAINER = "mallory", "maria"
HOUR = 3600  # the pollers' interval: no poll comes from it while a test runs
LIST = "issues/list-for-repo"
POLLS = "cpe_webhook_polls_total"


@dataclass
class Running:
    engine: subprocess.Popen[str]
    server: ScriptedModelServer
    log: Path
    url: str  # the dashboard's

    def said(self) -> str:
        return self.log.read_text()[-6000:]

    def metric(self, name: str, **labels: str) -> float:
        """A sample of ``/metrics`` (0 when it has none yet)."""
        text = httpx.get(f"{self.url}/metrics", timeout=30).text
        for line in text.splitlines():
            key, _, value = line.rpartition(" ")
            family, _, rest = key.partition("{")
            if family == name and dict(re.findall(r'(\w+)="([^"]*)"', rest)) == labels:
                return float(value)
        return 0.0


@pytest.fixture
def github(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeGitHub]:
    isolate_git(monkeypatch)
    with FakeGitHub(tmp_path / "github", tokens={TOKEN: "cpe-bot"}) as fake:
        project = make_cpe_repo(tmp_path / "project")
        (project / "supervisor.toml").unlink()
        git(project, "add", "-A")
        git(project, "commit", "-qm", "the project")
        fake.seed(tracked_files(project), "the project")
        fake.add_collaborator(MAINTAINER, "maintain")
        yield fake


def dashboard_url(log: Path) -> str | None:
    for line in log.read_text().splitlines():
        with contextlib.suppress(ValueError):
            record = json.loads(line)
            if record.get("event") == "dashboard listening":
                return str(record["url"]).rstrip("/")
    return None


@contextlib.contextmanager
def cpe_on(
    tmp_path: Path,
    github: FakeGitHub,
    processes: list[subprocess.Popen[str]],
    *,
    webhooks: str = "",
) -> Iterator[Running]:
    """``cpe run`` on a clone of the fake's repository, pollers an hour apart, taking GitHub's
    deliveries (``webhooks``: more of ``[webhooks]``); stopped with SIGTERM at the end."""
    repo = clone_for_cpe(github, tmp_path, auto_merge=False)
    config = (repo / "supervisor.toml").read_text()
    config = re.sub(r"(?m)^(\w+_interval) = .*$", rf"\1 = {HOUR}", config)
    config += f'\n[webhooks]\ngithub_secret_env = "{SECRET_ENV}"\n{webhooks}\n'
    (repo / "supervisor.toml").write_text(config)
    home = tmp_path / "home"
    home.mkdir()
    env = {TOKEN_ENV: TOKEN, SECRET_ENV: SECRET}
    with start_cpe_with_a_hanging_implementor(repo, home, processes, env) as (engine, server):
        log = home / "cpe.log"
        assert wait_for(lambda: dashboard_url(log) is not None, 120), log.read_text()[-6000:]
        url = dashboard_url(log)
        assert url is not None
        running = Running(engine, server, log, url)
        try:
            yield running
        finally:
            if engine.poll() is None:
                engine.send_signal(signal.SIGTERM)
                engine.wait(120)
    assert SECRET not in (home / "cpe.log").read_text()  # never in a log line


def polled_once(running: Running, *ignored: int) -> None:
    """Until cpe's first poll has read the issues (each of ``ignored`` told as ignored)."""
    seen = [re.compile(rf"issue #{number} .*ignored") for number in ignored]

    def told() -> bool:
        text = running.log.read_text()
        return all(pattern.search(text) for pattern in seen)

    assert wait_for(told, 300), running.said()


def lists(github: FakeGitHub) -> int:
    """The issue-list requests cpe made so far: one or more per poll of its work items."""
    with github.lock:
        return sum(1 for r in github.requests if r.route == LIST)


def last(github: FakeGitHub, event: str, action: str | None = None) -> Delivery:
    github.hooks.wait_idle()
    return [
        d
        for d in github.hooks.deliveries
        if d.event == event and (action is None or d.action == action)
    ][-1]


def answer(delivery: Delivery) -> dict[str, object]:
    body: dict[str, object] = json.loads(delivery.attempts[-1].answer)
    return body


def test_a_maintainers_label_dispatches_the_item_at_once_not_at_the_next_poll(
    tmp_path: Path, github: FakeGitHub, processes: list[subprocess.Popen[str]]
) -> None:
    issue = github.add_issue("Greeting", "Add greet(name).", user=STRANGER)
    with cpe_on(tmp_path, github, processes) as cpe:
        polled_once(cpe, issue)
        github.hooks.add(f"{cpe.url}/hooks/github", SECRET)
        ping = last(github, "ping")
        assert ping.status == 200, ping.attempts
        assert answer(ping) == {"ignored": "ping: nothing cpe polls"}
        before = lists(github)
        assert cpe.server.hanging == 0  # not admitted: ignored, not worked on

        github.label_issue(issue, "cpe:admit", actor=MAINTAINER)
        labeled_at = time.monotonic()
        assert wait_for(lambda: cpe.server.hanging >= 1, 300), cpe.said()
        started = time.monotonic() - labeled_at

        labeled = last(github, "issues", "labeled")
        assert labeled.status == 202, labeled.attempts
        said = answer(labeled)
        assert said["accepted"] == labeled.id
        assert "work_items" in said["polls"]  # type: ignore[operator]
        assert lists(github) > before  # the delivery's poll read the issues
        assert cpe.metric("cpe_webhook_deliveries_total", vendor="github", outcome="accepted")
        assert cpe.metric(POLLS, poller="work_items") >= 1
    print(f"\nlabel -> implementor started: {started:.2f} s (the pollers' interval: {HOUR} s)")


def test_refused_and_replayed_deliveries_poll_nothing(
    tmp_path: Path, github: FakeGitHub, processes: list[subprocess.Popen[str]]
) -> None:
    issue = github.add_issue("Greeting", "Add greet(name).", user=STRANGER)
    quiet = github.add_issue("Quiet", "Not for cpe.", user=STRANGER)
    # GitHub takes issue bodies up to 65,536 characters: a payload carrying one is over 64 KiB.
    long = github.add_issue("Long", "x" * 65_000, user=STRANGER)
    # min_gap 0: a delivery asks one poll, no follow-up, so a replay's would show.
    settings = "max_body_bytes = 65536\nmin_gap = 0"
    with cpe_on(tmp_path, github, processes, webhooks=settings) as cpe:
        polled_once(cpe, issue, quiet, long)
        before = lists(github)
        # Labels on issues cpe ignores: taken, each would make cpe poll and change nothing.
        hook = github.hooks.add(f"{cpe.url}/hooks/github", "not the secret cpe has")
        github.label_issue(quiet, "docs", actor=MAINTAINER)
        signed_wrong = last(github, "issues", "labeled")
        hook.secret = SECRET
        hook.content_type = "form"  # GitHub's default content type for a new hook
        github.label_issue(quiet, "question", actor=MAINTAINER)
        as_form = last(github, "issues", "labeled")
        hook.content_type = "json"
        github.label_issue(long, "later", actor=MAINTAINER)
        too_big = last(github, "issues", "labeled")

        assert last(github, "ping").status == 401
        assert (signed_wrong.status, as_form.status, too_big.status) == (401, 415, 413)
        assert len(too_big.body) > 65536
        for refused in (signed_wrong, as_form, too_big):
            assert "error" in answer(refused)
        refusals = {
            reason: cpe.metric("cpe_webhook_refusals_total", vendor="github", reason=reason)
            for reason in ("signature", "type", "size")
        }
        assert refusals == {"signature": 2, "type": 1, "size": 1}
        assert cpe.metric(POLLS, poller="work_items") == 0
        assert lists(github) == before  # no poll: the fake's request log says so too

        # A refused delivery was not remembered: redelivered, signed right now, it is taken.
        github.hooks.redeliver(signed_wrong.id)
        github.hooks.wait_idle()
        assert signed_wrong.status == 202
        assert answer(signed_wrong)["accepted"] == signed_wrong.id
        assert wait_for(lambda: cpe.metric(POLLS, poller="work_items") >= 1, 120), cpe.said()
        polls = cpe.metric(POLLS, poller="work_items")

        # Replayed: the same GUID again is answered 200 (a 4xx would count as a failure) and
        # asks for no poll.
        github.hooks.redeliver(signed_wrong.id)
        github.hooks.wait_idle()
        assert signed_wrong.status == 200
        assert answer(signed_wrong) == {"ignored": "already delivered"}
        assert cpe.metric("cpe_webhook_deliveries_total", vendor="github", outcome="duplicate")
        assert cpe.metric(POLLS, poller="work_items") == polls
        assert cpe.server.hanging == 0

        # And the receiver still takes what comes next: the maintainer's label dispatches.
        github.label_issue(issue, "cpe:admit", actor=MAINTAINER)
        assert wait_for(lambda: cpe.server.hanging >= 1, 300), cpe.said()


def test_a_burst_of_a_hundred_deliveries_makes_a_few_polls(
    tmp_path: Path, github: FakeGitHub, processes: list[subprocess.Popen[str]]
) -> None:
    chatty = github.add_issue("Much discussed", "Not for cpe.", user=STRANGER)
    with cpe_on(tmp_path, github, processes) as cpe:
        polled_once(cpe, chatty)
        one_poll = lists(github)  # the first poll's issue lists (its work items, the ignored)
        github.hooks.add(f"{cpe.url}/hooks/github", SECRET, events=["issues"])
        github.hooks.wait_idle()
        begun = time.monotonic()
        for n in range(100):
            github.label_issue(chatty, f"topic-{n}", actor=MAINTAINER)
        github.hooks.wait_idle()
        burst = [d for d in github.hooks.deliveries if d.event == "issues"]
        assert len(burst) == 100
        assert len({d.id for d in burst}) == 100
        assert [d.status for d in burst] == [202] * 100
        webhook_polls = cpe.metric(POLLS, poller="work_items")
        cpe.engine.send_signal(signal.SIGTERM)
        assert cpe.engine.wait(120) == 0, cpe.said()
        lasted = time.monotonic() - begun
    # At once, then at most one poll per min_gap (1 s) while deliveries come, and one after.
    bound = 3 + lasted / 1.0
    assert 1 <= webhook_polls <= bound, (webhook_polls, lasted)
    made = lists(github) - one_poll
    assert 1 <= made <= one_poll * bound, (made, one_poll, lasted)
    print(
        f"\n100 deliveries over {lasted:.1f} s: {webhook_polls:.0f} work-item polls asked, "
        f"{made} issue-list requests"
    )

"""Jira's refusals and limits: 429s waited out as Retry-After says (reads) or handed up with
the wait (writes, never resent), 5xx reads retried, a lost create found again by its key,
Jira's words in every error and never the token."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from adapters.providers.jira import JiraProvider, JiraSettings
from domain.errors import ConfigError, ProviderError
from domain.models import WorkItemId
from tests.fakes.jira import BOT, FakeJira, Fault
from tests.support.jira import running_jira
from tests.support.jira_provider import Sleeps, full_workflow, jira_provider

SEARCH = r"/rest/api/\d/search"


def test_a_rate_limited_search_waits_as_retry_after_says_then_goes_on(jira: FakeJira) -> None:
    key = jira.open_issue("One", by=BOT)
    sleeps = Sleeps()
    with jira_provider(jira, sleeps) as provider:
        jira.fail(Fault("POST", SEARCH, 429, retry_after=7, message="jira-quota-based"))
        assert [i.id for i in provider.work_item_reader.list_work_items()] == [key]
        assert provider.stats.rate_limited == 1
        assert provider.stats.retries == 1
    assert len(sleeps.waits) == 1
    assert 6 < sleeps.waits[0] <= 7


def test_a_wait_longer_than_allowed_is_handed_up_with_its_length(jira: FakeJira) -> None:
    sleeps = Sleeps()
    with jira_provider(jira, sleeps, max_retry_wait=10) as provider:
        jira.fail(Fault("POST", SEARCH, 429, retry_after=600))
        with pytest.raises(ProviderError) as caught:
            provider.work_item_reader.list_work_items()
        assert caught.value.status == 429
        assert caught.value.retry_after == 600
        assert caught.value.transient
        # Until then nothing is sent at all: the next write is held, not sent.
        jira.clear_requests()
        with pytest.raises(ProviderError, match="holds its requests") as held:
            provider.work_item_writer.create_work_item("Held", "b")
        assert held.value.retry_after is not None
        assert 590 < held.value.retry_after <= 600
        assert jira.requests == []
    assert sleeps.waits == []


def test_a_rate_limited_write_is_not_resent(jira: FakeJira) -> None:
    key = jira.open_issue("Move", by=BOT)
    with jira_provider(jira) as provider:
        jira.fail(Fault("POST", r"/transitions$", 429, retry_after=30))
        with pytest.raises(ProviderError) as caught:
            provider.work_item_writer.transition_status(WorkItemId(key), "in-progress")
        assert (caught.value.status, caught.value.retry_after) == (429, 30)
    assert (
        len([r for r in jira.requests if r.method == "POST" and r.path.endswith("/transitions")])
        == 1
    )
    assert jira.status_of(key) == "To Do"


def test_a_server_error_on_a_read_is_retried_with_backoff(jira: FakeJira) -> None:
    sleeps = Sleeps()
    with jira_provider(jira, sleeps, backoff_initial=1.0) as provider:
        jira.fail(Fault("POST", SEARCH, 502, times=2))
        assert provider.work_item_reader.list_work_items() == []
    assert len(sleeps.waits) == 2
    assert 1 <= sleeps.waits[0] <= 1.25
    assert 2 <= sleeps.waits[1] <= 2.5


def test_a_create_whose_answer_is_lost_is_found_by_its_key_not_made_twice(jira: FakeJira) -> None:
    with jira_provider(jira) as provider:
        jira.fail(Fault("POST", r"/rest/api/\d/issue$", 502, apply_first=True))
        made = provider.work_item_writer.create_work_item("Once", "b", idempotency_key="plan:2:a")
    assert jira.issue_keys() == [made]
    creates = [r for r in jira.requests if r.method == "POST" and r.path.endswith("/issue")]
    assert len(creates) == 1


def test_a_refusal_is_said_in_jira_s_words_and_never_with_the_token(jira: FakeJira) -> None:
    with jira_provider(jira, token="test-token") as provider:
        with pytest.raises(ProviderError) as caught:
            provider.work_item_writer.create_work_item("Bad", "b", ("two words",))
        assert "single words" in str(caught.value)
        jira.fail(Fault("POST", r"/rest/api/\d/issue$", 400, message="Field 'summary' is bad"))
        with pytest.raises(ProviderError, match="create an issue: Field 'summary' is bad") as bad:
            provider.work_item_writer.create_work_item("Bad", "b")
        assert bad.value.transient is False
        assert "test-token" not in str(bad.value)


def test_writes_are_paced(jira: FakeJira) -> None:
    sleeps = Sleeps()
    with jira_provider(jira, sleeps, write_burst=1, writes_per_minute=6) as provider:
        writer = provider.work_item_writer
        for n in range(3):
            writer.create_work_item(f"Item {n}", "b")
    # One write a burst, then one each 10 s: the sleeps are not slept, so the turns add up.
    assert len(sleeps.waits) == 2
    assert 9 <= sleeps.waits[0] <= 10.5
    assert 19 <= sleeps.waits[1] <= 20.5


class Clock:
    """Time that moves only when someone sleeps (the provider's sleeps move it)."""

    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


@pytest.mark.parametrize("deployment", ["cloud", "data_center"])
def test_jira_s_own_limiter_is_waited_out_and_its_figures_kept(
    tmp_path: Path, deployment: str
) -> None:
    clock = Clock()
    with running_jira(root=tmp_path, deployment=deployment, now=clock) as fake:
        full_workflow(fake)
        key = fake.open_issue("One", by=BOT)
        waits: list[float] = []

        def sleep(seconds: float) -> None:
            waits.append(seconds)
            clock.sleep(seconds)

        with jira_provider(fake, sleep, clock=clock) as provider:
            fake.rate_limit(6)  # the start's five, and one more this minute
            reader = provider.work_item_reader
            assert [i.id for i in reader.list_work_items()] == [key]  # the sixth
            assert [i.id for i in reader.list_work_items()] == [key]  # 429, a minute, again
            assert provider.stats.rate_limited == 1
            assert provider.stats.rate_limit == 6
            assert provider.stats.rate_remaining is not None
        assert len(waits) == 1
        assert 59 <= waits[0] <= 61


def test_a_redirect_is_not_followed_and_the_token_goes_nowhere_else(tmp_path: Path) -> None:
    """A site that moved answers 301 to its new address: cpe stops there, saying so, and the
    other host never sees a request (nor the Authorization header)."""
    seen: list[dict[str, str]] = []

    class Elsewhere(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            seen.append(dict(self.headers))
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    class Moved(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(301)
            self.send_header("Location", f"{other}{self.path}")
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    servers = [ThreadingHTTPServer(("127.0.0.1", 0), h) for h in (Elsewhere, Moved)]
    threads = [threading.Thread(target=s.serve_forever, daemon=True) for s in servers]
    for thread in threads:
        thread.start()
    other = f"http://127.0.0.1:{servers[0].server_address[1]}"
    moved = f"http://127.0.0.1:{servers[1].server_address[1]}"
    try:
        settings = JiraSettings(base_url=moved, project="PROJ", token_env="T")
        with pytest.raises(ConfigError, match=f"redirected the request elsewhere to {other}") as no:
            JiraProvider(settings, environ={"T": "secret-pat"})
        assert str(no.value).startswith(f"provider.jira.base_url: Jira at {moved} redirected")
        assert "secret-pat" not in str(no.value)
    finally:
        for server in servers:
            server.shutdown()
            server.server_close()
    assert seen == []

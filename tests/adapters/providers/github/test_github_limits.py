"""GitHub's rate limits as GitHub states them, and writes paced under its content limits.

A secondary limit without ``Retry-After`` is waited out for at least a minute, doubling while it
keeps coming (GitHub: continuing can get an integration banned); while a limit holds, nothing is
sent, from reads or writes, and a poller skips its cycles until it is over. Writes take tokens
from a bucket so that a patch of many files, or a burst of revisions, stays under about 80
content-creating requests a minute; text files go inline into the tree request.

Time is a ``ManualClock`` the provider's waits advance (and the fake judges its limits by), so
nothing here sleeps.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from adapters.providers.github import GitHubProvider
from domain.errors import ProviderError
from domain.events import EngineEvent
from domain.models import EngineState
from tests.fakes.github import FakeGitHub, ManualClock
from tests.support.git import Repo, make_patch, tree_from_git_apply
from tests.support.github import TOKEN_ENV, Sleeps, running_github, settings_for
from tests.support.pollers import revision_poller

CONTENT_WRITES = ("POST", "PATCH", "PUT", "DELETE")


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(now=2_000_000_000.0)


@pytest.fixture
def fake_github(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, clock: ManualClock
) -> Iterator[FakeGitHub]:
    with running_github(tmp_path, monkeypatch, now=clock) as gh:
        yield gh


class Waits:
    """The provider's ``sleep``: records each wait and moves the clock on by it."""

    def __init__(self, clock: ManualClock) -> None:
        self.clock = clock
        self.waits: list[float] = []

    def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)
        self.clock.advance(seconds)


def provider_on(
    fake_github: FakeGitHub, clock: ManualClock, sleep: Sleeps | Waits, **settings: object
) -> GitHubProvider:
    return GitHubProvider(
        settings_for(fake_github, **settings),
        environ={TOKEN_ENV: "test-token"},
        sleep=sleep,
        clock=clock,
    )


def refused(fake_github: FakeGitHub) -> list[str]:
    return [f"{r.method} {r.path}" for r in fake_github.requests if r.status == 403]


# ------------------------------------------------------------------ secondary limits


def test_a_secondary_limit_without_retry_after_is_waited_out_a_minute_then_two(
    fake_github: FakeGitHub, clock: ManualClock
) -> None:
    sleeps = Sleeps()
    fake_github.add_issue("Patience")
    fake_github.secondary_limit("GET", r"/issues$", times=2)
    with provider_on(fake_github, clock, sleeps, max_retry_wait=600) as provider:
        assert [i.title for i in provider.work_item_reader.list_work_items()] == ["Patience"]
    assert sleeps.waits == [60.0, 120.0]


def test_the_wait_after_a_secondary_limit_without_a_hint_is_configurable(
    fake_github: FakeGitHub, clock: ManualClock
) -> None:
    """``secondary_limit_wait``: the first wait, still doubling while the limit keeps coming."""
    sleeps = Sleeps()
    fake_github.secondary_limit("GET", r"/issues$", times=2)
    with provider_on(fake_github, clock, sleeps, secondary_limit_wait=5) as provider:
        provider.work_item_reader.list_work_items()
    assert sleeps.waits == [5.0, 10.0]


def test_while_a_limit_holds_no_request_is_sent_until_it_is_over(
    fake_github: FakeGitHub, clock: ManualClock
) -> None:
    sleeps = Sleeps()  # waits, without moving the clock: the hold is still on after them
    with provider_on(fake_github, clock, sleeps) as provider:
        fake_github.secondary_limit("GET", r"/issues$", times=2)
        with pytest.raises(ProviderError) as first:
            provider.work_item_reader.list_work_items()
        assert (first.value.status, first.value.transient) == (403, True)
        assert first.value.retry_after == 120.0  # the second in a row: twice the minute
        assert sleeps.waits == [60.0]  # the first was waited out; the second is too long
        fake_github.clear_requests()
        with pytest.raises(ProviderError) as held:
            provider.work_item_reader.list_work_items()
        assert fake_github.requests == []
        assert held.value.transient
        assert held.value.retry_after == pytest.approx(120.0)
        with pytest.raises(ProviderError):
            provider.work_item_writer.create_work_item("Not now", "b")
        assert fake_github.requests == []
        clock.advance(121)
        assert provider.work_item_reader.list_work_items() == []
    assert fake_github.requests


def test_a_write_answered_with_a_secondary_limit_makes_the_reads_wait_too(
    fake_github: FakeGitHub, clock: ManualClock
) -> None:
    sleeps = Sleeps()
    with provider_on(fake_github, clock, sleeps) as provider:
        fake_github.secondary_limit("POST", r"/issues$")
        with pytest.raises(ProviderError) as refused_write:
            provider.work_item_writer.create_work_item("Once", "b")
        assert refused_write.value.retry_after == 60.0
        assert sleeps.waits == []  # a write is never resent by the transport
        provider.work_item_reader.list_work_items()
    assert sleeps.waits == [60.0]
    assert [r.method for r in fake_github.requests if r.path.endswith("/issues")] == ["POST", "GET"]


def test_a_poller_skips_its_cycles_while_github_asks_it_to_wait(
    fake_github: FakeGitHub, clock: ManualClock
) -> None:
    events: list[EngineEvent] = []
    with provider_on(fake_github, clock, Sleeps()) as provider:
        fake_github.add_pull("feature", {"src/app.py": "x = 2\n"}, "Feature")
        poller = revision_poller(provider.revision_reader, EngineState, events.append, interval=5)
        poller.clock = clock
        fake_github.secondary_limit("GET", r"/pulls$", times=2)
        assert poller.poll() == 0  # limited: 60 s waited, then 120 s asked
        fake_github.clear_requests()
        for _ in range(20):  # 100 s of cycles
            assert poller.poll() == 0
            clock.advance(5)
        assert fake_github.requests == []
        clock.advance(25)
        assert poller.poll() == 1
    assert fake_github.requests


# ------------------------------------------------------------------ paced writes


def many_files(binary: bool, count: int = 100) -> Callable[[Repo], None]:
    def edit(repo: Repo) -> None:
        for i in range(count):
            content = bytes([0, i, 255]) * 40 if binary else f"VALUE = {i}\n"
            repo.write(f"gen/{'b' if binary else 't'}{i:03}.{'bin' if binary else 'py'}", content)

    return edit


def test_a_patch_of_a_hundred_binary_files_opens_under_the_content_limit(
    fake_github: FakeGitHub, clock: ManualClock, tmp_path: Path
) -> None:
    waits = Waits(clock)
    patch = make_patch(fake_github.git.path, tmp_path / "patch", many_files(binary=True))
    with provider_on(fake_github, clock, waits) as provider:
        item = provider.work_item_writer.create_work_item("Assets", "b")
        revision = provider.revision_writer.create_from_patch(item, "cpe/1-a", "A", "", patch)
    assert refused(fake_github) == []
    assert sum(1 for r in fake_github.requests if r.path.endswith("/git/blobs")) == 100
    assert sum(waits.waits) >= 60  # paced: more than 80 writes take more than a minute
    expected = tree_from_git_apply(
        fake_github.git.path, tmp_path / "ref", patch, fake_github.default_head()
    )
    assert fake_github.git.line("rev-parse", f"{revision.head_sha}^{{tree}}") == expected


def test_text_files_go_inline_into_one_tree_request(
    fake_github: FakeGitHub, clock: ManualClock, tmp_path: Path
) -> None:
    patch = make_patch(fake_github.git.path, tmp_path / "patch", many_files(binary=False))
    with provider_on(fake_github, clock, Waits(clock)) as provider:
        item = provider.work_item_writer.create_work_item("Code", "b")
        fake_github.clear_requests()
        revision = provider.revision_writer.create_from_patch(item, "cpe/1-c", "C", "", patch)
    writes = [r.path.rsplit("/widgets/", 1)[1] for r in fake_github.requests if r.method != "GET"]
    assert writes == ["git/trees", "git/commits", "git/refs", "pulls"]
    expected = tree_from_git_apply(
        fake_github.git.path, tmp_path / "ref", patch, fake_github.default_head()
    )
    assert fake_github.git.line("rev-parse", f"{revision.head_sha}^{{tree}}") == expected


def test_a_burst_of_revisions_is_paced_under_the_content_limit(
    fake_github: FakeGitHub, clock: ManualClock, tmp_path: Path
) -> None:
    waits = Waits(clock)
    with provider_on(fake_github, clock, waits) as provider:
        for i in range(20):
            item = provider.work_item_writer.create_work_item(f"Item {i}", "b")

            def edit(repo: Repo, i: int = i) -> None:
                repo.write(f"src/m{i}.py", f"N = {i}\n")

            patch = make_patch(fake_github.git.path, tmp_path / f"p{i}", edit)
            provider.revision_writer.create_from_patch(item, f"cpe/{item}-m", f"M{i}", "", patch)
    writes = [r for r in fake_github.requests if r.method in CONTENT_WRITES]
    assert len(writes) > 80
    assert refused(fake_github) == []
    assert len(fake_github.pulls) == 20


def test_a_status_change_reads_the_labels_it_keeps_after_its_turn_to_write(
    fake_github: FakeGitHub, clock: ManualClock
) -> None:
    """A paced status change waits for its turn before it reads the issue, not between the read
    and the write: a label a person adds meanwhile is not overwritten by a stale list."""
    waits = Waits(clock)
    with provider_on(fake_github, clock, waits, write_burst=1, writes_per_minute=6) as provider:
        item = provider.work_item_writer.create_work_item("Paced", "b")
        waits.waits.clear()
        fake_github.clear_requests()
        sent_before_wait: list[int] = []
        real_advance = clock.advance

        def advance(seconds: float) -> None:
            sent_before_wait.append(len(fake_github.requests))
            real_advance(seconds)

        clock.advance = advance  # type: ignore[method-assign]
        provider.work_item_writer.transition_status(item, "in-progress")
    calls = [f"{r.method} {r.path.split('/widgets/', 1)[-1]}" for r in fake_github.requests]
    read = calls.index(f"GET issues/{item}")
    write = calls.index(f"PUT issues/{item}/labels")
    assert read < write
    assert len(waits.waits) == 1  # one turn waited, not two
    assert waits.waits[0] > 0
    assert sent_before_wait[0] <= read  # the wait came before the read

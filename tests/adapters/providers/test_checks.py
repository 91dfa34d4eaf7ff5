"""The rules every forge shares for CI (``adapters/providers/checks.py``): how signals combine
into one pipeline, and when a revision's pipeline is read again."""

from __future__ import annotations

from adapters.providers.checks import PipelineWatches, Signal, combine_signals
from domain.models import Pipeline


def signal(name: str, state: str) -> Signal:
    return Signal(f"{name} {state}", state, f"https://ci/{name}", name)


def test_no_signal_is_no_ci_and_any_failure_fails_before_anything_running() -> None:
    assert combine_signals([]).status == "none"
    failed = combine_signals(
        [signal("lint", "success"), signal("test", "pending"), signal("docs", "failure")]
    )
    assert (failed.status, failed.failed_checks, failed.url) == (
        "failure",
        ("docs",),
        "https://ci/docs",
    )
    running = combine_signals([signal("lint", "success"), signal("test", "pending")])
    assert (running.status, running.reason) == ("pending", "running: test pending")
    assert combine_signals([signal("lint", "success")]).status == "success"


def cycles(watches: PipelineWatches, number: int, sha: str, count: int) -> list[bool]:
    due = []
    for _ in range(count):
        watches.cycle += 1
        due.append(watches.due(number, sha))
    return due


def test_a_pending_pipeline_is_read_every_cycle() -> None:
    watches = PipelineWatches(grace_cycles=3, recheck_cycles=5)
    assert watches.due(1, "a")  # never read
    watches.record(1, "a", Pipeline(status="pending"))
    assert cycles(watches, 1, "a", 6) == [True] * 6


def test_a_settled_pipeline_is_read_every_recheck_cycles_staggered_by_number() -> None:
    watches = PipelineWatches(grace_cycles=3, recheck_cycles=5)
    watches.record(1, "a", Pipeline(status="success"))
    watches.record(2, "b", Pipeline(status="failure"))
    one, two = cycles(watches, 1, "a", 10), []
    watches.cycle = 0
    two = cycles(watches, 2, "b", 10)
    assert [i + 1 for i, due in enumerate(one) if due] == [4, 9]  # (cycle + 1) % 5 == 0
    assert [i + 1 for i, due in enumerate(two) if due] == [3, 8]  # (cycle + 2) % 5 == 0


def test_a_new_head_without_ci_is_read_every_cycle_for_the_grace_then_settles() -> None:
    watches = PipelineWatches(grace_cycles=3, recheck_cycles=100)
    watches.record(7, "a", Pipeline(status="none"))
    assert cycles(watches, 7, "a", 5) == [True, True, False, False, False]
    assert watches.due(7, "b")  # another head: read at once
    watches.record(7, "b", Pipeline(status="none"))
    assert cycles(watches, 7, "b", 3) == [True, True, False]  # its own grace, from its first read


def test_what_is_shown_is_the_last_read_of_this_head() -> None:
    watches = PipelineWatches(grace_cycles=3, recheck_cycles=5)
    assert watches.pipeline(1, "a", "open") == Pipeline(status="pending", reason="not read yet")
    assert watches.pipeline(1, "a", "merged") == Pipeline()
    green = Pipeline(status="success", url="https://ci/1")
    watches.record(1, "a", green)
    assert watches.pipeline(1, "a", "open") == green
    assert watches.pipeline(1, "b", "open").status == "pending"  # a head not read yet
    watches.forget(1)  # cpe wrote to it (merged it): read again, shown as last read meanwhile
    assert watches.due(1, "a")
    assert watches.pipeline(1, "a", "merged") == green
    watches.record(1, "a", Pipeline(status="pending"))
    assert watches.pipeline(1, "a", "open").status == "pending"

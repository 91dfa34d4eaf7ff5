"""Crashpoints (``adapters.support.crashpoints``): what ``CPE_CRASH_AT`` accepts and refuses, a
point that kills its process at the N-th hit and not before, and the trace of every hit.

The crash suite (tests/e2e/test_crash_consistency.py) runs a whole ``cpe run`` per point; these
tests run a small child process that hits points in a given order, so that each rule is seen on
its own, in well under a second."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

import adapters.support.crashpoints
from adapters.support.crashpoints import _parse, crashpoint

# The child: hits each point named on its command line, and says so after each one it survives.
CHILD = """
import sys
from adapters.support.crashpoints import crashpoint
for name in sys.argv[1:]:
    crashpoint(name)
    print("passed", name, flush=True)
"""


def hit(*points: str, crash_at: str | None = None, trace: Path | None = None) -> Result:
    """Run the child on ``points`` with the environment variables given (and no others of
    ours); it imports the same ``adapters`` as this test."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CPE_CRASH_")}
    env["PYTHONPATH"] = str(Path(adapters.support.crashpoints.__file__).resolve().parents[2])
    if crash_at is not None:
        env["CPE_CRASH_AT"] = crash_at
    if trace is not None:
        env["CPE_CRASH_TRACE"] = str(trace)
    child = [sys.executable, "-c", CHILD, *points]
    done = subprocess.run(child, env=env, capture_output=True, text=True, timeout=60, check=False)
    return Result(done.returncode, done.stdout.splitlines(), done.stderr)


class Result:
    def __init__(self, returncode: int, passed: list[str], stderr: str):
        self.returncode = returncode
        self.passed = [line.removeprefix("passed ") for line in passed]
        self.stderr = stderr


# ---------------------------------------------------------------------------- CPE_CRASH_AT


@pytest.mark.parametrize(
    ("value", "target"),
    [
        (None, None),
        ("", None),
        ("journal.after_cycle", ("journal.after_cycle", 1)),
        ("journal.after_cycle:1", ("journal.after_cycle", 1)),
        ("session.after_terminal:3", ("session.after_terminal", 3)),
        ("write.MergeRevision.before:12", ("write.MergeRevision.before", 12)),
    ],
)
def test_cpe_crash_at_names_a_point_and_optionally_its_hit(
    value: str | None, target: tuple[str, int] | None
) -> None:
    """Unset or empty: no crash; ``NAME`` is its first hit, ``NAME:N`` its N-th."""
    assert _parse(value) == target


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("journal.after_cycle:x", "CPE_CRASH_AT: 'journal.after_cycle:x': expected NAME or NAME:N"),
        (
            "journal.after_cycle:1:2",
            "CPE_CRASH_AT: 'journal.after_cycle:1:2': expected NAME or NAME:N",
        ),
        ("journal.after_cycle:0", "CPE_CRASH_AT: 'journal.after_cycle:0': N must be at least 1"),
        ("journal.after_cycle:-2", "CPE_CRASH_AT: 'journal.after_cycle:-2': N must be at least 1"),
    ],
)
def test_a_malformed_cpe_crash_at_is_refused_with_the_form_expected(
    value: str, message: str
) -> None:
    """A typo must not silently run the crash suite without its crash."""
    with pytest.raises(ValueError, match=r"^CPE_CRASH_AT: ") as refused:
        _parse(value)
    assert str(refused.value) == message


def test_an_unknown_point_is_refused_with_the_list_of_known_ones() -> None:
    with pytest.raises(ValueError, match="unknown crashpoint") as refused:
        _parse("journal.after_commit:2")
    said = str(refused.value)
    assert said.startswith("CPE_CRASH_AT: unknown crashpoint 'journal.after_commit'; known: ")
    assert "journal.after_append, journal.after_cycle, session.before_terminal" in said
    assert "write.MergeRevision.before, write.MergeRevision.after" in said
    assert said.endswith("write.UpdateBranch.before, write.UpdateBranch.after")


# ---------------------------------------------------------------------------- crashpoint()


def test_an_unregistered_crashpoint_is_refused_even_when_nothing_is_set() -> None:
    """So that ``POINTS`` stays the complete list: a new point fails its first test run."""
    with pytest.raises(KeyError) as refused:
        crashpoint("journal.after_comit")
    assert refused.value.args == (
        "unregistered crashpoint 'journal.after_comit': "
        "add it to adapters.support.crashpoints.POINTS",
    )


CYCLE, APPEND = "journal.after_cycle", "journal.after_append"


@pytest.mark.parametrize(
    ("crash_at", "points", "survived", "nth"),
    [
        (
            "worktree.before_remove",
            [CYCLE, "worktree.before_remove", CYCLE],
            [CYCLE],
            1,
        ),
        (
            "journal.after_cycle:3",
            [CYCLE, APPEND, CYCLE, APPEND, CYCLE, APPEND],
            [CYCLE, APPEND, CYCLE, APPEND],
            3,
        ),
    ],
)
def test_cpe_crash_at_kills_the_process_at_that_hit_and_not_before(
    crash_at: str, points: list[str], survived: list[str], nth: int
) -> None:
    """SIGKILL, as ``kill -9``: the child's return code says so, and stderr says where. Here,
    unset, the same point does nothing."""
    crashpoint(points[-1])  # here, unset: nothing
    result = hit(*points, crash_at=crash_at)
    assert result.returncode == -signal.SIGKILL, result.stderr
    assert result.passed == survived
    point = crash_at.partition(":")[0]
    assert f"cpe: crashpoint {point} (hit {nth}): killing myself\n" in result.stderr


def test_a_crashpoint_not_reached_often_enough_lets_the_process_finish() -> None:
    crashpoint(APPEND)  # here, unset: nothing
    result = hit(APPEND, CYCLE, crash_at=f"{APPEND}:2")
    assert (result.returncode, result.passed) == (0, [APPEND, CYCLE])
    assert "crashpoint" not in result.stderr


def test_cpe_crash_trace_appends_every_hit_in_order(tmp_path: Path) -> None:
    """One line per hit, after what the file held: a test can prove a loop passes every point."""
    crashpoint("journal.after_append")  # here, unset: nothing
    trace = tmp_path / "trace"
    trace.write_text("earlier\n")
    points = ["journal.after_append", "write.ApplyPlan.before", "journal.after_append"]
    result = hit(*points, trace=trace)
    assert (result.returncode, result.passed) == (0, points), result.stderr
    assert trace.read_text().splitlines() == ["earlier", *points]


def test_the_trace_holds_the_hit_that_killed(tmp_path: Path) -> None:
    crashpoint("session.after_terminal")  # here, unset: nothing
    trace = tmp_path / "trace"
    points = ["session.after_terminal", "journal.after_cycle", "session.after_terminal"]
    result = hit(*points, "journal.after_cycle", crash_at="session.after_terminal:2", trace=trace)
    assert result.returncode == -signal.SIGKILL, result.stderr
    assert result.passed == points[:2]
    assert trace.read_text().splitlines() == points

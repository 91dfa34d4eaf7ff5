"""``cpe runs show SESSION --follow``: a live run's output from the running engine, as the
agent writes it (the control socket's ``follow``), then how the run ended."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from adapters.cli.actions import describe_run, journal_state, run_where
from adapters.control import NoEngine, exchange
from domain.models import AgentRun

END_WAIT = 30.0  # seconds to wait for the journal to record how a followed run ended


def follow_run(state_dir: Path, run: AgentRun) -> bool:
    """Stream ``run``'s output until it ends; False when no engine runs it (the caller shows
    the transcript instead)."""
    try:
        replies = iter(exchange(state_dir, {"follow": run.session_id}, 30, read_timeout=None))
        first = next(replies, None)
    except NoEngine:
        return False
    if first is None or not first.get("ok"):
        return False  # it ended meanwhile: its transcript has it all
    print("run " + " ".join(describe_run(run, run_where(state_dir, run.session_id)).split()))
    print(f"(following {run.session_id}: its output as it comes; Ctrl-C stops following)")
    sys.stdout.flush()
    try:
        _print_output(replies)
    except (TimeoutError, ConnectionError):
        print("(the engine went away; the run's transcript has the rest)")
        return True
    ended = _ended(state_dir, run)
    print(
        "run ended: " + " ".join(describe_run(ended, run_where(state_dir, run.session_id)).split())
    )
    if ended.failure_reason:
        print(f"  why: {' '.join(ended.failure_reason.split())}")
    return True


def _print_output(replies: Iterator[dict[str, Any]]) -> None:
    for reply in replies:
        output = reply.get("output")
        if isinstance(output, str):
            sys.stdout.write(output if output.endswith("\n") else output + "\n")
            sys.stdout.flush()
        elif reply.get("end"):
            return


def _ended(state_dir: Path, run: AgentRun) -> AgentRun:
    """The run as the journal records it once ended (its terminal event follows the end of
    its output by a moment)."""
    pause = threading.Event()  # never set: a bounded pause between two reads
    deadline = time.monotonic() + END_WAIT
    while True:
        latest = journal_state(state_dir).agent_runs.get(run.session_id, run)
        if latest.is_terminal or time.monotonic() > deadline:
            return latest
        pause.wait(0.1)

"""``cpe runs show SESSION --follow``: what a live run does as it does it, from its start (the
tool calls with their commands and paths, their results' first lines, the model's text, its
retries), then how the run ended.

The lines come from the run's transcript, followed as the file grows
(``adapters.runtime.artifacts.activity``), as plain ``runs show`` and the dashboard show them.
The running engine's ``follow`` stream (the control socket) is held open beside it only to
learn when the run ends or the engine goes away; a remote run's transcript comes back from its
node when it ends, so for one the stream's prose is what is shown meanwhile.
"""

from __future__ import annotations

import queue
import sys
import threading
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from adapters.cli.actions import describe_run, journal_state, run_where
from adapters.control import NoEngine, exchange
from adapters.runtime.artifacts.activity import TranscriptTail
from adapters.runtime.remote.placement import REMOTE_FILE
from domain.models import AgentRun

END_WAIT = 30.0  # seconds to wait for the journal to record how a followed run ended
POLL = 0.2  # seconds between two reads of a followed run's transcript


def follow_run(state_dir: Path, run: AgentRun) -> bool:
    """Show what ``run`` does until it ends; False when no engine runs it (the caller shows
    the transcript instead)."""
    try:
        replies = iter(exchange(state_dir, {"follow": run.session_id}, 30, read_timeout=None))
        first = next(replies, None)
    except NoEngine:
        return False
    if first is None or not first.get("ok"):
        return False  # it ended meanwhile: its transcript has it all
    print("run " + " ".join(describe_run(run, run_where(state_dir, run.session_id)).split()))
    print(f"(following {run.session_id}: what it does, from its start; Ctrl-C stops following)")
    sys.stdout.flush()
    engine = _EngineStream(replies)
    run_dir = state_dir / "runs" / run.session_id
    tail = TranscriptTail(run_dir)
    remote = False
    while True:
        remote = remote or (run_dir / REMOTE_FILE).exists()
        _print(engine.prose() if remote else tail.read())
        if tail.finished or engine.done.is_set():
            break
        engine.done.wait(POLL)
    if engine.lost and not tail.finished:
        if not remote:
            _print(tail.read())
        print("(the engine went away; the run's transcript has the rest)")
        return True
    ended = _ended(state_dir, run)
    _print(engine.prose() if remote else tail.read())  # what was written as it ended
    print(
        "run ended: " + " ".join(describe_run(ended, run_where(state_dir, run.session_id)).split())
    )
    if ended.failure_reason:
        print(f"  why: {' '.join(ended.failure_reason.split())}")
    return True


def _print(lines: Iterable[str]) -> None:
    for line in lines:
        sys.stdout.write(line if line.endswith("\n") else line + "\n")
    sys.stdout.flush()


class _EngineStream:
    """The engine's ``follow`` replies, read by a thread of its own: ``done`` once the run's
    output ended (or the engine went away: ``lost``); its prose kept for a remote run."""

    def __init__(self, replies: Iterator[dict[str, Any]]):
        self.done = threading.Event()
        self.lost = False
        self._prose: queue.SimpleQueue[str] = queue.SimpleQueue()
        threading.Thread(target=self._read, args=(replies,), daemon=True).start()

    def prose(self) -> list[str]:
        chunks = []
        while not self._prose.empty():
            chunks.append(self._prose.get_nowait())
        return chunks

    def _read(self, replies: Iterator[dict[str, Any]]) -> None:
        try:
            for reply in replies:
                output = reply.get("output")
                if isinstance(output, str):
                    self._prose.put(output)
                elif reply.get("end"):
                    return
            self.lost = True  # closed without saying the run ended
        except (OSError, ValueError):  # a reset, a timeout, a torn line
            self.lost = True
        finally:
            self.done.set()


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

"""``cpe runs list`` and ``cpe runs show SESSION [--follow]``, and a run's one line
(``describe_run``, ``run_where``) as ``cpe status``, ``cpe work show`` and the demo print it.

``--follow`` shows what a live run does as it does it, from its start (the tool calls with
their commands and paths, their results' first lines, the model's text, its retries), then how
the run ended. The lines come from the run's transcript, followed as the file grows
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
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from adapters.cli.common import fail, journal_state
from adapters.cli.repository import resolve_config
from adapters.describe.runs import describe_run, run_where
from adapters.runtime.artifacts.activity import TRANSCRIPT, TranscriptTail, run_activity
from adapters.runtime.remote.placement import REMOTE_FILE
from domain.errors import ConfigError
from domain.models import AgentRun, SessionId


def runs_list(config_path: Path | None, repo: Path | None, *, limit: int = 50) -> int:
    """The agent runs the journal holds, newest first, one line each (as cpe status shows
    them)."""
    try:
        config, root = resolve_config(config_path, repo)
    except ConfigError as exc:
        return fail(f"configuration error: {exc}")
    if limit < 0:
        return fail(f"--limit {limit}: expected a number of runs, 0 for all", 2)
    state_dir = root / config.engine.state_dir
    state = journal_state(state_dir)
    never = datetime.min.replace(tzinfo=UTC)
    runs = sorted(state.agent_runs.values(), key=lambda r: r.requested_at or never, reverse=True)
    shown = runs if limit == 0 else runs[:limit]
    if not shown:
        print("no agent runs yet")
        return 0
    now = datetime.now(UTC)
    for run in shown:
        print(describe_run(run, run_where(state_dir, run.session_id), now=now))
    if len(shown) < len(runs):
        print(f"({len(runs) - len(shown)} older runs: --limit 0 lists them all)")
    return 0


def runs_show(
    session_id: str, config_path: Path | None, repo: Path | None, *, follow: bool = False
) -> int:
    try:
        config, root = resolve_config(config_path, repo)
    except ConfigError as exc:
        return fail(f"configuration error: {exc}")
    state_dir = root / config.engine.state_dir
    if Path(session_id).name != session_id or session_id in ("", ".", ".."):
        return fail(f"{session_id!r} is not a session id; expected one cpe status lists", 1)
    run = journal_state(state_dir).agent_runs.get(SessionId(session_id))
    run_dir = state_dir / "runs" / session_id
    transcript = run_dir / "transcript.log"
    if run is not None and run.log_file_path:
        transcript = root / run.log_file_path  # absolute as journaled; else under the repo
    if run is None and not run_dir.is_dir() and not transcript.exists():
        return fail(
            f"unknown session {session_id!r}: no such agent run in {state_dir}; "
            "expected a session id that cpe status lists",
            1,
        )
    if follow and run is not None and run.is_active:
        if follow_run(state_dir, run):
            return 0
        run = journal_state(state_dir).agent_runs.get(SessionId(session_id), run)
    # What the run did, from its normalized transcript (as --follow and the dashboard show
    # it); a run from before those has its transcript.log only.
    activity = run_activity(run_dir)
    if activity is None and not transcript.is_file():
        why = "" if run is None else f" (the run is {run.status})"
        return fail(f"session {session_id}: no transcript at {run_dir / TRANSCRIPT}{why}", 1)
    if run is not None:
        print("run " + " ".join(describe_run(run, run_where(state_dir, session_id)).split()))
    if activity is None:
        print(transcript.read_text(encoding="utf-8", errors="replace"), end="")
        return 0
    for line in activity:
        print(line)
    if transcript.is_file():
        print(f"(with times and the runner's notes: {transcript})")
    return 0


# ------------------------------------------------------------------------- --follow

END_WAIT = 30.0  # seconds to wait for the journal to record how a followed run ended
POLL = 0.2  # seconds between two reads of a followed run's transcript


def follow_run(state_dir: Path, run: AgentRun) -> bool:
    """Show what ``run`` does until it ends; False when no engine runs it (the caller shows
    the transcript instead)."""
    # the control socket's client: cpe runs show --follow's own (cpe status imports this module)
    from adapters.host.control import NoEngine, exchange  # noqa: PLC0415

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

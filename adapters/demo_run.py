"""``cpe demo``: the whole loop, offline, on a generated sample repository.

A sample repository with a spec of two features (the second needing the first) and a test suite;
the engine with the local provider, the Claude SDK runtime and the real ``claude`` CLI, with the
scripted model standing in for the LLM. It shows progress as it goes and a timeline at the end,
and exits 0 only when both work items are done, the default branch holds both changes and its
tests pass; otherwise 1, saying what stalled and where.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TextIO

from actors.journal import Journal
from actors.logs import configure_logging
from adapters.app import build_app
from adapters.commands import describe_run, run_runtime
from domain.events import (
    AgentRequested,
    PlanApplied,
    ReviewPosted,
    RevisionCreated,
    RevisionMerged,
    RevisionUpdated,
    StatusTransitioned,
)
from domain.models import EngineState

STALL_SECONDS = 600
TEST_COMMAND = ["python3", "-m", "unittest", "discover", "-s", "tests", "-t", "."]


class Progress:
    """Prints what changed, on every state change the engine publishes."""

    def __init__(self, out: TextIO):
        self.out = out
        self.started = time.monotonic()
        self.previous = EngineState()
        self.lock = threading.Lock()
        self.finished = threading.Event()

    def __call__(self, state: EngineState) -> None:
        with self.lock:
            before, self.previous = self.previous, state
            for wid, item in state.work_items.items():
                old = before.work_items.get(wid)
                if old is None or old.status != item.status:
                    was = f"{old.status} → " if old else "new, "
                    self.say(f"work item #{wid} {item.title!r}: {was}{item.status}")
            for sid, run in state.agent_runs.items():
                old_run = before.agent_runs.get(sid)
                if old_run is None or old_run.status != run.status:
                    self.say(f"{run.role} {run.status} ({run.subject}) {run.outcome or ''}")
            for rid, rev in state.revisions.items():
                old_rev = before.revisions.get(rid)
                if (
                    old_rev is None
                    or old_rev.pipeline != rev.pipeline
                    or old_rev.state != rev.state
                ):
                    self.say(f"revision {rid}: {rev.state}, pipeline {rev.pipeline.status}")
            items = state.work_items.values()
            if len(state.work_items) >= 2 and all(i.status == "done" for i in items):
                self.finished.set()

    def say(self, text: str) -> None:
        print(f"  {time.monotonic() - self.started:6.1f}s  {text}", file=self.out, flush=True)


def demo(
    directory: Path | None,
    out: TextIO = sys.stdout,
    roles: Mapping[str, str] | None = None,
) -> int:
    """The demo; ``roles`` runs some roles on another runtime (``{"implementor": "codex-cli"}``:
    the real ``codex`` from PATH, against the same scripted model's Responses API)."""
    from adapters.demo.book import demo_book  # noqa: PLC0415
    from adapters.demo.sample import create_sample_repo  # noqa: PLC0415
    from adapters.runtime.scripted_model import ScriptedModelServer  # noqa: PLC0415
    from adapters.runtime.scripted_model.responses_wire import codex_overrides  # noqa: PLC0415

    roles = dict(roles or {})
    if "codex-cli" in roles.values() and shutil.which("codex") is None:
        print(
            "cpe demo: the codex CLI is not on PATH (npm install -g @openai/codex, or "
            "npm ci --prefix tests/tools and add tests/tools/node_modules/.bin to PATH)",
            file=out,
        )
        return 2
    base = directory or Path(tempfile.mkdtemp(prefix="cpe-demo-"))
    base.mkdir(parents=True, exist_ok=True)
    repo = create_sample_repo(base / "sample", roles)
    if roles:
        print("cpe demo: " + ", ".join(f"{r} on {k}" for r, k in sorted(roles.items())), file=out)
    print(f"cpe demo: sample repository {repo}", file=out)
    log_file = (repo / ".cpe").resolve()
    log_file.mkdir(parents=True, exist_ok=True)
    with (log_file / "cpe.log").open("a") as log_stream:
        configure_logging("info", "json", log_stream)
        with ScriptedModelServer(demo_book()) as server:
            app = build_app(
                repo / "supervisor.toml",
                repo,
                agent_env=server.client_env(),
                isolated_home=True,
                codex_overrides=codex_overrides(server.base_url),
            )
            progress = Progress(out)
            app.engine.subscribe(progress)
            try:
                app.engine.start()
                done = progress.finished.wait(STALL_SECONDS)
            finally:
                app.engine.stop(reason="demo finished")
                app.close()
    ok, verdict = _verify(repo, app.state_dir, done)
    _timeline(app.state_dir, out)
    print(f"\ntranscripts: {app.state_dir / 'runs'}/<session>/transcript.log", file=out)
    print(f"logs: {log_file / 'cpe.log'}", file=out)
    print(("cpe demo: OK — " if ok else "cpe demo: FAILED — ") + verdict, file=out)
    return 0 if ok else 1


def _verify(repo: Path, state_dir: Path, finished: bool) -> tuple[bool, str]:
    journal = Journal(state_dir / "journal.sqlite3")
    try:
        state = journal.replay()
    finally:
        journal.close()
    if not finished:
        stuck = [f"#{i.id} {i.status}" for i in state.work_items.values() if i.status != "done"]
        return False, f"stalled after {STALL_SECONDS}s: {', '.join(stuck) or 'no work items'}"
    tests = subprocess.run(
        TEST_COMMAND, cwd=repo, capture_output=True, text=True, timeout=300, check=False
    )
    if tests.returncode != 0:
        return False, f"the default branch's tests fail:\n{tests.stdout}{tests.stderr}"
    merged = sum(1 for r in state.revisions.values() if r.state == "merged")
    return True, f"{len(state.work_items)} work items done, {merged} revisions merged, tests pass"


def _timeline(state_dir: Path, out: TextIO) -> None:
    journal = Journal(state_dir / "journal.sqlite3")
    try:
        entries = list(journal.entries())
        state = journal.replay()
    finally:
        journal.close()
    if not entries:
        return
    start = entries[0].at
    print("\ntimeline", file=out)
    for entry in entries:
        event = entry.event
        text = None
        if isinstance(event, AgentRequested):
            text = f"{event.params.role} run requested ({event.session_id})"
        elif isinstance(event, PlanApplied):
            text = f"plan applied: work items {', '.join(event.created_ids) or 'none'} created"
        elif isinstance(event, RevisionCreated | RevisionUpdated):
            verb = "created" if isinstance(event, RevisionCreated) else "updated"
            text = f"revision {event.revision.id} {verb} for #{event.work_item_id}"
        elif isinstance(event, ReviewPosted):
            text = f"review posted on {event.revision_id}: {event.verdict}"
        elif isinstance(event, RevisionMerged):
            text = f"revision {event.revision_id} merged"
        elif isinstance(event, StatusTransitioned):
            text = f"#{event.work_item_id} → {event.to}"
        if text:
            print(f"  {entry.at - start:6.1f}s  {text}", file=out)
    print("\nagent runs", file=out)
    for run in state.agent_runs.values():
        print("  " + describe_run(run, run_runtime(state_dir, run.session_id)), file=out)

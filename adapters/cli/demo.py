"""``cpe demo``: the whole loop, offline, on a generated sample repository.

A sample repository with a spec of two features (the second needing the first) and a test suite;
the engine with the local provider, the Claude SDK runtime and the real ``claude`` CLI, with the
scripted model standing in for the LLM. It shows progress as it goes and a timeline at the end,
and exits 0 only when both work items are done, the default branch holds both changes and its
tests pass; otherwise 1, saying what stalled and where.
"""

from __future__ import annotations

import contextlib
import functools
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, ParamSpec, TextIO, cast

from actors.journal import Journal
from actors.logs import configure_logging
from actors.process import EXIT_CONFIG
from actors.services import Services
from adapters.cli.build import App, build_app
from adapters.cli.services import dashboard_settings
from adapters.demo.sample import DEFAULT_BRANCH
from adapters.describe.runs import describe_run, run_where
from domain.errors import ConfigError
from domain.events import (
    AgentRequested,
    PlanApplied,
    ReviewPosted,
    RevisionCreated,
    RevisionMerged,
    RevisionUpdated,
    StatusTransitioned,
)
from domain.models import EngineState, item_ref

if TYPE_CHECKING:
    from adapters.dashboard.server import Listener
    from adapters.scripted_model import Scenario

MAX_SECONDS = 480  # the whole loop takes about 15 s here; this is for a very slow machine
IDLE_SECONDS = 180  # nothing changed for this long while nothing ran: it will not finish
TEST_COMMAND = ["python3", "-m", "unittest", "discover", "-s", "tests", "-t", "."]
# What each of the two work items adds to the default branch: file → what it must contain.
FEATURES = {
    "greetings/greet.py": ("def greet(", "def greet_all("),
    "tests/test_greet.py": ("greet",),
    "tests/test_greet_all.py": ("greet_all",),
}


class Progress:
    """Prints what changed, on every state change the engine publishes."""

    def __init__(self, out: TextIO):
        self.out = out
        self.started = time.monotonic()
        self.previous = EngineState()
        self.lock = threading.Lock()
        self.changed = threading.Condition(self.lock)
        self.finished = threading.Event()
        self.last_change = time.monotonic()

    def __call__(self, state: EngineState) -> None:
        with self.lock:
            before, self.previous = self.previous, state
            self.last_change = time.monotonic()
            self.changed.notify_all()
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

    def wait(self) -> str | None:
        """Wait until both items are done (None) or the loop cannot get there: why not."""
        deadline = self.started + MAX_SECONDS
        with self.changed:
            while not self.finished.is_set():
                state, now = self.previous, time.monotonic()
                blocked = [i for i in state.work_items.values() if i.status == "blocked"]
                if blocked:  # only a person takes an item out of blocked
                    return "a work item is blocked"
                running = any(r.is_active for r in state.agent_runs.values())
                if not running and now - self.last_change > IDLE_SECONDS:
                    return f"nothing happened for {IDLE_SECONDS} s"
                if now > deadline:
                    return f"not done after {MAX_SECONDS} s"
                self.changed.wait(min(5.0, deadline - now + 0.1))
        return None


EXIT_INTERRUPTED = 130  # 128 + SIGINT, as a shell reports a command Ctrl-C ended

_P = ParamSpec("_P")


def _interruptible(demo: Callable[_P, int]) -> Callable[_P, int]:
    """Ctrl-C while the demo runs stops it (the engine stops its runs on the way out) with one
    line on its ``out`` and exit 130, not a traceback."""

    @functools.wraps(demo)
    def run(*args: _P.args, **kwargs: _P.kwargs) -> int:
        previous = None
        if threading.current_thread() is threading.main_thread():
            # Ctrl-C stops it even when it was started ignoring SIGINT (a script's `&` does
            # that), as it stops cpe run, which sets its own handlers
            previous = signal.signal(signal.SIGINT, signal.default_int_handler)
        try:
            return demo(*args, **kwargs)
        except KeyboardInterrupt:
            out = cast(TextIO, kwargs.get("out", args[1] if len(args) > 1 else sys.stdout))
            print("\ncpe demo: interrupted (Ctrl-C); its runs were stopped", file=out, flush=True)
            return EXIT_INTERRUPTED
        finally:
            if previous is not None:
                signal.signal(signal.SIGINT, previous)

    return run


@_interruptible
def demo(
    directory: Path | None,
    out: TextIO = sys.stdout,
    roles: Mapping[str, str] | None = None,
    book: Sequence[Scenario] | None = None,
    serve: str | None = None,
    *,
    remote: str | None = None,
    serve_fallback: bool = False,
) -> int:
    """The demo; ``roles`` runs some roles on another runtime (``{"implementor": "codex-cli"}``:
    the real ``codex`` from PATH, against the same scripted model's Responses API). ``book``
    replaces the scripted model's scenarios (a test plays a loop that cannot finish).
    ``serve`` (HOST:PORT): the dashboard serves the demo as it runs, then its finished state
    until Ctrl-C or SIGTERM (it only shows: no action); bound before anything is made, an
    address that cannot be used is one line and exit 78, except that with ``serve_fallback``
    (the default address, no ``--listen``) one in use gives way to a free port, the URL printed
    being the real one. ``remote="ray"``: a local Ray cluster
    (a head and a worker node with ``agent_slot``) is started, the implementors run on the
    worker node (docs/remote.md), and the cluster is stopped at the end."""
    from adapters.demo.book import demo_book  # noqa: PLC0415
    from adapters.scripted_model import ScriptedModelServer  # noqa: PLC0415
    from adapters.scripted_model.responses_wire import codex_overrides  # noqa: PLC0415

    roles = dict(roles or {})
    if "codex-cli" in roles.values() and shutil.which("codex") is None:
        print(
            "cpe demo: the codex CLI is not on PATH (npm install -g @openai/codex, or "
            "npm ci --prefix tests/tools and add tests/tools/node_modules/.bin to PATH)",
            file=out,
        )
        return 2
    try:  # first: an address that cannot be used stops the demo before it made anything
        listener = _listen(serve, serve_fallback) if serve else None
    except ConfigError as exc:
        print(f"cpe demo: configuration error: {exc}", file=out)
        return EXIT_CONFIG
    made = _sample(directory, roles, out)
    if made is None:
        if listener is not None:
            listener.close()
        return 2
    base, repo = made
    if roles:
        print("cpe demo: " + ", ".join(f"{r} on {k}" for r, k in sorted(roles.items())), file=out)
    print(f"cpe demo: sample repository {repo}", file=out)
    log_file = (repo / ".cpe").resolve()
    log_file.mkdir(parents=True, exist_ok=True)
    with contextlib.ExitStack() as stack:  # the log stays open while the dashboard serves
        if listener is not None:
            stack.callback(listener.close)  # the socket, when no serve took it
        log_stream = stack.enter_context((log_file / "cpe.log").open("a"))
        configure_logging("info", "json", log_stream)
        if remote == "ray":
            try:
                _remote_cluster(stack, repo, base, out)
            except (ImportError, RuntimeError, OSError) as exc:
                print(f"cpe demo: cannot start a local Ray cluster: {exc}", file=out)
                return EXIT_CONFIG
        with ScriptedModelServer(book or demo_book()) as server:
            try:
                app = build_app(
                    repo / "supervisor.toml",
                    repo,
                    agent_env=server.client_env(),
                    isolated_home=True,
                    codex_overrides=codex_overrides(server.base_url),
                )
            except ConfigError as exc:
                print(f"cpe demo: configuration error: {exc}", file=out)
                return EXIT_CONFIG
            progress = Progress(out)
            app.engine.subscribe(progress)
            if listener is not None:
                stack.callback(_serve(app, listener, out).stop)
            try:
                app.engine.start()
                stalled = progress.wait()
            finally:
                app.engine.stop(reason="demo finished")
                app.close()
        ok = _report(repo, app.state_dir, log_file / "cpe.log", stalled, out)
        if serve:
            _until_stopped(out)
    return 0 if ok else 1


def _sample(directory: Path | None, roles: dict[str, str], out: TextIO) -> tuple[Path, Path] | None:
    """The directory of the demo and its new sample repository; None once it said why not."""
    from adapters.demo.sample import SampleRepoError, create_sample_repo  # noqa: PLC0415

    base = directory or Path(tempfile.mkdtemp(prefix="cpe-demo-"))
    sample = base / "sample"
    if (base.exists() and not base.is_dir()) or sample.exists():
        taken = sample if base.is_dir() else base
        print(
            f"cpe demo: {taken} exists; --dir needs a directory without a sample/ in it", file=out
        )
        return None
    try:
        base.mkdir(parents=True, exist_ok=True)
        return base, create_sample_repo(sample, roles)
    except (OSError, SampleRepoError) as exc:
        print(f"cpe demo: cannot create the sample repository: {exc}", file=out)
        return None


def _remote_cluster(stack: contextlib.ExitStack, repo: Path, base: Path, out: TextIO) -> None:
    """A head and a worker node (``agent_slot = 1``, only it), the sample's implementors sent
    there; the cluster is stopped (every process of it killed) when ``stack`` closes."""
    from adapters.runtime.remote.cluster import RayCluster  # noqa: PLC0415

    cluster = RayCluster()
    stack.callback(cluster.stop)
    cluster.start_head()
    cluster.add_node({"agent_slot": 1})
    stack.callback(_ray_shutdown)  # the demo leaves the cluster before it is stopped
    section = (
        "\n[runtime.remote]\n"
        'kind = "ray"\n'
        f'address = "{cluster.address}"\n'
        "resources = { agent_slot = 1 }\n"
        f'node_dir = "{base / "nodes"}"\n'
        "[runtime.remote.roles]\n"
        "implementor = true\n"
    )
    with (repo / "supervisor.toml").open("a") as config:
        config.write(section)
    print(f"cpe demo: implementors on a local Ray cluster ({cluster.address})", file=out)


def _ray_shutdown() -> None:
    import ray  # noqa: PLC0415

    ray.shutdown()


def _report(repo: Path, state_dir: Path, log: Path, stalled: str | None, out: TextIO) -> bool:
    ok, verdict = _verify(repo, state_dir, stalled)
    _timeline(state_dir, out)
    print(f"\ntranscripts: {state_dir / 'runs'}/<session>/transcript.log", file=out)
    print(f"logs: {log}", file=out)
    print(("cpe demo: OK — " if ok else "cpe demo: FAILED — ") + verdict, file=out)
    return ok


def _listen(serve: str, fallback: bool) -> Listener:
    """The dashboard's address, bound; a ``ConfigError`` naming it when it cannot be used."""
    from adapters.dashboard.server import Listener  # noqa: PLC0415

    listener = Listener(
        serve, fallback=fallback, way_out="pass --listen HOST:PORT (port 0: any free one)"
    )
    with contextlib.suppress(OSError):  # another failure: the server tries again, restarted
        listener.bind()
    return listener


def _serve(app: App, listener: Listener, out: TextIO) -> Services:
    """The dashboard over the demo's engine, read only, from before it starts."""
    from adapters.dashboard.server import DashboardServer  # noqa: PLC0415
    from adapters.dashboard.source import Source  # noqa: PLC0415

    source = Source(
        app.engine,
        dashboard_settings(app.config),
        app.state_dir,
        control=None,
        meter=app.meter,
        title=f"demo {app.repo}",
    )
    services = Services(app.config.supervisor)
    said = threading.Event()

    def listening(server: DashboardServer) -> None:
        if not said.is_set():
            said.set()
            print(f"cpe demo: dashboard on {server.url}", file=out, flush=True)

    if listener.moved_from is not None:
        print(
            f"cpe demo: {listener.moved_from} is in use; the dashboard took a free port",
            file=out,
            flush=True,
        )
    if listener.url is not None:  # bound: the address it listens on (connections wait)
        said.set()
        print(f"cpe demo: dashboard on {listener.url}", file=out, flush=True)
    services.start(
        "dashboard", lambda: DashboardServer(source, listener, None, on_listening=listening)
    )
    return services


def _until_stopped(out: TextIO) -> None:
    """Serve the finished demo until SIGINT (Ctrl-C) or SIGTERM."""
    stop = threading.Event()

    def handler(signum: int, frame: object) -> None:
        stop.set()

    previous = {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM)}
    print("cpe demo: the dashboard shows the finished demo; Ctrl-C stops it", file=out, flush=True)
    try:
        stop.wait()
    finally:
        for signum, old in previous.items():
            signal.signal(signum, old)


def _verify(repo: Path, state_dir: Path, stalled: str | None) -> tuple[bool, str]:
    journal = Journal(state_dir / "journal.sqlite3")
    try:
        state = journal.replay()
    finally:
        journal.close()
    if stalled is not None:
        return False, f"stalled ({stalled}):\n" + _where(state, state_dir)
    missing = _missing_features(repo)
    if missing:
        return False, f"the default branch lacks the changes: {'; '.join(missing)}"
    tests = _test_default_branch(repo)
    if tests.returncode != 0:
        return False, f"the default branch's tests fail:\n{tests.stdout}{tests.stderr}"
    merged = sum(1 for r in state.revisions.values() if r.state == "merged")
    return True, f"{len(state.work_items)} work items done, {merged} revisions merged, tests pass"


def _test_default_branch(repo: Path) -> subprocess.CompletedProcess[str]:
    """The sample's tests on a fresh checkout of the default branch (not the user's checkout,
    which could differ from it), in a throwaway worktree."""
    with tempfile.TemporaryDirectory(prefix="cpe-demo-check-") as tmp:
        checkout = Path(tmp) / "main"
        git = ["git", "-C", str(repo)]
        subprocess.run(
            [*git, "worktree", "add", "--detach", str(checkout), DEFAULT_BRANCH],
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
        )
        try:
            return subprocess.run(
                TEST_COMMAND, cwd=checkout, capture_output=True, text=True, timeout=300, check=False
            )
        finally:
            subprocess.run(
                [*git, "worktree", "remove", "--force", str(checkout)],
                capture_output=True,
                timeout=120,
                check=False,
            )


def _missing_features(repo: Path) -> list[str]:
    """What of the two features the default branch (not just the checkout) does not hold."""
    missing = []
    for path, needles in FEATURES.items():
        shown = subprocess.run(
            ["git", "-C", str(repo), "show", f"{DEFAULT_BRANCH}:{path}"],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        if shown.returncode != 0:
            missing.append(f"{path} does not exist")
            continue
        missing += [f"{path} has no {n!r}" for n in needles if n not in shown.stdout]
    return missing


def _where(state: EngineState, state_dir: Path) -> str:
    """Each unfinished item, its status and its last agent run, with that run's transcript."""
    lines = []
    for item in state.work_items.values():
        if item.status == "done":
            continue
        lines.append(f"  work item #{item.id} {item.title!r} is {item.status}")
        runs = [
            r for r in state.agent_runs.values() if r.role != "planner" and r.subject == item.id
        ]
        if runs:
            last = runs[-1]
            why = last.outcome or last.failure_reason or last.status
            lines.append(f"    last run {last.session_id} ({last.role}): {last.status}, {why}")
            lines.append(f"    transcript {state_dir / 'runs' / last.session_id}/transcript.log")
    if not state.work_items:
        lines.append("  no work items: the planner never delivered a plan")
        planners = [r for r in state.agent_runs.values() if r.role == "planner"]
        for run in planners[-1:]:
            why = run.failure_reason or run.outcome or run.status
            lines.append(f"    last planner run {run.session_id}: {run.status}, {why}")
    return "\n".join(lines)


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
            text = f"{item_ref(event.work_item_id)} → {event.to}"
        if text:
            print(f"  {entry.at - start:6.1f}s  {text}", file=out)
    print("\nagent runs (costs simulated: the scripted model reports made-up usage)", file=out)
    for run in state.agent_runs.values():
        print("  " + describe_run(run, run_where(state_dir, run.session_id)), file=out)

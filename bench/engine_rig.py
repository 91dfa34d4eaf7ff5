"""What ``bench_concurrency.py`` and ``bench_soak.py`` share: the real engine on the in-memory
provider, every role on one real runtime (the real ``claude`` or ``codex`` CLI) against the
scripted model, waves of implementor runs through it, and samplers for memory, descriptors and
the engine's ping latency.

A wave adds work items to the provider and asks the engine to poll: the engine dispatches an
implementor for each (queue → handlers → executor → a session actor → the runtime), each run
writes a module and its test in its own worktree, runs the tests twice and returns its patch,
and the engine turns the patch into a revision. The wave has ended when every item has left
``pending`` and ``in-progress`` with no run active. Reviewers are off (their limit is 0), so a
wave is its implementors only; one attempt per item, so a run that fails is counted once.
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from actors.config import EngineConfig, PollerSettings  # noqa: E402
from actors.engine import Engine, create_engine  # noqa: E402
from adapters.runtime.claude.cli_runner import create_claude_cli_runtime  # noqa: E402
from adapters.runtime.claude.sdk import ClaudeAdapterConfig, create_claude_adapter  # noqa: E402
from adapters.runtime.cli.cli_runtime import CliRuntimeConfig  # noqa: E402
from adapters.runtime.codex.runner import create_codex_runtime  # noqa: E402
from adapters.scripted_model.responses_wire import codex_overrides  # noqa: E402
from domain.handlers.options import HandlerOptions  # noqa: E402
from domain.models import AgentRole, EngineState, WorkItemId  # noqa: E402
from domain.ports import RuntimeAdapter, RuntimeAdapterDeps, SessionLogging  # noqa: E402
from tests.fakes.provider import FakeTracker, fake_provider  # noqa: E402

RUNTIMES = ("claude-sdk", "claude-cli", "codex-cli")
# How each runtime reports a CLI that never started (ETXTBSY among them).
START_FAILURE = re.compile(r"failed to start|could not start|text file busy", re.IGNORECASE)
MIB = 1024 * 1024


def scratch() -> tempfile.TemporaryDirectory[str]:
    """The bench's working directory. Not under the system's temporary directory where
    ``/var/tmp`` exists: with bubblewrap installed, codex refuses to create its sandbox helper
    in a ``CODEX_HOME`` under the temporary directory, and every command its agent runs then
    fails. The runs' homes live in this directory."""
    base = "/var/tmp" if os.access("/var/tmp", os.W_OK) else None
    return tempfile.TemporaryDirectory(prefix="cpe-bench-", dir=base)


@dataclass(frozen=True)
class Model:
    """Where the scripted model answers, and the environment that points a CLI at it."""

    base_url: str
    client_env: dict[str, str]


_SERVE = """
import json, sys
from adapters.scripted_model import ScriptedModelServer, load_scenario
with ScriptedModelServer([load_scenario("implement")]) as server:
    print(json.dumps({"base_url": server.base_url, "env": server.client_env()}), flush=True)
    sys.stdin.read()
"""


@contextlib.contextmanager
def scripted_model() -> Iterator[Model]:
    """The scripted model, playing the implement scenario, in a process of its own: it keeps a
    record of every request, which in this process would pass for the orchestrator's growth."""
    server = subprocess.Popen(
        [sys.executable, "-c", _SERVE],
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert server.stdin is not None
    assert server.stdout is not None
    try:
        ready = json.loads(server.stdout.readline())
        yield Model(base_url=ready["base_url"], client_env=ready["env"])
    finally:
        server.stdin.close()  # the end of its input is its signal to stop
        server.wait(60)


def codex_cli() -> str | None:
    local = ROOT / "tests" / "tools" / "node_modules" / ".bin" / "codex"
    return str(local) if local.is_file() else shutil.which("codex")


def sample_repo(base: Path) -> Path:
    """A repository with this project's agent definitions and one commit."""
    repo = base / "repo"
    repo.mkdir()

    def git(*args: str) -> None:
        subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True)

    git("init", "-q", "-b", "main")
    git("config", "user.email", "bench@example.com")
    git("config", "user.name", "bench")
    shutil.copytree(ROOT / ".claude", repo / ".claude")
    (repo / "README.md").write_text("# sample\n")
    git("add", "-A")
    git("commit", "-q", "-m", "init")
    return repo


def runtime_factory(
    kind: str, repo: Path, state_dir: Path, model: Model
) -> Callable[[RuntimeAdapterDeps], Mapping[AgentRole, RuntimeAdapter]]:
    """Every role on ``kind``, its CLI pointed at the scripted model, a throwaway HOME per run."""
    config = ClaudeAdapterConfig(
        repo_root=str(repo),
        default_branch="main",
        max_agent_duration=900,
        logging=SessionLogging(logs_dir=str(state_dir / "runs")),
        agent_env=model.client_env,
        isolated_home=True,
    )
    shared = config.model_dump(
        include={
            "repo_root",
            "default_branch",
            "max_agent_duration",
            "logging",
            "agent_env",
            "isolated_home",
        }
    )

    def factory(deps: RuntimeAdapterDeps) -> Mapping[AgentRole, RuntimeAdapter]:
        adapter: Any
        if kind == "claude-sdk":
            adapter = create_claude_adapter(config, deps)
        elif kind == "claude-cli":
            adapter = create_claude_cli_runtime(CliRuntimeConfig(**shared), deps)
        else:
            codex = codex_cli()
            assert codex is not None, "no codex: npm ci --prefix tests/tools"
            overrides = codex_overrides(model.base_url)
            adapter = create_codex_runtime(
                CliRuntimeConfig(**shared), deps, cli_path=codex, overrides=overrides
            )
        return {"planner": adapter, "implementor": adapter, "reviewer": adapter}

    return factory


@dataclass
class Wave:
    sessions: int
    wall: float
    completed: int
    failed: int
    start_failures: int
    reasons: list[str]


@dataclass
class Rig:
    """One engine on one runtime; ``wave(n)`` runs ``n`` implementors at once through it."""

    engine: Engine
    tracker: FakeTracker
    next_item: int = 1

    @classmethod
    def start(cls, kind: str, base: Path, model: Model, max_concurrent: int) -> Rig:
        repo = sample_repo(base)
        state_dir = base / "state"
        state_dir.mkdir()
        tracker, provider = fake_provider()
        off = PollerSettings(poll_interval=0)  # a wave asks for its poll (refresh)
        engine = create_engine(
            EngineConfig(
                provider=provider,
                create_runtime_adapters=runtime_factory(kind, repo, state_dir, model),
                journal_path=str(state_dir / "journal.sqlite3"),
                work_item_poller=off,
                revision_poller=off,
                spec_poller=off,
                handlers=HandlerOptions(
                    max_attempts=1,
                    max_concurrent={"planner": 0, "implementor": max_concurrent, "reviewer": 0},
                ),
                max_agent_duration=900,
                log_level="error",
            )
        )
        engine.start()
        return cls(engine, tracker)

    def wave(self, sessions: int, timeout: float = 1800) -> Wave:
        ids = [str(i) for i in range(self.next_item, self.next_item + sessions)]
        self.next_item += sessions
        for wid in ids:
            self.tracker.add_item(wid, "pending", title=f"Greeting {wid}", body="Add greet(name).")
        began = time.perf_counter()
        self.engine.refresh()
        state = _wait(self.engine, lambda s: _settled(s, ids), timeout)
        wall = time.perf_counter() - began
        runs = [r for r in state.agent_runs.values() if r.params.work_item_id in ids]
        reasons = [r.failure_reason or r.status for r in runs if r.status != "completed"]
        return Wave(
            sessions=sessions,
            wall=wall,
            completed=sum(r.status == "completed" for r in runs),
            failed=len(reasons),
            start_failures=sum(bool(START_FAILURE.search(reason)) for reason in reasons),
            reasons=reasons,
        )

    def stop(self) -> None:
        self.engine.stop()


def _settled(state: EngineState, ids: list[str]) -> bool:
    for wid in ids:
        item = state.work_items.get(WorkItemId(wid))
        if item is None or item.status in ("pending", "in-progress"):
            return False
    active = ("requested", "running")
    return not any(
        r.params.work_item_id in ids and r.status in active for r in state.agent_runs.values()
    )


def _wait(engine: Engine, done: Callable[[EngineState], bool], timeout: float) -> EngineState:
    pause = threading.Event()  # never set: a bounded pause between looks
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        state = engine.get_state()
        if done(state):
            return state
        pause.wait(0.1)
    raise TimeoutError(f"the wave did not end within {timeout:g}s")


# ---------------------------------------------------------------------- measurements


def own_rss() -> int:
    """This process's resident memory after a collection, in bytes."""
    gc.collect()
    return int(psutil.Process().memory_info().rss)


def own_fds() -> int:
    return int(psutil.Process().num_fds())


def tree_rss() -> int:
    """The resident memory of this process and every descendant, summed (pages shared between
    processes count once per process, as ``ps`` shows them)."""
    me = psutil.Process()
    total = 0
    for process in [me, *me.children(recursive=True)]:
        try:
            total += process.memory_info().rss
        except psutil.Error:
            continue
    return total


@dataclass
class Sampler:
    """While running: the peak resident memory of the whole process tree, every ``interval``
    seconds, and the engine's answer time to a ping, one ping after another."""

    engine: Engine
    interval: float = 0.5
    peak_tree: int = 0
    pings: list[float] = field(default_factory=list)
    missed_pings: int = 0
    _stop: threading.Event = field(default_factory=threading.Event)
    _threads: list[threading.Thread] = field(default_factory=list)

    def __enter__(self) -> Sampler:
        for target in (self._sample_memory, self._ping):
            thread = threading.Thread(target=target, daemon=True)
            thread.start()
            self._threads.append(thread)
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=60)

    def _sample_memory(self) -> None:
        while not self._stop.is_set():
            self.peak_tree = max(self.peak_tree, tree_rss())
            self._stop.wait(self.interval)

    def _ping(self) -> None:
        while not self._stop.is_set():
            began = time.perf_counter()
            if self.engine.ping().wait(30):
                self.pings.append(time.perf_counter() - began)
            else:
                self.missed_pings += 1
            self._stop.wait(0.05)

    def ping_ms(self, quantile: float) -> float:
        if not self.pings:
            return float("nan")
        ordered = sorted(self.pings)
        if quantile == 0.5:
            return statistics.median(ordered) * 1000
        return ordered[min(len(ordered) - 1, int(len(ordered) * quantile))] * 1000

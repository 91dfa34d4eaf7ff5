"""What every runtime does around an agent run, written once: the run table, the start (the
workspace, the sandbox, the deadline), cancel, the startup reaper and the output stream.

``claude/sdk.py`` (the Claude Agent SDK) and ``cli/cli_runtime.py`` (the ``claude -p`` and
``codex exec`` runners) are ``AgentRuntime`` subclasses that keep only what is their own: how
a run starts once its workspace and sandbox exist (``_begin``), how it is driven to its result
(``_drive``), how it is stopped (``_cancel``, ``_kill``) and where its pid files are
(``_pidfiles``, ``_kill_group``).

The agent runtime base owns the run's duration limit, ``max_agent_duration``. It counts from
``start_agent`` (the worktree's setup included), cancels a start that outlasts it, and once the
agent runs has the runtime kill its process group (``_kill``); the runtime then reports the
timeout once, as ``timed_out()`` says. The session's own deadline
(``actors/session_actor.py``) comes a cancel grace later: a safety net for a runtime that does
not end, never a second report.
"""

from __future__ import annotations

import asyncio
import threading
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, Self, TypeVar

import anyio
import structlog
from pydantic import Field

from adapters.bash_guard import BashGuardConfig
from adapters.runtime.pricing import DEFAULT_PRICES, ModelPrice
from adapters.runtime.process.launcher import live_group
from adapters.runtime.prompt.agents import AgentSpec
from adapters.runtime.sandbox import RunSandbox, Sandbox
from adapters.runtime.sandbox.runs import NOT_CONFIGURED, open_sandbox, sweep
from adapters.runtime.workspace.provision import Provisioned, Provisioner
from adapters.runtime.workspace.worktrees import Worktree
from domain.errors import AgentFailure
from domain.models import AgentStartParams, RunUsage, SessionId
from domain.ports import AgentRunHandle, RuntimeAdapterConfig, RuntimeAdapterDeps
from domain.results import AgentResult

log = structlog.get_logger("cpe.runtime")


class AgentRuntimeConfig(RuntimeAdapterConfig):
    """What every runtime's config says: the workspace, the agent's environment and model, the
    limits of a run, the Bash guard and the sandbox."""

    repo_root: str
    default_branch: str
    context_paths: tuple[str, ...] = (".claude/CLAUDE.md",)
    setup_command: str = ""
    setup_timeout: float = Field(default=600, gt=0)
    # The other workspace hooks: name (before_run, after_run, before_remove) → (command, timeout)
    hooks: dict[str, tuple[str, float]] = Field(default_factory=dict)
    model: str | None = None
    models: dict[str, str] = Field(default_factory=dict, description="per role; wins over model")
    model_variables: tuple[str, ...] | None = Field(
        default=None, description="the model credentials passed to the agent; None: its vendor's"
    )
    agent_env: Mapping[str, str] = Field(default_factory=dict, description="added on purpose")
    isolated_home: bool = Field(
        default=False, description="a throwaway HOME per run (no login in it: use an API key)"
    )
    idle_timeout: float | None = Field(default=None, gt=0)
    max_budget_usd: float | None = Field(default=None, gt=0, description="per run; None: none")
    repeat_limit: int | None = Field(
        default=None, ge=2, description="the same tool call this many times in a row: stopped"
    )
    unchanged_limit: int | None = Field(
        default=None, ge=1, description="an implementor's tool calls changing nothing: stopped"
    )
    bash_guard: BashGuardConfig = BashGuardConfig()
    # USD per million tokens by model: prices a run that ended without a cost (stopped before
    # the CLI reported it, or a runner that reports tokens only, codex)
    prices: dict[str, ModelPrice] = Field(default_factory=lambda: dict(DEFAULT_PRICES))
    sandbox: Sandbox | None = Field(default=None, description="the agent's commands run in it")
    sandbox_missing: str = Field(default=NOT_CONFIGURED, description="why there is no sandbox")
    # A remote run's node: the prompt and agent definition its head assembled, used as they are
    assembled: tuple[str, AgentSpec] | None = None


@dataclass(frozen=True)
class Start:
    """What a run starts from: its params, its workspace and its sandbox (``_begin``)."""

    params: AgentStartParams
    session_id: SessionId
    provisioned: Provisioned
    sandbox: RunSandbox | None


@dataclass(kw_only=True)
class Run:
    """A run in the table: what every runtime keeps of it (a runtime's own run adds the rest)."""

    session_id: SessionId
    params: AgentStartParams
    loop: asyncio.AbstractEventLoop
    worktree: Worktree | None = None
    sandbox: RunSandbox | None = None
    output: asyncio.Queue[str | None] = field(default_factory=asyncio.Queue)
    usage: RunUsage = field(default_factory=RunUsage)
    timed_out: bool = False  # max_agent_duration passed: the runtime was told to kill it
    ended: bool = False  # its teardown has begun: nothing kills it any more
    deadline: asyncio.TimerHandle | None = None

    @classmethod
    def starting(cls, start: Start, **own: Any) -> Self:
        """A run of ``start`` on this loop; ``own``: the fields a runtime's run adds."""
        return cls(
            session_id=start.session_id,
            params=start.params,
            loop=asyncio.get_running_loop(),
            worktree=start.provisioned.worktree,
            sandbox=start.sandbox,
            **own,
        )

    def end(self) -> None:
        self.ended = True
        if self.deadline is not None:
            self.deadline.cancel()


ConfigT = TypeVar("ConfigT", bound=AgentRuntimeConfig)
RunT = TypeVar("RunT", bound=Run)


class AgentRuntime(ABC, Generic[ConfigT, RunT]):
    """A ``RuntimeAdapter`` but for what a runtime does its own way (the abstract methods)."""

    def __init__(self, config: ConfigT, deps: RuntimeAdapterDeps) -> None:
        self.config = config
        self.deps = deps
        self.repo_root = Path(config.repo_root)
        self.provisioner = Provisioner.for_config(config, deps)
        self._runs: dict[SessionId, RunT] = {}
        self._lock = threading.Lock()

    # ------------------------------------------------------------------ the port

    async def start_agent(self, params: AgentStartParams) -> AgentRunHandle:
        session_id = params.session_id
        if session_id is None:
            raise ValueError("start_agent needs params with the executor's session_id")
        deadline = anyio.current_time() + self.config.max_agent_duration  # the loop's clock
        with anyio.CancelScope(deadline=deadline) as starting:
            run = await self._launch(params, session_id)
        if starting.cancelled_caught:  # the setup took it all: nothing runs yet to kill
            raise self.timed_out()
        run.deadline = run.loop.call_at(deadline, self._expire, run)
        with self._lock:
            self._runs[session_id] = run
        return AgentRunHandle(
            session_id=session_id,
            output=_drain(run.output),
            result=run.loop.create_task(self._to_the_end(run)),
            log_file_path=self._log_file_path(run),
            usage=lambda: run.usage,
        )

    def cancel_agent(self, session_id: SessionId) -> None:
        with self._lock:
            run = self._runs.get(session_id)
        if run is not None:
            self._cancel(run)

    def reap(self, keep_branches: frozenset[str] = frozenset()) -> None:
        """Startup: kill the agent process groups a crashed daemon left running (each runs in
        its own session, so it outlives a kill -9) and remove their worktrees and branches."""
        for pidfile in self._pidfiles():
            # Only a group the file proves is that run's: its leader with the start time
            # stamped during the run, or no leader but members left (a group id is not reused
            # while the group lives). A recycled pid, or a file never stamped, is left alone.
            pgid = live_group(pidfile)
            if pgid is not None:
                log.warning("killing an agent process group left by an earlier run", pgid=pgid)
                self._kill_group(pgid)
            pidfile.unlink(missing_ok=True)
        sweep(self.state_dir)
        self.provisioner.reap_worktrees(keep_branches)

    # ------------------------------------------------------------------ for the runtimes

    @property
    def state_dir(self) -> Path:
        """cpe's state directory: the runs' artifacts are in its ``runs/``."""
        return Path(self.config.logging.logs_dir).parent

    def timed_out(self) -> AgentFailure:
        """How a run past ``max_agent_duration`` fails (the session says the same)."""
        return AgentFailure(
            "timed-out", f"exceeded max_agent_duration ({self.config.max_agent_duration:g}s)"
        )

    async def _release(self, run: Run) -> None:
        """The run's sandbox and worktree go (shielded from a cancel), whatever its ending."""
        sandbox, run.sandbox = run.sandbox, None
        worktree, run.worktree = run.worktree, None
        await self._release_parts(sandbox, worktree)

    # ------------------------------------------------------------------ the run

    async def _launch(self, params: AgentStartParams, session_id: SessionId) -> RunT:
        provisioned = await self.provisioner.provision(params)
        worktree = provisioned.worktree
        sandbox: RunSandbox | None = None
        try:
            sandbox = await anyio.to_thread.run_sync(self._open_sandbox, session_id, worktree)
            return await self._begin(Start(params, session_id, provisioned, sandbox))
        except BaseException:
            await self._release_parts(sandbox, worktree)
            raise

    def _open_sandbox(self, session_id: SessionId, worktree: Worktree | None) -> RunSandbox | None:
        return open_sandbox(
            self.config.sandbox,
            worktree=worktree.path if worktree is not None else self.repo_root,
            writable=worktree is not None,
            repo=self.repo_root,
            state_dir=self.state_dir,
            session_id=session_id,
            home=self._sandbox_home(session_id),
        )

    async def _release_parts(self, sandbox: RunSandbox | None, worktree: Worktree | None) -> None:
        if sandbox is not None:
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(sandbox.release)
        await self.provisioner.release(worktree)

    def _expire(self, run: RunT) -> None:  # on the run's loop, at max_agent_duration
        if not run.ended and not run.timed_out:
            run.timed_out = True
            self._kill(run)

    async def _to_the_end(self, run: RunT) -> AgentResult:
        try:
            return await self._drive(run)
        finally:
            run.end()
            run.output.put_nowait(None)
            with self._lock:
                self._runs.pop(run.session_id, None)

    # ------------------------------------------------------------------ each runtime's own

    @abstractmethod
    async def _begin(self, start: Start) -> RunT:
        """The run, started in its workspace and sandbox (``Run.starting``); should this
        raise, the base releases them."""

    @abstractmethod
    async def _drive(self, run: RunT) -> AgentResult:
        """The run to its end: its result, or ``AgentFailure`` (``timed_out()`` once its
        ``timed_out`` is set and the agent died of it); the agent's processes, the sandbox and
        the worktree (``_release``) gone."""

    @abstractmethod
    def _cancel(self, run: RunT) -> None:
        """``cancel_agent``, from any thread."""

    @abstractmethod
    def _kill(self, run: RunT) -> None:
        """Kill the agent's process group, on the run's loop: the deadline has passed."""

    @abstractmethod
    def _log_file_path(self, run: RunT) -> str | None: ...

    @abstractmethod
    def _sandbox_home(self, session_id: SessionId) -> str | None:
        """The agent's HOME (for the sandbox): a throwaway one with ``isolated_home``."""

    @abstractmethod
    def _pidfiles(self) -> Iterable[Path]:
        """The pid files of this runtime's runs (for ``reap``)."""

    @abstractmethod
    def _kill_group(self, pgid: int) -> None:
        """Kill a process group an earlier daemon left (for ``reap``)."""


async def _drain(queue: asyncio.Queue[str | None]) -> AsyncIterator[str]:
    while (chunk := await queue.get()) is not None:
        yield chunk

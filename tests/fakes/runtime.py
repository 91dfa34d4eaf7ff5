"""A fake runtime adapter that implements ``RuntimeAdapter`` and lets a test drive each run.

Each started run is a ``FakeRun`` living on the session's event loop. By default it waits for
the test: ``run.say("text")``, ``run.complete(result)``, ``run.fail(kind, reason)`` are
thread-safe. ``cancel_agent`` ends the run with ``AgentFailure("cancelled")`` unless the run was
told to ignore cancels. ``FakeRuntime.script`` can instead finish runs on its own
(``auto=...``), raise at start, block at start, or return garbage.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

from domain.errors import AgentFailure, AgentFailureKind
from domain.models import AgentStartParams, RunUsage, SessionId
from domain.ports import AgentRunHandle
from domain.results import (
    AgentReview,
    ImplementorResult,
    PlannedWorkItem,
    PlannerResult,
    ReviewerResult,
)

_END = object()


def default_result(params: AgentStartParams) -> Any:
    if params.role == "planner":
        return PlannerResult(
            create=(
                PlannedWorkItem(temp_id="a", title="First", body="do a"),
                PlannedWorkItem(temp_id="b", title="Second", body="do b", blocked_by=("a",)),
            )
        )
    if params.role == "implementor":
        return ImplementorResult(outcome="completed", summary="done", patch="diff --git a/f b/f\n")
    return ReviewerResult(review=AgentReview(verdict="approve", summary="fine"))


@dataclass
class Script:
    """How the runtime behaves; each field is a function of the run's params."""

    auto: Callable[[AgentStartParams], Any] | None = None  # finish at once with this result
    start_error: Callable[[AgentStartParams], BaseException | None] = lambda p: None
    block_start: Callable[[AgentStartParams], bool] = lambda p: False
    ignore_cancel: Callable[[AgentStartParams], bool] = lambda p: False
    greeting: str | None = None  # output at start


@dataclass
class FakeRun:
    params: AgentStartParams
    loop: asyncio.AbstractEventLoop
    ignore_cancel: bool = False
    queue: asyncio.Queue[Any] = field(default_factory=asyncio.Queue)
    result: asyncio.Future[Any] = field(init=False)
    cancelled: threading.Event = field(default_factory=threading.Event)
    usage: RunUsage = field(default_factory=lambda: RunUsage(cost_usd=0.01, turns=3))

    def __post_init__(self) -> None:
        self.result = self.loop.create_future()

    @property
    def session_id(self) -> SessionId:
        assert self.params.session_id is not None
        return self.params.session_id

    # -- thread-safe controls for the test
    def say(self, text: Any) -> None:
        self.loop.call_soon_threadsafe(self.queue.put_nowait, text)

    def complete(self, result: Any | None = None) -> None:
        value = default_result(self.params) if result is None else result
        self.loop.call_soon_threadsafe(self._finish, value, None)

    def fail(self, kind: AgentFailureKind = "failed", reason: str = "it broke") -> None:
        self.loop.call_soon_threadsafe(self._finish, None, AgentFailure(kind, reason))

    def raise_(self, exc: BaseException) -> None:
        self.loop.call_soon_threadsafe(self._finish, None, exc)

    # -- on the loop
    def _finish(self, value: Any, exc: BaseException | None) -> None:
        if self.result.done():
            return
        if exc is not None:
            self.result.set_exception(exc)
        else:
            self.result.set_result(value)
        self.queue.put_nowait(_END)

    def _cancel(self) -> None:
        self.cancelled.set()
        if not self.ignore_cancel:
            self._finish(None, AgentFailure("cancelled", "cancel_agent was called"))

    async def output(self) -> AsyncIterator[str]:
        while True:
            item = await self.queue.get()
            if item is _END:
                return
            yield item


class FakeRuntime:
    def __init__(self, script: Script | None = None):
        self.script = script or Script()
        self.runs: dict[SessionId, FakeRun] = {}
        self.cancels: list[SessionId] = []
        self.on_cancel: Callable[[SessionId], None] | None = None
        self.release_start = threading.Event()
        self.starting: set[SessionId] = set()  # start_agent entered (and maybe blocked there)
        self._cond = threading.Condition()
        self.reaped = 0

    async def start_agent(self, params: AgentStartParams) -> AgentRunHandle:
        assert params.session_id is not None, "the executor assigns the session id"
        with self._cond:
            self.starting.add(params.session_id)
            self._cond.notify_all()
        if self.script.block_start(params):
            loop = asyncio.get_running_loop()
            await loop.run_in_executor(None, self.release_start.wait, 60)
        error = self.script.start_error(params)
        if error is not None:
            raise error
        run = FakeRun(params, asyncio.get_running_loop(), self.script.ignore_cancel(params))
        with self._cond:
            self.runs[params.session_id] = run
            self._cond.notify_all()
        if self.script.greeting:
            run.say(self.script.greeting)
        if self.script.auto is not None:
            run.complete(self.script.auto(params))

        async def result() -> Any:
            return await run.result

        return AgentRunHandle(
            session_id=params.session_id,
            output=run.output(),
            result=result(),
            log_file_path=f"/tmp/{params.session_id}.log",
            usage=lambda: run.usage,
        )

    def cancel_agent(self, session_id: SessionId) -> None:
        with self._cond:
            self.cancels.append(session_id)
            run = self.runs.get(session_id)
            self._cond.notify_all()
        if self.on_cancel is not None:
            self.on_cancel(session_id)
        if run is not None:
            run.loop.call_soon_threadsafe(run._cancel)

    def reap(self, keep_branches: frozenset[str] = frozenset()) -> None:
        self.reaped += 1
        self.kept = keep_branches

    def wait_run(
        self, predicate: Callable[[FakeRun], bool] = lambda r: True, timeout: float = 30.0
    ) -> FakeRun:
        with self._cond:
            found: list[FakeRun] = []

            def ready() -> bool:
                found[:] = [r for r in self.runs.values() if predicate(r)]
                return bool(found)

            if not self._cond.wait_for(ready, timeout):
                raise TimeoutError("no matching run started")
            return found[0]

    def wait_starting(self, session_id: SessionId, timeout: float = 30.0) -> None:
        """Until ``start_agent`` was entered for ``session_id`` (it may be blocked there)."""
        with self._cond:
            if not self._cond.wait_for(lambda: session_id in self.starting, timeout):
                raise TimeoutError(f"start_agent was not called for {session_id}")

    def wait_runs(self, count: int, timeout: float = 30.0) -> list[FakeRun]:
        with self._cond:
            if not self._cond.wait_for(lambda: len(self.runs) >= count, timeout):
                raise TimeoutError(f"{len(self.runs)} runs started, expected {count}")
            return list(self.runs.values())


def fake_runtimes(runtime: FakeRuntime) -> Callable[[Any], dict[str, FakeRuntime]]:
    """A ``create_runtime_adapters`` factory giving ``runtime`` every role; it records the
    deps it was given in ``runtime.deps``."""

    def factory(deps: Any) -> dict[str, FakeRuntime]:
        runtime.deps = deps  # type: ignore[attr-defined]
        return {"planner": runtime, "implementor": runtime, "reviewer": runtime}

    return factory

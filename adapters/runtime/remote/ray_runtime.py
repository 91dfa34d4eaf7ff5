"""The head's side of a remote run: a ``RuntimeAdapter`` whose runs are Ray actors on the nodes.

The only module of cpe that imports Ray. A run: the prompt and the agent definition are
assembled here (the head holds the provider and the state), the repository at the base commit
is bundled (``git bundle``), and an actor (``NodeActor``, named after the session, detached, in
this engine's namespace) is placed on a node with the resources ``[runtime.remote]`` asks. It
runs the role's local runtime there (``node.py``) and streams its events back: the output, the
ending, the usage and the run's artifacts, stored in ``<state>/runs/<session>`` as a local run's
are, with ``remote.json`` saying where it ran.

The guarantees of a local run hold: the node's runtime owns the duration limit and kills the
agent's process group, as does a cancel; a node (or the actor's worker) that dies fails the run
as an infrastructure failure (no attempt spent) within seconds, never a hang; ``reap`` at the
head's start stops and kills every run an earlier head left in the namespace.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import hashlib
import io
import json
import logging
import os
import signal
import subprocess
import tarfile
import tempfile
import threading
from collections.abc import AsyncIterator, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import ray
import ray.exceptions
import structlog
from ray.util import list_named_actors

from adapters.runtime.common import RuntimeContext
from adapters.runtime.remote.node import NodeSession, Shipment
from adapters.runtime.remote.placement import REMOTE_FILE
from adapters.runtime.remote.settings import RemoteSettings
from adapters.runtime.settings import RuntimeSettings
from adapters.runtime.workspace.provision import Provisioner
from domain.errors import AgentFailure, ConfigError
from domain.models import AgentStartParams, RunUsage, SessionId
from domain.ports import AgentRunHandle, RuntimeAdapterDeps
from domain.results import AgentResult, parse_agent_result

log = structlog.get_logger("cpe.runtime.remote")

_STOP_WAIT = 30.0  # seconds a stopped run gets to end on its node before its actor is killed
# Never shipped to a node, whatever a configuration adds on purpose: cpe's own credentials.
_HEAD_ONLY = ("GITHUB_TOKEN", "GH_TOKEN", "CPE_GITHUB_TOKEN")


class NodeActor(NodeSession):
    """``NodeSession`` as the Ray actor: it knows its Ray node."""

    def where(self) -> dict[str, str]:
        context = ray.get_runtime_context()
        return {**super().where(), "node_id": context.get_node_id()}

    async def stop(self) -> None:
        """Cancel the run and wait (bounded) for its end: its agent gone, its directory too."""
        self.cancel()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.ended.wait(), _STOP_WAIT)


_Actor: Any = None
_connect_lock = threading.Lock()


def connect(settings: RemoteSettings) -> None:
    """Join the cluster as a driver, once per process; a ``ConfigError`` when it cannot."""
    global _Actor  # noqa: PLW0603 (one Ray connection per process, as Ray has it)
    with _connect_lock:
        if not ray.is_initialized():
            try:
                with _keeping_sigterm():
                    _init(settings)
            except (ConnectionError, RuntimeError, ValueError) as exc:
                raise ConfigError(
                    f"runtime.remote.address: cannot join the Ray cluster at "
                    f"{settings.address!r}: {str(exc).splitlines()[0] if str(exc) else exc}",
                    expected="a running cluster (ray start --head) and its address, or auto",
                ) from exc
        if _Actor is None:
            _Actor = ray.remote(NodeActor)


def _init(settings: RemoteSettings) -> None:
    ray.init(
        address=settings.address,
        log_to_driver=False,
        logging_level=logging.WARNING,
        configure_logging=False,
    )


@contextlib.contextmanager
def _keeping_sigterm() -> Iterator[None]:
    """``ray.init`` in the main thread replaces the SIGTERM handler with ``sys.exit``: a
    ``cpe run`` built after its stop handlers were installed would then die of a SIGTERM
    half-stopped (its journal closed under running actors, exit -6) instead of stopping
    cleanly. The handler in place before is put back."""
    main = threading.current_thread() is threading.main_thread()
    previous = signal.getsignal(signal.SIGTERM) if main else None
    try:
        yield
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


def default_namespace(state_dir: Path) -> str:
    """One namespace per engine: its state directory names it."""
    digest = hashlib.sha256(str(state_dir.resolve()).encode()).hexdigest()[:12]
    return f"cpe-{digest}"


@dataclass(kw_only=True)
class _Run:
    session_id: SessionId
    actor: Any = None
    started: bool = False
    cancelled: bool = False
    output: asyncio.Queue[str | None] = field(default_factory=asyncio.Queue)
    usage: RunUsage | None = None
    events: Any = None  # the actor's stream (an ObjectRefGenerator)


class RayRuntime:
    """A ``RuntimeAdapter`` whose runs are placed on a Ray cluster's nodes."""

    def __init__(
        self,
        settings: RemoteSettings,
        shipment: Shipment,
        *,
        repo_root: Path,
        default_branch: str,
        state_dir: Path,
        context_paths: tuple[str, ...],
        deps: RuntimeAdapterDeps,
    ) -> None:
        connect(settings)
        self.settings = settings
        self.shipment = shipment
        self.repo_root = repo_root
        self.default_branch = default_branch
        self.state_dir = state_dir
        self.namespace = settings.namespace or default_namespace(state_dir)
        self.provisioner = Provisioner(
            repo_root=repo_root,
            default_branch=default_branch,
            setup_command="",
            setup_timeout=1,
            context_paths=context_paths,
            deps=deps,
        )
        self._runs: dict[SessionId, _Run] = {}
        self._lock = threading.Lock()
        self._bundles = BundleCache()

    # ------------------------------------------------------------------ the port

    async def start_agent(self, params: AgentStartParams) -> AgentRunHandle:
        session_id = params.session_id
        if session_id is None:
            raise ValueError("start_agent needs params with the executor's session_id")
        prompt = await anyio.to_thread.run_sync(self.provisioner.prompt, params)
        spec = await anyio.to_thread.run_sync(self.provisioner.spec, params.role)
        source = await anyio.to_thread.run_sync(self._source)
        payload = {
            "params": params.model_dump(mode="json"),
            "prompt": prompt,
            "spec": dataclasses.asdict(spec),
            **source,
            "shipment": self.shipment.model_dump(mode="json"),
        }
        run = _Run(session_id=session_id)
        with self._lock:
            self._runs[session_id] = run
        try:
            events = await self._place(run, payload)
        except BaseException:
            with self._lock:
                self._runs.pop(session_id, None)
            raise
        return AgentRunHandle(
            session_id=session_id,
            output=_drain(run.output),
            result=asyncio.get_running_loop().create_task(self._to_the_end(run, events)),
            log_file_path=str(self._run_dir(session_id) / "transcript.log"),
            usage=lambda: run.usage,
        )

    def cancel_agent(self, session_id: SessionId) -> None:
        with self._lock:
            run = self._runs.get(session_id)
        if run is None or run.actor is None:
            return
        run.cancelled = True
        if run.started:
            run.actor.cancel.remote()  # the node kills the agent's group; the run then ends
        else:  # not placed yet (no node has what it asks): nothing runs to stop
            ray.kill(run.actor, no_restart=True)

    def reap(self, keep_branches: frozenset[str] = frozenset()) -> None:
        """Startup: stop and kill the runs an earlier head of this engine left on the cluster
        (its namespace's actors); their agents are killed on their nodes, their directories
        removed. The head itself keeps no worktree of a remote run."""
        names = [
            entry["name"]
            for entry in list_named_actors(all_namespaces=True)
            if entry.get("namespace") == self.namespace
        ]
        for name in names:
            with contextlib.suppress(ValueError, ray.exceptions.RayError):
                actor = ray.get_actor(name, namespace=self.namespace)
                log.warning("stopping a remote run an earlier head left", session_id=name)
                with contextlib.suppress(ray.exceptions.RayError):
                    ray.get(actor.stop.remote(), timeout=_STOP_WAIT + 10)
                ray.kill(actor, no_restart=True)

    # ------------------------------------------------------------------ the run

    def _source(self) -> dict[str, Any]:
        """Where the node gets the repository at the base commit: ``clone_url`` and the base
        commit, or a git bundle of the default branch (made once per base commit)."""
        return repository_source(
            self.repo_root, self.default_branch, self.settings.clone_url, self._bundles
        )

    async def _place(self, run: _Run, payload: Mapping[str, Any]) -> Any:
        """The run's actor, placed and started: its stream, past the ``started`` event."""
        assert _Actor is not None
        s = self.settings
        options: dict[str, Any] = {
            "name": run.session_id,
            "namespace": self.namespace,
            "lifetime": "detached",  # an earlier head's runs are found by name, and stopped
            "max_restarts": 0,
            "max_task_retries": 0,
            "max_concurrency": 4,  # its run, a cancel, a stop
            "num_cpus": s.num_cpus,
            "resources": dict(s.resources),
        }
        if s.memory:
            options["memory"] = s.memory
        run.actor = _Actor.options(**options).remote(self.namespace, s.node_dir)
        events = run.actor.run.remote(payload)
        try:
            first = await _next(events)
        except ray.exceptions.RayError as exc:
            self._kill(run)
            if run.cancelled:
                raise AgentFailure("cancelled", "cancelled before it was placed") from exc
            raise _lost(exc) from exc
        if first is None or first.get("type") != "started":
            self._kill(run)
            raise AgentFailure(
                "failed", f"the node did not start the run: {first}", infrastructure=True
            )
        run.started = True
        if run.cancelled:
            run.actor.cancel.remote()
        await anyio.to_thread.run_sync(self._record, run.session_id, first)
        return events

    def _record(self, session_id: SessionId, where: Mapping[str, Any]) -> None:
        node_id = where.get("node_id", "")
        address = next(
            (
                n["NodeManagerAddress"]
                for n in ray.nodes()  # type: ignore[no-untyped-call]
                if n.get("NodeID") == node_id
            ),
            "",
        )
        info = {
            "kind": "ray",
            "runtime": self.shipment.runtime.kind,
            "node_id": node_id,
            "node_address": address,
            "hostname": where.get("hostname", ""),
            "namespace": self.namespace,
        }
        log.info("remote run placed", session_id=session_id, **info)
        run_dir = self._run_dir(session_id)
        run_dir.mkdir(parents=True, exist_ok=True)
        (run_dir / REMOTE_FILE).write_text(json.dumps(info, indent=2) + "\n")

    async def _to_the_end(self, run: _Run, events: Any) -> AgentResult:
        ending: AgentResult | AgentFailure | None = None
        try:
            try:
                while (event := await _next(events)) is not None:
                    kind = event.get("type")
                    if kind == "output":
                        run.output.put_nowait(str(event["text"]))
                    elif kind == "result":
                        ending = parse_agent_result(event["result"])
                    elif kind == "failure":
                        ending = AgentFailure(
                            event["kind"], event["reason"], infrastructure=event["infrastructure"]
                        )
                    elif kind == "usage":
                        run.usage = RunUsage.model_validate(event["usage"])
                    elif kind == "artifacts":
                        await anyio.to_thread.run_sync(self._unpack, run.session_id, event["tar"])
                    elif kind == "ended":
                        break
            except ray.exceptions.RayError as exc:
                raise _lost(exc) from exc
            except BaseException:  # the session cancelled the run: it stops on its node first
                with anyio.CancelScope(shield=True):
                    await anyio.to_thread.run_sync(self._stop, run)
                raise
            if isinstance(ending, AgentFailure):
                raise ending
            if ending is None:
                raise AgentFailure(
                    "failed", "the node ended the run without a result", infrastructure=True
                )
            return ending
        finally:
            run.output.put_nowait(None)
            with self._lock:
                self._runs.pop(run.session_id, None)
            self._kill(run)

    def _stop(self, run: _Run) -> None:
        with contextlib.suppress(ray.exceptions.RayError):
            ray.get(run.actor.stop.remote(), timeout=_STOP_WAIT + 10)

    def _kill(self, run: _Run) -> None:
        if run.actor is not None:
            with contextlib.suppress(ray.exceptions.RayError, ValueError):
                ray.kill(run.actor, no_restart=True)

    def _run_dir(self, session_id: SessionId) -> Path:
        return self.state_dir / "runs" / session_id

    def _unpack(self, session_id: SessionId, data: bytes) -> None:
        """The run's artifacts, where a local run's are."""
        run_dir = self._run_dir(session_id)
        run_dir.mkdir(parents=True, exist_ok=True)
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
            tar.extractall(run_dir, filter="data")
        metadata = run_dir / "runner_metadata.json"
        remote = run_dir / REMOTE_FILE
        if metadata.exists() and remote.exists():  # where it ran, in its metadata too
            with contextlib.suppress(OSError, ValueError):
                data_ = json.loads(metadata.read_text())
                data_["remote"] = json.loads(remote.read_text())
                metadata.write_text(json.dumps(data_, indent=2) + "\n")


def _lost(exc: BaseException) -> AgentFailure:
    """A run whose node, or the actor's worker on it, died: an infrastructure failure."""
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return AgentFailure(
        "failed", f"the remote run was lost ({type(exc).__name__}): {first}", infrastructure=True
    )


async def _next(events: Any) -> dict[str, Any] | None:
    """The stream's next event; None at its end."""
    try:
        ref = await events.__anext__()
    except StopAsyncIteration:
        return None
    event: dict[str, Any] = await ref
    return event


class BundleCache:
    """The last bundle made, by the base commit it holds: runs on the same base ship the same
    bytes without making them again (a bundle of a 10,000-file repository takes seconds)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._base: str | None = None
        self._bytes = b""

    def get(self, repo_root: Path, ref: str, base: str) -> bytes:
        with self._lock:
            if self._base != base:
                with tempfile.TemporaryDirectory(prefix="cpe-bundle-") as tmp:
                    path = Path(tmp) / "base.bundle"
                    _git(repo_root, "bundle", "create", "-q", str(path), ref)
                    self._bytes, self._base = path.read_bytes(), base
            return self._bytes


def repository_source(
    repo_root: Path, default_branch: str, clone_url: str, bundles: BundleCache
) -> dict[str, Any]:
    """What a run's payload says of the repository: the default branch's ref and the base
    commit, and either ``clone_url`` or the bundle's bytes."""
    found = _git(repo_root, "rev-parse", "--symbolic-full-name", default_branch)
    ref = found.decode().strip() or f"refs/heads/{default_branch}"
    base = _git(repo_root, "rev-parse", f"{ref}^{{commit}}").decode().strip()
    if clone_url:
        return {"clone_url": clone_url, "base_ref": ref, "base_sha": base}
    return {"bundle": bundles.get(repo_root, ref, base), "base_ref": ref, "base_sha": base}


def _git(cwd: Path, *args: str) -> bytes:
    return subprocess.run(
        ["git", "-C", str(cwd), *args],
        check=True,
        capture_output=True,
        timeout=600,
        env={**os.environ, "GIT_TERMINAL_PROMPT": "0"},
    ).stdout


async def _drain(queue: asyncio.Queue[str | None]) -> AsyncIterator[str]:
    while (chunk := await queue.get()) is not None:
        yield chunk


def create_ray_runtime(
    settings: RemoteSettings,
    runtime: RuntimeSettings,
    context: RuntimeContext,
    deps: RuntimeAdapterDeps,
) -> RayRuntime:
    """The remote runtime of ``runtime`` (``ClaudeSdkRuntime``, ``ClaudeCliRuntime``,
    ``CodexCliRuntime``: the union in adapters/runtime/settings.py), built with the
    ``RuntimeContext`` a local one would be; its common part goes to the nodes (without cpe's
    own credentials), which find their own sandbox with its sandbox settings."""
    common = context.common
    agent_env = {k: v for k, v in common.agent_env.items() if k not in _HEAD_ONLY}
    shipment = Shipment(runtime=runtime, common=common.model_copy(update={"agent_env": agent_env}))
    return RayRuntime(
        settings,
        shipment,
        repo_root=Path(context.repo_root),
        default_branch=context.default_branch,
        state_dir=Path(context.logs_dir).parent,
        context_paths=common.context_paths,
        deps=deps,
    )

"""The node's side of a remote run: what runs in the Ray actor on the node the run was placed on.

It imports no Ray (``ray_runtime.py`` makes it an actor), so it is plain code over the local
runtimes: from the data the head shipped (the run's params, its already assembled prompt and
agent definition, the ``Shipment``: the local runtime's settings and the common part, and the
repository at the base commit as a git bundle) it makes a clone in a directory of the run's
own, builds the named local runtime there (``build()`` of ``ClaudeSdkRuntime``,
``ClaudeCliRuntime`` or ``CodexCliRuntime``, adapters/runtime/settings.py, the same code a
local run uses: worktree, sandbox, deadline, process group, artifacts) and runs the agent.
What comes back is data too, as events: ``started`` (where it runs), ``output`` chunks, then
one ending (``result``: the result as JSON, or ``failure``), ``usage`` and ``artifacts`` (the
run's directory as a tar), then the stream ends. The run's
directory (clone, worktree, artifacts) is removed before the last event.

Processes outlive a killed Ray worker (an agent runs in a session of its own), so each run
leaves its owner's pid in its directory, and every run starting on a node first kills the
process groups of runs whose owner is gone and removes their directories (``sweep_orphans``).
"""

from __future__ import annotations

import asyncio
import io
import json
import os
import shutil
import socket
import subprocess
import tarfile
import tempfile
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

import psutil
import structlog
from pydantic import BaseModel, ConfigDict

from adapters.runtime.common import RuntimeCommon, RuntimeContext
from adapters.runtime.prompt.agents import AgentSpec
from adapters.runtime.settings import RuntimeSettings
from domain.errors import AgentFailure, CpeError
from domain.models import AgentStartParams, SessionId
from domain.ports import AgentRunHandle, RuntimeAdapter, RuntimeAdapterDeps

log = structlog.get_logger("cpe.runtime.remote.node")

OWNER = "owner.json"  # in a run's directory: the pid (and its start time) of the actor's process
BASE = "cpe-base"  # the branch the clone holds at the base commit (the runtime's default branch)
PIDFILES = ("cli.pid", "runner.pid")  # the SDK runtime's and the CLI runners'

Event = dict[str, Any]


def default_node_dir() -> str:
    return str(Path(tempfile.gettempdir()) / f"cpe-node-{os.getuid()}")


class NodeSession:
    """One remote run on this node (made a Ray actor by the head: one actor per run)."""

    def __init__(self, namespace: str, node_dir: str) -> None:
        self.root = Path(node_dir or default_node_dir()) / namespace
        self.runtime: RuntimeAdapter | None = None
        self.session_id: SessionId | None = None
        self.cancelled = False
        self.ended = asyncio.Event()  # the run's directory is gone: nothing of it is left

    async def run(self, payload: Mapping[str, Any]) -> AsyncIterator[Event]:
        """The run, as the events the head follows (see the module's docstring)."""
        params = _params(payload["params"])
        session_id = params.session_id
        assert session_id is not None
        self.session_id = session_id
        run_dir = self.root / session_id
        yield {"type": "started", **self.where()}
        try:
            await asyncio.to_thread(sweep_orphans, self.root)
            await asyncio.to_thread(_prepare, run_dir, payload)
            runtime = await asyncio.to_thread(_build, run_dir, payload)
            self.runtime = runtime
            handle = await runtime.start_agent(params)
            if self._cancel_requested():  # a cancel that came while it started
                runtime.cancel_agent(session_id)
            async for event in _follow(handle):
                yield event
        except AgentFailure as failure:
            yield _failure(failure)
        except Exception as exc:
            # under the agent: the node could not make its workspace or runtime
            reason = f"on the node: {type(exc).__name__}: {exc}".replace("\n", " ")[:2000]
            yield _failure(AgentFailure("failed", reason, infrastructure=True))
        finally:
            self.runtime = None
        artifacts = await asyncio.to_thread(_pack, run_dir / "state" / "runs" / session_id)
        if artifacts:
            yield {"type": "artifacts", "tar": artifacts}
        await asyncio.to_thread(shutil.rmtree, run_dir, True)
        self.ended.set()
        yield {"type": "ended"}

    def _cancel_requested(self) -> bool:
        return self.cancelled

    def cancel(self) -> None:
        """Stop the run: the local runtime kills the agent's process group."""
        self.cancelled = True
        if self.runtime is not None and self.session_id is not None:
            self.runtime.cancel_agent(self.session_id)

    def where(self) -> dict[str, str]:
        """This node, as the run's metadata records it (the Ray actor adds its node id)."""
        return where()


async def _follow(handle: AgentRunHandle) -> AsyncIterator[Event]:
    async for chunk in handle.output:
        yield {"type": "output", "text": chunk}
    try:
        result = await handle.result
    except AgentFailure as failure:
        yield _failure(failure)
    else:
        yield {"type": "result", "result": result.model_dump(mode="json")}
    usage = handle.usage()
    if usage is not None:
        yield {"type": "usage", "usage": usage.model_dump(mode="json")}


def _failure(failure: AgentFailure) -> Event:
    return {
        "type": "failure",
        "kind": failure.kind,
        "reason": failure.reason,
        "infrastructure": failure.infrastructure,
    }


def where() -> dict[str, str]:
    """This node, as the run's metadata records it (the Ray node id is added by the actor)."""
    return {"hostname": socket.gethostname(), "pid": str(os.getpid())}


def _params(data: Mapping[str, Any]) -> AgentStartParams:
    from pydantic import TypeAdapter  # noqa: PLC0415

    return TypeAdapter(AgentStartParams).validate_python(data)


# ---------------------------------------------------------------------------- the workspace


def _prepare(run_dir: Path, payload: Mapping[str, Any]) -> None:
    """The run's directory: its owner, and a clone at the base commit, from the bundle the head
    shipped or from ``clone_url`` (then the base commit must be on the branch fetched there)."""
    if run_dir.exists():  # the same run placed here before (an earlier head): start clean
        shutil.rmtree(run_dir)
    run_dir.mkdir(parents=True)
    me = psutil.Process()
    (run_dir / OWNER).write_text(json.dumps({"pid": me.pid, "started": me.create_time()}))
    repo = run_dir / "repo"
    _git(run_dir, "init", "-q", "-b", "cpe-node", str(repo))
    url = payload.get("clone_url")
    if url:  # its branches: the base commit is on one of them once the head's branch is pushed
        _git(repo, "fetch", "-q", str(url), "+refs/heads/*:refs/remotes/source/*")
    else:
        bundle = run_dir / "repo.bundle"
        bundle.write_bytes(payload["bundle"])
        _git(repo, "fetch", "-q", str(bundle), f"+{payload['base_ref']}:refs/remotes/source/base")
    base = payload.get("base_sha") or "refs/remotes/source/base"
    if not _git_ok(repo, "cat-file", "-e", f"{base}^{{commit}}"):
        raise CpeError(
            f"the base commit {base} is on no branch of {url}: push the default branch there, "
            "or leave [runtime.remote] clone_url empty to ship a bundle"
        )
    _git(repo, "checkout", "-q", "-b", BASE, base)
    if not url:
        (run_dir / "repo.bundle").unlink()


def _git(cwd: Path, *args: str) -> None:
    done = subprocess.run(
        ["git", "-C", str(cwd), *args],
        check=False,
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "GIT_TERMINAL_PROMPT": "0"},
    )
    if done.returncode != 0:
        raise CpeError(f"git {args[0]} failed on the node: {done.stderr.strip()[:300]}")


def _git_ok(cwd: Path, *args: str) -> bool:
    return (
        subprocess.run(
            ["git", "-C", str(cwd), *args], check=False, capture_output=True, timeout=60
        ).returncode
        == 0
    )


class Shipment(BaseModel):
    """What every run of a remote runtime ships its node besides the run's own part: the local
    runtime's settings (its kind among them) and the settings every runtime shares. The head
    sends ``model_dump(mode="json")``; the node validates it again, whole: a field one side
    does not know is an error, never a setting dropped."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    runtime: RuntimeSettings
    common: RuntimeCommon


def _build(run_dir: Path, payload: Mapping[str, Any]) -> RuntimeAdapter:
    """The local runtime the head named, built here with the shipped settings and this node's
    sandbox, its prompt and agent definition the ones the head assembled."""
    from adapters.runtime.preflight import check_sandbox  # noqa: PLC0415
    from adapters.runtime.sandbox import Sandbox  # noqa: PLC0415

    shipment = Shipment.model_validate(payload["shipment"])
    found = check_sandbox(shipment.common.sandbox)
    shipment.runtime.check()
    spec = AgentSpec(
        **{
            **payload["spec"],
            "tools": _tuple(payload["spec"]["tools"]),
            "disallowed_tools": _tuple(payload["spec"]["disallowed_tools"]),
        }
    )
    context = RuntimeContext(
        shipment.common,
        repo_root=str(run_dir / "repo"),
        default_branch=BASE,
        logs_dir=str(run_dir / "state" / "runs"),
        sandbox=found if isinstance(found, Sandbox) else None,
        sandbox_missing=found if isinstance(found, str) else "",
        assembled=(payload["prompt"], spec),
    )
    return shipment.runtime.build(context, _no_deps())


def _tuple(value: Any) -> tuple[str, ...] | None:
    return None if value is None else tuple(value)


def _no_deps() -> RuntimeAdapterDeps:
    """The node has no provider: everything the runs read from one the head assembled."""

    def unavailable(*_args: Any) -> Any:
        raise CpeError("a remote run reads nothing from the provider: the head assembled it")

    class _Nothing:
        def __getattr__(self, name: str) -> Any:
            return unavailable

    nothing: Any = _Nothing()
    return RuntimeAdapterDeps(
        work_item_reader=nothing,
        revision_reader=nothing,
        get_state=unavailable,
        get_review_history=unavailable,
    )


def _pack(directory: Path) -> bytes:
    """The run's normalized artifacts as a tar (empty when it has none)."""
    if not directory.is_dir():
        return b""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for path in sorted(directory.rglob("*")):
            if path.is_file() and path.name not in PIDFILES:
                tar.add(path, arcname=str(path.relative_to(directory)))
    return buffer.getvalue()


# ---------------------------------------------------------------------------- orphans


def sweep_orphans(root: Path) -> list[str]:
    """Kill the agents of runs whose owner (the Ray worker that ran them) is gone, and remove
    their directories; the runs swept. A run whose owner lives is left alone."""
    from adapters.runtime.process.launcher import kill_group, live_group  # noqa: PLC0415

    swept = []
    for owner_file in sorted(root.glob(f"*/{OWNER}")):
        run_dir = owner_file.parent
        if _owner_alive(owner_file):
            continue
        for name in PIDFILES:
            for pidfile in run_dir.rglob(name):
                pgid = live_group(pidfile)
                if pgid is not None:
                    log.warning("killing an agent whose remote run's owner is gone", pgid=pgid)
                    kill_group(pgid, grace=2.0)
        shutil.rmtree(run_dir, ignore_errors=True)
        swept.append(run_dir.name)
    return swept


def _owner_alive(owner_file: Path) -> bool:
    try:
        owner = json.loads(owner_file.read_text())
        process = psutil.Process(int(owner["pid"]))
        return bool(abs(process.create_time() - float(owner["started"])) < 1.0)
    except (OSError, ValueError, KeyError, TypeError, psutil.Error):
        return False

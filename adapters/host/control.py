"""A person's requests reach the engine: through the running engine, or its journal.

``cpe work retry|cancel|set-status``, ``cpe pause``, ``cpe resume`` (and the dashboard's actions)
become user events (``domain.requests``). While ``cpe run`` runs, the command sends the request
over the engine's **control socket** (``<state_dir>/control.sock``, a Unix socket only this
user can open): the engine judges it against its live state, queues the events and answers once
it has processed them. When no engine runs, the command takes the engine's instance lock itself,
judges the request against the journal's state (the tracker's work items over it) and appends
the events to the journal: the next ``cpe run`` processes them first, before anything else is
dispatched. Either way a refused request changes nothing, and the events are journaled before
anything acts on them.

The socket speaks one JSON object per line. A request ``{"request": {...}}`` is answered with
``{"ok": true, "message": ...}`` or ``{"ok": false, "kind": ..., "error": ...}``;
``{"follow": SESSION}`` is answered with ``{"ok": true}`` and then ``{"output": chunk}`` lines
as the run writes them, until the run ends (``{"end": true}``). ``{"refresh": NAMES}`` (a list
of pollers, or anything else for all) asks for a poll now: ``{"ok": true, "message": ...}``.
What the terminal console reads, ``{"view": ...}`` and ``{"watch": "board"}``, is answered
through the views the composition root gives (``adapters.host.control_views``). A line that is
not a JSON object is answered ``{"ok": false, "kind": "invalid", ...}``. The socket adds no
commit point: the views are reads, a request goes through ``Engine.submit`` as any event.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import socketserver
import struct
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import structlog
from pydantic import ValidationError

from actors.engine import Engine
from actors.journal import JOURNAL_NAME, Journal
from actors.journal_file import InstanceLock, check_journal
from actors.settings import BreakerSettings
from adapters.host.control_views import WATCH_BEAT, Views, Watches, answer_view, serve_watch
from adapters.support.redaction import redact_value
from domain.admission import dispatch_pauses
from domain.events import AgentFailed
from domain.models import AgentRole, EngineState, SessionId, WorkItem
from domain.requests import (
    REQUEST_ADAPTER,
    Accepted,
    RequestRefused,
    UserRequest,
    accept,
)
from domain.state import apply_event
from domain.state.observed import merge_observed_work_item

log = structlog.get_logger("cpe.control")

SOCKET_NAME = "control.sock"
PROCESS_TIMEOUT = 60.0  # seconds the engine gets to process a request before the answer
FOLLOW_START_WAIT = 60.0  # seconds a follower of a requested run waits for it to start
_MAX_LINE = 64 * 1024
_SO_PEERCRED_FORMAT = "3i"  # struct ucred: pid, uid, gid


@dataclass(frozen=True)
class ControlSettings:
    """What a request is judged by besides the state: the breaker's rule (``[breaker]``) and the
    concurrency caps by role (``[workflow] max_concurrent``), given by the composition root."""

    breaker: BreakerSettings
    max_concurrent: Mapping[AgentRole, int]


# ---------------------------------------------------------------------------- in the engine


class Control:
    """Carries out requests against a running engine: the control socket's and the
    dashboard's one way in."""

    def __init__(
        self,
        engine: Engine,
        settings: ControlSettings,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ):
        self.engine = engine
        self.settings = settings
        self.clock = clock

    def handle(self, request: UserRequest) -> Accepted:
        """Judge, queue and wait for the engine to process ``request``; ``RequestRefused``
        when the state does not allow it or the engine is shutting down."""
        state = self.engine.get_state()
        now = self.clock()
        accepted = accept(
            request,
            state,
            at=now,
            dispatch_paused=_paused(state, now, self.settings.breaker),
            max_concurrent=self.settings.max_concurrent,
        )
        if not accepted.events:
            return accepted
        processed = self.engine.submit(accepted.events, PROCESS_TIMEOUT)
        if processed is None:
            raise RequestRefused("conflict", "cpe is shutting down; try again once it runs")
        log.info("a person's request", request=request.op, result=accepted.message)
        if not processed:
            return Accepted(accepted.events, accepted.message + " (queued; the engine is busy)")
        return accepted


class ControlServer:
    """The control socket, a ``Service``: one thread per connection."""

    name = "control socket"

    def __init__(
        self,
        control: Control,
        state_dir: Path,
        views: Views | None = None,
        *,
        watch_beat: float = WATCH_BEAT,
    ):
        self.control = control
        self.state_dir = state_dir
        self.views = views
        self._watches = Watches(beat=watch_beat)
        self._server: _UnixServer | None = None
        self._closed = False

    def serve(self) -> None:
        self.state_dir.mkdir(parents=True, exist_ok=True)
        with _short_path(self.state_dir) as directory:
            path = f"{directory}/{SOCKET_NAME}"
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)  # a socket a killed engine left: ours, we hold the lock
            server = _UnixServer(path, _Handler)
            os.chmod(path, 0o600)
        server.control = self.control
        server.views = self.views
        server.watches = self._watches
        self._server = server
        if self._closed:
            server.server_close()
            return
        log.info("control socket listening", path=str(self.state_dir / SOCKET_NAME))
        try:
            server.serve_forever(poll_interval=0.5)
        finally:
            server.server_close()

    def shutdown(self) -> None:
        self._closed = True
        self._watches.close()  # every watch says {"end": true}
        server = self._server
        if server is not None:
            server.shutdown()
            with contextlib.suppress(FileNotFoundError):
                (self.state_dir / SOCKET_NAME).unlink()


class _UnixServer(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True  # a follower of a long run must not hold up a stop
    control: Control
    views: Views | None
    watches: Watches

    def verify_request(self, request: Any, client_address: Any) -> bool:
        """Only this user (or root) may ask: the socket's mode says so too."""
        creds = request.getsockopt(
            socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize(_SO_PEERCRED_FORMAT)
        )
        _, uid, _ = struct.unpack(_SO_PEERCRED_FORMAT, creds)
        return uid in (os.getuid(), 0)

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client gone before its answer is no error; anything else is logged, never printed
        raw on the operator's terminal (socketserver's default)."""
        error = sys.exc_info()[1]
        if isinstance(error, (BrokenPipeError, ConnectionResetError)):
            log.debug("a control socket client went away before its answer")
            return
        log.error("a control socket request failed", exc_info=error)


class _Handler(socketserver.StreamRequestHandler):
    timeout = 30  # seconds to read the request line
    server: _UnixServer

    def handle(self) -> None:
        try:
            message = json.loads(self.rfile.readline(_MAX_LINE))
        except (ValueError, OSError) as exc:
            message = f"unreadable request: {exc}"
        if not isinstance(message, dict):
            self._send(
                {"ok": False, "kind": "invalid", "error": f"expected a JSON object: {message}"}
            )
            return
        if "follow" in message:
            self._follow(str(message["follow"]))
            return
        if "view" in message:
            self._send(answer_view(self.server.views, message))
            return
        if "watch" in message:
            with contextlib.suppress(OSError):  # the watcher went away, or stopped reading
                serve_watch(self.server.views, message, self._send, self.server.watches)
            return
        if "refresh" in message:  # a command wrote to the tracker: poll it now
            names = message["refresh"]
            names = [str(n) for n in names] if isinstance(names, list) else None
            self.server.control.engine.refresh(names)
            self._send({"ok": True, "message": "polling now"})
            return
        try:
            request = REQUEST_ADAPTER.validate_python(message.get("request"))
            accepted = self.server.control.handle(request)
        except ValidationError as exc:
            self._send({"ok": False, "kind": "invalid", "error": _one_line(exc)})
        except RequestRefused as exc:
            self._send({"ok": False, "kind": exc.kind, "error": str(exc)})
        else:
            self._send({"ok": True, "message": accepted.message})

    def _follow(self, session_id: str) -> None:
        engine = self.server.control.engine
        run = engine.get_state().agent_runs.get(SessionId(session_id))
        stream = None
        if run is not None and run.is_active:  # a requested run's output starts soon
            stream = engine.streams.wait_subscribe(SessionId(session_id), FOLLOW_START_WAIT)
        if stream is None:
            self._send({"ok": False, "kind": "not-found", "error": "not running"})
            return
        self._send({"ok": True})
        self.connection.settimeout(None)  # a run may be quiet for long
        try:
            for chunk in stream:
                self._send({"output": redact_value(chunk)})
            self._send({"end": True})
        except OSError:
            return  # the follower went away

    def _send(self, reply: dict[str, Any]) -> None:
        self.wfile.write(json.dumps(reply).encode() + b"\n")
        self.wfile.flush()


def _one_line(exc: ValidationError) -> str:
    problems = []
    for error in exc.errors(include_url=False):
        where = ".".join(str(p) for p in error["loc"])
        problems.append(f"{where}: {error['msg']}")
    return "; ".join(problems)


@contextlib.contextmanager
def _short_path(directory: Path) -> Iterator[str]:
    """``directory`` as a path short enough for a Unix socket (107 bytes at most):
    ``/proc/self/fd/N`` of a descriptor open on it, whatever its own length."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        yield f"/proc/self/fd/{fd}"
    finally:
        os.close(fd)


# ---------------------------------------------------------------------------- the client


class NoEngine(Exception):
    """No engine answers on the control socket."""


def exchange(
    state_dir: Path,
    message: dict[str, Any],
    timeout: float,
    read_timeout: float | None = None,
) -> Iterator[dict[str, Any]]:
    """Send ``message`` to the engine of ``state_dir``; its reply lines (each waited for up to
    ``read_timeout``, for ever when None). ``NoEngine`` when no engine listens there (no
    socket, or one a stopped engine left)."""
    sock = connect(state_dir, timeout)
    with sock, sock.makefile("rb") as replies:
        sock.sendall(json.dumps(message).encode() + b"\n")
        sock.settimeout(read_timeout)
        for line in replies:
            if line.strip():
                yield json.loads(line)


def connect(state_dir: Path, timeout: float) -> socket.socket:
    """A connection to the engine of ``state_dir``'s control socket (``timeout`` set on it);
    ``NoEngine`` when no engine listens there (no socket, or one a stopped engine left)."""
    if not (state_dir / SOCKET_NAME).exists():
        raise NoEngine
    with _short_path(state_dir) as directory:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.settimeout(timeout)
            sock.connect(f"{directory}/{SOCKET_NAME}")
        except (ConnectionRefusedError, FileNotFoundError):
            sock.close()
            raise NoEngine from None
        except BaseException:
            sock.close()
            raise
    return sock


def poke(state_dir: Path, pollers: Sequence[str]) -> bool:
    """Ask the engine of ``state_dir`` to poll ``pollers`` now (a command wrote what they read);
    False when no engine answers (the next one reads it at its start)."""
    try:
        replies = exchange(state_dir, {"refresh": list(pollers)}, 5, read_timeout=10)
        return bool(next(iter(replies), {}).get("ok"))
    except (NoEngine, OSError, ValueError):
        return False


# ---------------------------------------------------------------------------- no engine running


def accept_offline(
    request: UserRequest,
    settings: ControlSettings,
    state_dir: Path,
    tracker_items: Callable[[], list[WorkItem] | None],
) -> Accepted:
    """Judge ``request`` against the journal (with ``tracker_items``, the local tracker's
    items, over its view of them) and append its events for the next ``cpe run``. Holds the
    engine's instance lock meanwhile: ``JournalError`` when an engine has it."""
    path = state_dir / JOURNAL_NAME
    lock = InstanceLock(str(path))
    lock.acquire()
    try:
        check_journal(path)  # a lost journal is not replaced by one holding only this request
        journal = Journal(path)
        try:
            restored = journal.restore()
            state = restored.state
            for entry in restored.unprocessed:
                state = apply_event(state, entry.event)
            state = _as_at_start(state)
            tracked = tracker_items()
            if tracked is not None:
                known = state.work_items
                items = {i.id: merge_observed_work_item(known.get(i.id), i) for i in tracked}
                state = state.model_copy(update={"work_items": items})
            now = datetime.now(UTC)
            accepted = accept(
                request,
                state,
                at=now,
                dispatch_paused=_paused(state, now, settings.breaker),
                max_concurrent=settings.max_concurrent,
            )
            for event in accepted.events:
                journal.append(event)
        finally:
            journal.close()
    finally:
        lock.release()
    if accepted.events:
        suffix = "; cpe run acts on it when it starts"
        return Accepted(accepted.events, accepted.message + suffix)
    return accepted


def _paused(state: EngineState, now: datetime, breaker: BreakerSettings) -> str | None:
    """Why no run may start now, in the executor's words: a person's pause, or the breaker's
    while it lasts (``domain.admission.dispatch_pauses``, what ``cpe resume`` lifts)."""
    pauses = dispatch_pauses(state, now, breaker.rule())
    return pauses[0].words if pauses else None


def _as_at_start(state: EngineState) -> EngineState:
    """The state the next start will judge by: runs the journal shows active were interrupted
    (the start fails them), so they hold nothing up."""
    for run in list(state.agent_runs.values()):
        if run.is_active:
            state = apply_event(
                state,
                AgentFailed(
                    session_id=run.session_id,
                    role=run.role,
                    kind="failed",
                    reason="interrupted: cpe stopped while the run was active",
                ),
            )
    return state

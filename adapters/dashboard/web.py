"""The dashboard's web application (Starlette): the board, a run's page and an item's page,
their JSON endpoints, server-sent events, the actions, the metrics and the icon.

Reads need nothing. Every action is a POST with ``Authorization: Bearer TOKEN`` (the token
``cpe run`` printed, or ``[dashboard] token_env``'s): no token is 401, a wrong one 403, and a
GET is never an action (405). Bound to the loopback, only a loopback ``Host`` is served (a web
page elsewhere cannot reach it by rebinding a name). Every answer that is not a page, the
metrics or the icon is JSON; an error is ``{"error": one line}`` with its HTTP status (a page
for a run or an item the engine does not know is a page saying so, 404).
"""

from __future__ import annotations

import asyncio
import hmac
import json
import re
from collections.abc import AsyncIterator
from importlib import resources
from typing import Any

from pydantic import ValidationError
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response, StreamingResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from adapters.dashboard.metrics import CONTENT_TYPE, render_metrics
from adapters.dashboard.page import render_board, render_page
from adapters.dashboard.pages import (
    item_detail,
    render_item_page,
    render_missing,
    render_run,
    render_run_page,
    run_detail,
)
from adapters.dashboard.source import Source
from adapters.dashboard.views import state_view
from adapters.host.webhooks.receiver import PATHS as HOOK_PATHS
from adapters.host.webhooks.receiver import WebhookReceiver
from adapters.runtime.artifacts.activity import TranscriptTail
from adapters.support.redaction import redact_value
from domain.models import SessionId, WorkItemId
from domain.requests import (
    REQUEST_ADAPTER,
    Cancel,
    Pause,
    RequestRefused,
    Resume,
    Retry,
    UserRequest,
)

LOOPBACK_HOSTS = ["127.0.0.1", "localhost", "::1", "[::1]"]
HEARTBEAT = 15.0  # seconds between two keep-alive comments on an idle event stream
STATE_EVERY = 0.25  # seconds at least between two state events (a burst is sent once)
TAIL_EVERY = 0.3  # seconds between two reads of a live run's transcript
_SESSION = re.compile(r"^[A-Za-z0-9._-]{1,128}$")
_ICON = "image/svg+xml"
_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}
_STATUS = {"not-found": 404, "conflict": 409, "invalid": 422}


def create_app(
    source: Source,
    token: str | None,
    *,
    loopback_only: bool = True,
    webhooks: WebhookReceiver | None = None,
) -> Starlette:
    """The application over ``source``; ``token`` guards the actions (None: no action);
    ``webhooks`` takes the deliveries (None: none, each hook answers 404 saying why)."""
    files = resources.files("adapters.dashboard") / "static"
    static = StaticFiles(directory=str(files))
    webhooks = webhooks or WebhookReceiver.unconfigured()
    web = _Web(source, token, icon=(files / "favicon.svg").read_bytes(), webhooks=webhooks)
    routes = [
        Route("/", web.page),
        Route("/board", web.board),
        Route("/runs/{session}", web.run_page),
        Route("/items/{item}", web.item_page),
        Route("/favicon.ico", web.icon),
        Route("/api/state", web.state),
        Route("/api/runs/{session}", web.run),
        Route("/api/events", web.events),
        Route("/api/work/{item}/retry", web.retry, methods=["POST"]),
        Route("/api/work/{item}/cancel", web.cancel, methods=["POST"]),
        Route("/api/work/{item}/status", web.set_status, methods=["POST"]),
        Route("/api/pause", web.pause, methods=["POST"]),
        Route("/api/resume", web.resume, methods=["POST"]),
        Route("/metrics", web.metrics),
        Mount("/static", app=static, name="static"),
        *webhooks.routes(),
    ]
    middleware = []
    if loopback_only:
        middleware.append(Middleware(_LoopbackHosts))
    app = Starlette(routes=routes, middleware=middleware, exception_handlers={404: _not_found})
    app.add_middleware(_SecurityHeaders)
    return app


def create_hooks_app(webhooks: WebhookReceiver) -> Starlette:
    """``/hooks/*`` alone, for any ``Host`` (``[webhooks] listen``): nothing of the board."""
    app = Starlette(routes=webhooks.routes(), exception_handlers={404: _no_hook})
    app.add_middleware(_SecurityHeaders)
    return app


class _LoopbackHosts:
    """Only a loopback ``Host`` is served, but at the webhook paths (a signature guards those)."""

    def __init__(self, app: Any):
        self.app = app
        self.checked = TrustedHostMiddleware(app, allowed_hosts=LOOPBACK_HOSTS)

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["path"] in HOOK_PATHS:
            await self.app(scope, receive, send)
        else:
            await self.checked(scope, receive, send)


class _SecurityHeaders:
    def __init__(self, app: Any):
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def with_headers(message: Any) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                headers += [(k.lower().encode(), v.encode()) for k, v in _HEADERS.items()]
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, with_headers)


async def _not_found(request: Request, exc: Exception) -> Response:
    return _error(404, f"no such page {request.url.path!r}; see / and /api/state")


async def _no_hook(request: Request, exc: Exception) -> Response:
    hooks = ", ".join(sorted(HOOK_PATHS))
    return _error(404, f"no such hook {request.url.path!r}; this address serves POST {hooks}")


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": " ".join(message.split())}, status_code=status)


class _Web:
    def __init__(
        self, source: Source, token: str | None, *, icon: bytes, webhooks: WebhookReceiver
    ):
        self.source = source
        self.token = token
        self.icon_svg = icon
        self.webhooks = webhooks

    # ------------------------------------------------------------------ reads

    async def page(self, request: Request) -> Response:
        return HTMLResponse(render_page(state_view(self.source)))

    async def board(self, request: Request) -> Response:
        return HTMLResponse(render_board(state_view(self.source)))

    async def state(self, request: Request) -> Response:
        return JSONResponse(state_view(self.source))

    async def run(self, request: Request) -> Response:
        session = request.path_params["session"]
        run = self.source.state().agent_runs.get(SessionId(session))
        if not _SESSION.match(session) or run is None:
            return _error(
                404, f"unknown session {session!r}; expected one GET /api/state lists under runs"
            )
        # its transcript is read whole: off the server's loop
        return JSONResponse(await asyncio.to_thread(run_detail, self.source, run))

    async def run_page(self, request: Request) -> Response:
        """A run's page; ``?part=body`` its body alone (the page's script redraws it)."""
        session = request.path_params["session"]
        run = self.source.state().agent_runs.get(SessionId(session))
        if not _SESSION.match(session) or run is None:
            message = f"unknown session {session!r}: expected one the board lists under agent runs"
            return HTMLResponse(render_missing("no such run", message), status_code=404)
        detail = await asyncio.to_thread(run_detail, self.source, run)
        if request.query_params.get("part") == "body":
            return HTMLResponse(render_run(detail))
        return HTMLResponse(render_run_page(detail))

    async def item_page(self, request: Request) -> Response:
        """What ``cpe work show`` prints of an item (its status history is read from the
        journal: off the server's loop)."""
        wid = _item(request)
        item = self.source.state().work_items.get(wid)
        if item is None:
            message = f"unknown work item {wid!r}: expected one the board shows"
            return HTMLResponse(render_missing("no such work item", message), status_code=404)
        detail = await asyncio.to_thread(item_detail, self.source, item)
        return HTMLResponse(render_item_page(detail))

    async def icon(self, request: Request) -> Response:
        return Response(self.icon_svg, media_type=_ICON)

    async def metrics(self, request: Request) -> Response:
        metrics = render_metrics(self.source, webhooks=self.webhooks.stats.snapshot())
        return Response(metrics, media_type=CONTENT_TYPE)

    async def events(self, request: Request) -> Response:
        return StreamingResponse(
            self._events(request),
            media_type="text/event-stream",
            headers={"X-Accel-Buffering": "no"},
        )

    async def _events(self, request: Request) -> AsyncIterator[str]:
        """``state`` (the /api/state JSON) at once and on every change; ``output`` ({session,
        text}) for every active run's activity, from the start of the run, as it comes."""
        loop = asyncio.get_running_loop()
        changed = asyncio.Event()
        queue: asyncio.Queue[str] = asyncio.Queue()
        pumps: dict[str, asyncio.Task[bool]] = {}

        def on_change(_: object) -> None:
            try:
                loop.call_soon_threadsafe(changed.set)
            except RuntimeError:  # the server's loop is gone: this stream ended with it
                unsubscribe()

        unsubscribe = self.source.subscribe(on_change)
        try:
            changed.set()
            while True:
                if changed.is_set():
                    changed.clear()
                    view = state_view(self.source)
                    for run in view["runs"]["active"]:
                        sid = run["session_id"]
                        pump = pumps.get(sid)
                        # A run requested but not started has no stream yet: its pump found
                        # none and ended; it is tried again on the next change (AgentStarted).
                        if pump is None or (pump.done() and not pump.result()):
                            pumps[sid] = asyncio.create_task(self._pump(sid, queue))
                    yield _sse("state", view)
                    await asyncio.sleep(STATE_EVERY)
                while not queue.empty():
                    yield queue.get_nowait()
                waits = [asyncio.ensure_future(changed.wait()), asyncio.ensure_future(queue.get())]
                done, pending = await asyncio.wait(
                    waits, timeout=HEARTBEAT, return_when="FIRST_COMPLETED"
                )
                for task in pending:
                    task.cancel()
                for task in done:
                    result = task.result()
                    if isinstance(result, str):
                        yield result
                if not done:
                    yield ": keep-alive\n\n"
                if await request.is_disconnected():
                    return
        finally:
            unsubscribe()
            for task in pumps.values():
                task.cancel()

    async def _pump(self, session: str, queue: asyncio.Queue[str]) -> bool:
        """What the run does (its transcript's activity: tool calls, results, text, retries),
        from its start, as it comes, until it ends; False when it is a remote run with no
        output stream yet (its transcript comes back from its node only when it ends, so its
        prose stream is shown meanwhile)."""
        tail = TranscriptTail(self.source.state_dir / "runs" / session)
        while True:
            run = self.source.state().agent_runs.get(SessionId(session))
            if run is not None and run.is_active and self.source.placement(run) is not None:
                return await self._pump_stream(session, queue)
            lines = await asyncio.to_thread(tail.read)
            if lines:
                await queue.put(_output(session, "\n".join(lines)))
            if tail.finished or run is None or not run.is_active:
                break  # the read above came after the run ended: it holds the rest
            await asyncio.sleep(TAIL_EVERY)
        await queue.put(_sse("output", {"session": session, "end": True}))
        return True

    async def _pump_stream(self, session: str, queue: asyncio.Queue[str]) -> bool:
        """The run's prose output stream, from its start; False when it has none (yet)."""
        stream = self.source.stream(SessionId(session))
        if stream is None:
            return False
        async for chunk in stream:
            await queue.put(_output(session, chunk))
        await queue.put(_sse("output", {"session": session, "end": True}))
        return True

    # ------------------------------------------------------------------ actions

    async def retry(self, request: Request) -> Response:
        return await self._act(request, lambda body: Retry(work_item_id=_item(request)))

    async def cancel(self, request: Request) -> Response:
        return await self._act(request, lambda body: Cancel(work_item_id=_item(request)))

    async def set_status(self, request: Request) -> Response:
        return await self._act(
            request,
            lambda body: REQUEST_ADAPTER.validate_python(
                {"op": "set-status", "work_item_id": _item(request), "to": body.get("status")}
            ),
        )

    async def pause(self, request: Request) -> Response:
        return await self._act(request, lambda body: Pause(reason=str(body.get("reason") or "")))

    async def resume(self, request: Request) -> Response:
        return await self._act(request, lambda body: Resume())

    async def _act(self, request: Request, build: Any) -> Response:
        refused = self._refuse(request)
        if refused is not None:
            return refused
        try:
            raw = await request.body()
            body = json.loads(raw) if raw.strip() else {}
            if not isinstance(body, dict):
                return _error(422, "expected a JSON object as the body")
            payload: UserRequest = build(body)
        except json.JSONDecodeError as exc:
            return _error(422, f"the body is not JSON: {exc}")
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors()
            )
            return _error(422, problems)
        control = self.source.control
        assert control is not None  # _refuse said so
        try:
            accepted = await asyncio.to_thread(control.handle, payload)
        except RequestRefused as exc:
            return _error(_STATUS.get(exc.kind, 409), str(exc))
        return JSONResponse({"ok": True, "message": accepted.message})

    def _refuse(self, request: Request) -> Response | None:
        if self.token is None or self.source.control is None:
            return _error(409, "this dashboard only shows: it takes no action")
        header = request.headers.get("authorization", "")
        scheme, _, given = header.partition(" ")
        if not header:
            return _error(
                401,
                "missing token: send Authorization: Bearer TOKEN (the token cpe run printed at "
                "start, or the one [dashboard] token_env names)",
            )
        if scheme.lower() != "bearer" or not hmac.compare_digest(
            given.encode(), self.token.encode()
        ):
            return _error(403, "wrong token: expected the token cpe run printed at start")
        if not self.source.running:
            return _error(409, "the engine has stopped: nothing to act on")
        return None


def _item(request: Request) -> WorkItemId:
    return WorkItemId(request.path_params["item"])


def _output(session: str, text: str) -> str:
    return _sse("output", {"session": session, "text": redact_value(text)})


def _sse(event: str, data: Any) -> str:
    return f"event: {event}\ndata: {json.dumps(data, separators=(',', ':'))}\n\n"

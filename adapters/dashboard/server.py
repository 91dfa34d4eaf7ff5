"""The dashboard's HTTP server: uvicorn serving ``create_app`` in a thread of its own, as a
``Service`` (``actors.services``): a crash of it is restarted and never touches the engine.

The socket is bound here (``Listener``), not by uvicorn, so that a port in use is an error
saying so (uvicorn would exit the process), and so that ``listen = "127.0.0.1:0"`` learns the
port it got: ``url`` holds the address once it listens. A caller may bind before anything else
starts (``Listener.bind``), to learn at once whether the dashboard can listen; the restarted
server binds the port the first one got.

An address no restart can make available (in use, a port below 1024 without the privilege, an
address this machine does not have, a host name that does not resolve) is a ``ConfigError``
naming it and the way out, and the supervisor does not restart a service that raised one. Only
the default address, which nobody chose, gives way: in use, a free port on the same host is
taken instead (``fallback``), and ``url`` says which.
"""

from __future__ import annotations

import errno
import logging
import socket
import threading
from collections.abc import Callable

import structlog
import uvicorn

from adapters.dashboard.source import Source
from adapters.dashboard.web import create_app, create_hooks_app
from adapters.host.webhooks.receiver import WebhookReceiver
from adapters.support.addresses import is_loopback
from domain.errors import ConfigError

log = structlog.get_logger("cpe.dashboard")

SHUTDOWN_GRACE = 2  # seconds open event streams get to close when the server stops
WAY_OUT = (
    'set [dashboard] listen in supervisor.toml to a free HOST:PORT (port 0: any free one), or ""'
    " to turn the dashboard off"
)


def split_listen(listen: str) -> tuple[str, int]:
    host, _, port = listen.rpartition(":")
    return host.removeprefix("[").removesuffix("]"), int(port)


def address(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


class Listener:
    """Where the dashboard listens, across its restarts: ``bind()`` binds the socket ahead of
    the first serve (once; later calls keep it), ``take()`` hands a serve its socket (the one
    bound ahead, else a new one on the port the first got), ``close()`` closes one never taken.

    ``way_out`` ends the error of an address that cannot be used (what to change); with
    ``fallback`` (the default address, not one a person chose) an address in use at the first
    bind gives way to a free port on the same host, ``moved_from`` then naming the address
    wanted. ``url`` is the address it really listens on, once bound."""

    def __init__(self, listen: str, *, fallback: bool = False, way_out: str = WAY_OUT):
        self.host, self.port = split_listen(listen)
        self.fallback = fallback
        self.way_out = way_out
        self.url: str | None = None
        self.moved_from: str | None = None
        self._bound: socket.socket | None = None
        self._lock = threading.Lock()

    def bind(self) -> str:
        """Bind now, if no socket waits already; the URL. ``ConfigError`` when no restart
        could make the address available, ``OSError`` for another failure."""
        with self._lock:
            if self._bound is None:
                self._bound = self._bind()
            assert self.url is not None
            return self.url

    def take(self) -> socket.socket:
        with self._lock:
            sock, self._bound = self._bound, None
            return sock if sock is not None else self._bind()

    def close(self) -> None:
        with self._lock:
            sock, self._bound = self._bound, None
        if sock is not None:
            sock.close()

    def _bind(self) -> socket.socket:
        wanted: str | None = None  # the address that gave way to a free port
        try:
            sock = _listening_socket(self.host, self.port)
        except OSError as exc:
            if not (self.fallback and self.port and exc.errno == errno.EADDRINUSE):
                raise self._error(exc) from exc
            wanted = self.moved_from = address(self.host, self.port)
            try:
                sock = _listening_socket(self.host, 0)
            except OSError as again:
                raise self._error(again) from again
        # A restart binds the same port: its URL was given out already.
        self.fallback = False
        self.port = sock.getsockname()[1]
        shown = f"[{self.host}]" if ":" in self.host else self.host
        self.url = f"http://{shown}:{self.port}/"
        if wanted is not None:
            log.warning(
                "the dashboard's default address is in use; it listens on a free port instead",
                wanted=wanted,
                url=self.url,
            )
        return sock

    def _error(self, exc: OSError) -> Exception:
        where = address(self.host, self.port)
        if isinstance(exc, socket.gaierror):
            why = f"the host {self.host!r} does not resolve ({exc.strerror})"
        elif exc.errno == errno.EADDRINUSE:
            why = "the address is in use (another cpe run?)"
        elif exc.errno in (errno.EACCES, errno.EPERM):
            why = "permission denied" + (
                " (a port below 1024 needs privileges)" if 0 < self.port < 1024 else ""
            )
        elif exc.errno == errno.EADDRNOTAVAIL:
            why = "this machine has no such address"
        else:  # a failure a restart may fix (out of file descriptors …)
            return OSError(f"the dashboard cannot listen on {where}: {exc}")
        return ConfigError(f"the dashboard cannot listen on {where}: {why}; {self.way_out}")


def _listening_socket(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(64)
    except BaseException:
        sock.close()
        raise
    return sock


class DashboardServer:
    """The dashboard (with the webhook receiver's ``/hooks/*``), or with ``hooks_only`` the
    receiver alone, for any ``Host`` (``[webhooks] listen``)."""

    name = "dashboard"

    def __init__(
        self,
        source: Source,
        listen: str | Listener,
        token: str | None,
        *,
        on_listening: Callable[[DashboardServer], None] | None = None,
        webhooks: WebhookReceiver | None = None,
        hooks_only: bool = False,
    ):
        self.source = source
        self.webhooks = webhooks
        self.hooks_only = hooks_only
        if hooks_only:
            self.name = "webhook receiver"
        self.listener = listen if isinstance(listen, Listener) else Listener(listen)
        self.host, self.port = self.listener.host, self.listener.port
        self.token = token
        self.url: str | None = None
        self.listening = threading.Event()
        self._server: uvicorn.Server | None = None
        self._closed = threading.Event()
        self._on_listening = on_listening

    def serve(self) -> None:
        sock = self.listener.take()  # a ConfigError: the supervisor does not restart it
        try:
            self._serve(sock)
        finally:
            sock.close()
        if not self._closed.is_set():
            raise RuntimeError("the dashboard's server stopped by itself")

    def _serve(self, sock: socket.socket) -> None:
        self.port = port = self.listener.port
        self.url = self.listener.url
        if self.hooks_only and self.webhooks is not None:
            app = create_hooks_app(self.webhooks)
        else:
            app = create_app(
                self.source,
                self.token,
                loopback_only=is_loopback(self.host),
                webhooks=self.webhooks,
            )
        config = uvicorn.Config(
            app,
            log_config=None,  # our logging, not uvicorn's
            access_log=False,
            lifespan="off",
            timeout_graceful_shutdown=SHUTDOWN_GRACE,
            ws="none",
        )
        logging.getLogger("uvicorn.error").setLevel(logging.WARNING)  # its start and stop lines
        server = uvicorn.Server(config)
        self._server = server
        if self._closed.is_set():
            return
        if not is_loopback(self.host) and not self.hooks_only:
            log.warning(
                "the dashboard listens beyond this machine: anyone who reaches it sees the "
                "board (actions still need the token)",
                listen=f"{self.host}:{port}",
            )
        self.listening.set()
        if self._on_listening is not None:
            self._on_listening(self)
        server.run(sockets=[sock])

    def shutdown(self) -> None:
        self._closed.set()
        server = self._server
        if server is not None:
            server.should_exit = True

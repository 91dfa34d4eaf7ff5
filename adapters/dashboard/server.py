"""The dashboard's HTTP server: uvicorn serving ``create_app`` in a thread of its own, as a
``Service`` (``actors.services``): a crash of it is restarted and never touches the engine.

The socket is bound here, not by uvicorn, so that a port in use is an ``OSError`` saying so
(uvicorn would exit the process), and so that ``listen = "127.0.0.1:0"`` learns the port it
got: ``url`` holds the address once it listens. The restarted server binds the same address.
"""

from __future__ import annotations

import ipaddress
import logging
import socket
import threading
from collections.abc import Callable

import structlog
import uvicorn

from adapters.dashboard.source import Source
from adapters.dashboard.web import create_app

log = structlog.get_logger("cpe.dashboard")

SHUTDOWN_GRACE = 2  # seconds open event streams get to close when the server stops


def split_listen(listen: str) -> tuple[str, int]:
    host, _, port = listen.rpartition(":")
    return host.removeprefix("[").removesuffix("]"), int(port)


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class DashboardServer:
    name = "dashboard"

    def __init__(
        self,
        source: Source,
        listen: str,
        token: str | None,
        *,
        on_listening: Callable[[DashboardServer], None] | None = None,
    ):
        self.source = source
        self.host, self.port = split_listen(listen)
        self.token = token
        self.url: str | None = None
        self.listening = threading.Event()
        self._server: uvicorn.Server | None = None
        self._closed = threading.Event()
        self._on_listening = on_listening

    def serve(self) -> None:
        family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((self.host, self.port))
            sock.listen(64)
        except OSError as exc:
            sock.close()
            raise OSError(f"the dashboard cannot listen on {self.host}:{self.port}: {exc}") from exc
        port = sock.getsockname()[1]
        self.port = port  # a restart binds the same port
        shown = f"[{self.host}]" if ":" in self.host else self.host
        self.url = f"http://{shown}:{port}/"
        app = create_app(self.source, self.token, loopback_only=is_loopback(self.host))
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
            sock.close()
            return
        if not is_loopback(self.host):
            log.warning(
                "the dashboard listens beyond this machine: anyone who reaches it sees the "
                "board (actions still need the token)",
                listen=f"{self.host}:{port}",
            )
        self.listening.set()
        if self._on_listening is not None:
            self._on_listening(self)
        try:
            server.run(sockets=[sock])
        finally:
            sock.close()
        if not self._closed.is_set():
            raise RuntimeError("the dashboard's server stopped by itself")

    def shutdown(self) -> None:
        self._closed.set()
        server = self._server
        if server is not None:
            server.should_exit = True

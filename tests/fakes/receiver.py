"""A webhook receiver for the fakes' own tests: it keeps what it is sent and answers a set status
(or hangs, for a receiver that never answers), on 127.0.0.1 port 0. Not cpe's receiver: that one
is tested against the fakes end to end (tests/e2e/test_webhooks.py)."""

from __future__ import annotations

import socket
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, Self


@dataclass(frozen=True)
class Received:
    path: str
    headers: dict[str, str]  # names lower-cased
    body: bytes


class Receiver:
    """``with Receiver() as hook:`` — ``hook.url`` takes POSTs; ``hook.received`` lists them;
    ``hook.status`` is what it answers; ``hook.hang`` holds each request until the receiver
    closes (a receiver that accepts the connection and never answers)."""

    def __init__(self, status: int = 202) -> None:
        self.status = status
        self.hang = False
        self.received: list[Received] = []
        self._released = threading.Event()
        self._lock = threading.Condition()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length)
                headers = {k.lower(): v for k, v in self.headers.items()}
                with receiver._lock:
                    receiver.received.append(Received(self.path, headers, body))
                    receiver._lock.notify_all()
                if receiver.hang:
                    receiver._released.wait()
                    return
                self.send_response(receiver.status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}/hooks/test"

    def wait_for(self, count: int, timeout: float = 30.0) -> list[Received]:
        """Until ``count`` requests have arrived (answered or held); a TimeoutError after
        ``timeout`` seconds."""
        with self._lock:
            if not self._lock.wait_for(lambda: len(self.received) >= count, timeout):
                raise TimeoutError(f"{len(self.received)} of {count} requests arrived")
            return list(self.received)

    def close(self) -> None:
        self._released.set()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


def closed_port_url() -> str:
    """A loopback URL nothing listens on (a receiver that is down): connections are refused."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/hooks/down"

"""cpe's registry proxy: the only way out of a sandbox, to the registries ``allow_install`` names.

A sandboxed command has a network namespace of its own: no route off the machine. With
``[sandbox] allow_install`` its ``HTTPS_PROXY`` is ``http://127.0.0.1:3128``, where a forwarder
in the sandbox (``forward.py``) relays each connection over a Unix socket bound into it to this
proxy, in cpe. It answers ``CONNECT host:port`` for the hosts of ``[sandbox] registries`` only
(``*.`` for subdomains, port 443 unless named) with a tunnel, and anything else with ``403``: a
command reaches pypi.org, and nothing else on the internet or on the host. It runs in cpe's
process (threads): it ends with cpe, and its socket's directory is removed when it closes.
"""

from __future__ import annotations

import contextlib
import shutil
import socket
import tempfile
import threading
from collections.abc import Sequence
from fnmatch import fnmatchcase
from pathlib import Path

import structlog

__all__ = ["RegistryProxy", "allowed"]

log = structlog.get_logger("cpe.runtime.sandbox.proxy")

_HEAD_LIMIT = 16 * 1024
_TIMEOUT = 30.0
_CHUNK = 64 * 1024


def allowed(entries: Sequence[str], host: str, port: int) -> bool:
    """Whether ``host:port`` is one of ``entries`` (``name``, ``*.name``, ``name:port``)."""
    for entry in entries:
        name, _, wanted = entry.partition(":")
        if (int(wanted) if wanted else 443) != port:
            continue
        name = name.lower()
        host = host.lower().rstrip(".")
        if host == name or (name.startswith("*.") and fnmatchcase(host, name)):
            return True
    return False


class RegistryProxy:
    """A CONNECT proxy on a Unix socket (``path``) for the hosts ``registries`` names."""

    def __init__(self, registries: Sequence[str]) -> None:
        self.registries = tuple(registries)
        # short, private, outside the state directory: a Unix socket path has 107 bytes
        self._dir = Path(tempfile.mkdtemp(prefix="cpe-proxy-"))
        self.path = str(self._dir / "proxy.sock")
        self._server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._server.bind(self.path)
        self._server.listen(64)
        self._closed = threading.Event()
        self._thread = threading.Thread(target=self._serve, name="cpe-registry-proxy", daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._closed.set()
        with contextlib.suppress(OSError):
            self._server.shutdown(socket.SHUT_RDWR)
        self._server.close()
        self._thread.join(timeout=_TIMEOUT)
        shutil.rmtree(self._dir, ignore_errors=True)

    def _serve(self) -> None:
        while not self._closed.is_set():
            try:
                client, _ = self._server.accept()
            except OSError:
                return  # closed
            threading.Thread(target=self._handle, args=(client,), daemon=True).start()

    def _handle(self, client: socket.socket) -> None:
        with client:
            client.settimeout(_TIMEOUT)
            try:
                head = _read_head(client)
                method, target = _request_line(head)
                host, _, port_text = target.rpartition(":")
                port = int(port_text) if port_text.isdigit() else -1
            except (OSError, ValueError) as exc:
                _answer(client, 400, f"cpe's proxy could not read the request: {exc}")
                return
            if method != "CONNECT":
                _answer(client, 403, "cpe's proxy only tunnels HTTPS (CONNECT) to the registries")
                return
            host = host.strip("[]")
            if not allowed(self.registries, host, port):
                log.warning("the sandbox proxy refused a host", host=host, port=port)
                _answer(client, 403, f"{host}:{port} is not in [sandbox] registries")
                return
            try:
                upstream = socket.create_connection((host, port), timeout=_TIMEOUT)
            except OSError as exc:
                _answer(client, 502, f"cpe's proxy cannot reach {host}:{port}: {exc}")
                return
            with upstream:
                client.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
                _relay(client, upstream)


def _read_head(client: socket.socket) -> bytes:
    head = b""
    while b"\r\n\r\n" not in head:
        chunk = client.recv(1024)
        if not chunk:
            raise ValueError("the connection ended before the request did")
        head += chunk
        if len(head) > _HEAD_LIMIT:
            raise ValueError("a request head over 16 KiB")
    return head


def _request_line(head: bytes) -> tuple[str, str]:
    line = head.split(b"\r\n", 1)[0].decode("latin-1")
    parts = line.split()
    if len(parts) != 3 or not parts[2].startswith("HTTP/"):
        raise ValueError(f"not an HTTP request line: {line[:100]!r}")
    return parts[0].upper(), parts[1]


def _answer(client: socket.socket, status: int, text: str) -> None:
    reason = {400: "Bad Request", 403: "Forbidden", 502: "Bad Gateway"}[status]
    body = (text + "\n").encode()
    with contextlib.suppress(OSError):
        client.sendall(
            f"HTTP/1.1 {status} {reason}\r\nContent-Type: text/plain\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode()
            + body
        )


def _relay(a: socket.socket, b: socket.socket) -> None:
    """Copy both ways until each side has finished sending."""
    a.settimeout(None)
    b.settimeout(None)

    def pump(source: socket.socket, sink: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while chunk := source.recv(_CHUNK):
                sink.sendall(chunk)
        with contextlib.suppress(OSError):
            sink.shutdown(socket.SHUT_WR)

    back = threading.Thread(target=pump, args=(b, a), daemon=True)
    back.start()
    pump(a, b)
    back.join()

"""Runs first in a sandbox with ``allow_install``: ``forward.py SOCKET PORT -- COMMAND…``.

It listens on ``127.0.0.1:PORT`` (the sandbox's own loopback), then forks: the child relays every
connection there to the Unix socket ``SOCKET`` (cpe's registry proxy, bound into the sandbox),
the parent becomes ``COMMAND``. The port is listening before the command starts; the relay dies
with the sandbox (its pid namespace ends with the command). Standard library only: it runs with
``python -I``, outside cpe's environment.
"""

from __future__ import annotations

import contextlib
import os
import socket
import sys
import threading
from typing import NoReturn


def main(argv: list[str]) -> NoReturn:
    """Never returns: the process becomes the command (or exits 2 on a usage error)."""
    if len(argv) < 4 or argv[2] != "--":
        sys.stderr.write("usage: forward.py SOCKET PORT -- COMMAND...\n")
        sys.exit(2)
    path, port, command = argv[0], int(argv[1]), argv[3:]
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", port))
    listener.listen(64)
    if os.fork() == 0:
        _quiet()
        _serve(listener, path)
        os._exit(0)
    listener.close()
    os.execvp(command[0], command)


def _quiet() -> None:
    """The relay keeps none of the command's output open (a reader waits for its end)."""
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)


def _serve(listener: socket.socket, path: str) -> None:
    while True:
        client, _ = listener.accept()
        threading.Thread(target=_relay, args=(client, path), daemon=True).start()


def _relay(client: socket.socket, path: str) -> None:
    upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        upstream.connect(path)
    except OSError:
        client.close()
        return

    def pump(source: socket.socket, sink: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while chunk := source.recv(65536):
                sink.sendall(chunk)
        with contextlib.suppress(OSError):
            sink.shutdown(socket.SHUT_WR)

    back = threading.Thread(target=pump, args=(upstream, client), daemon=True)
    back.start()
    pump(client, upstream)
    back.join()
    client.close()
    upstream.close()


if __name__ == "__main__":
    main(sys.argv[1:])

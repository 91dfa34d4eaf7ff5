"""systemd's notify protocol: one datagram to ``$NOTIFY_SOCKET`` (``@`` = abstract namespace).

``READY=1`` once the engine has started, ``WATCHDOG=1`` on every tick while the engine answers,
``STOPPING=1`` when a stop begins. Without ``$NOTIFY_SOCKET`` (not under systemd) it does
nothing.
"""

from __future__ import annotations

import os
import socket


def notify(state: str, environ: dict[str, str] | None = None) -> bool:
    """Send ``state``; True when a socket was there to receive it."""
    address = (environ if environ is not None else dict(os.environ)).get("NOTIFY_SOCKET")
    if not address:
        return False
    target = "\0" + address[1:] if address.startswith("@") else address
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        try:
            sock.sendto(state.encode(), target)
        except OSError:
            return False
    return True

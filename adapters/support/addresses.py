"""A listening address as ``supervisor.toml`` gives it (``HOST:PORT``), checked the same way
for the dashboard and the webhooks, and whether a host is this machine's loopback."""

from __future__ import annotations

import ipaddress


def check_listen(value: str, *, example: str, when_empty: str) -> str:
    """``value`` if it is empty or ``HOST:PORT`` (``[::1]:8765`` too; port 0: any free one);
    else ``ValueError`` saying what is expected (``example``, and what an empty string does)."""
    if not value:
        return value
    host, colon, port = value.rpartition(":")
    host = host.removeprefix("[").removesuffix("]")
    if not colon or not host or not port.isdecimal() or int(port) > 65535:
        raise ValueError(
            f"expected HOST:PORT (e.g. {example}; port 0 for any free one), or an empty "
            f"string to {when_empty}"
        )
    return value


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False

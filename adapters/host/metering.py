"""Counting what the engine asks of its provider, for the dashboard's ``/metrics``.

``metered(interfaces, meter)`` wraps each provider port in a ``Metered`` object that counts its
calls by port and method, and the ``ProviderError`` s they raise by kind (``rate-limited`` for a
429 or a rate-limit 403, else ``not-found``, ``conflict``, ``transient``, ``permanent``). The
wrapper changes nothing else: arguments, results and errors pass through as they are. A remote
provider (GitHub, GitLab) also reports what went over the wire (``wires``, by system: requests,
304s, retries, rate-limited responses, the remaining rate limit; ``wire``, all of them summed).
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable
from typing import Any

from domain.errors import ConflictError, NotFoundError, ProviderError
from domain.ports import ProviderInterfaces


class ProviderMeter:
    def __init__(self, wire: Callable[[], Any] | None = None):
        self._lock = threading.Lock()
        self.calls: Counter[tuple[str, str]] = Counter()
        self.errors: Counter[tuple[str, str, str]] = Counter()
        self.wire = wire  # () -> the remote systems' wire stats summed, or None
        # system ("github", "gitlab") -> () -> that system's wire stats
        self.wires: dict[str, Callable[[], Any]] = {}

    def count(self, port: str, method: str, error: BaseException | None) -> None:
        with self._lock:
            self.calls[port, method] += 1
            if isinstance(error, ProviderError):
                self.errors[port, method, error_kind(error)] += 1

    def snapshot(self) -> tuple[dict[tuple[str, str], int], dict[tuple[str, str, str], int]]:
        with self._lock:
            return dict(self.calls), dict(self.errors)


def error_kind(error: ProviderError) -> str:
    if error.status == 429 or (error.status == 403 and error.transient):
        return "rate-limited"
    if isinstance(error, NotFoundError):
        return "not-found"
    if isinstance(error, ConflictError):
        return "conflict"
    return "transient" if error.transient else "permanent"


class Metered:
    """One provider port, its public methods counted."""

    def __init__(self, inner: object, port: str, meter: ProviderMeter):
        self._inner = inner
        self._port = port
        self._meter = meter

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._inner, name)
        if name.startswith("_") or not callable(attr):
            return attr
        port, meter = self._port, self._meter

        def call(*args: Any, **kwargs: Any) -> Any:
            try:
                result = attr(*args, **kwargs)
            except BaseException as exc:
                meter.count(port, name, exc)
                raise
            meter.count(port, name, None)
            return result

        return call


def metered(interfaces: ProviderInterfaces, meter: ProviderMeter) -> ProviderInterfaces:
    """``interfaces`` with each port counted by ``meter``."""
    ports = {
        name: Metered(getattr(interfaces, name), name, meter)
        for name in (
            "work_item_reader",
            "work_item_writer",
            "revision_reader",
            "revision_writer",
            "spec_reader",
        )
    }
    return ProviderInterfaces(**ports)  # each Metered stands for its port

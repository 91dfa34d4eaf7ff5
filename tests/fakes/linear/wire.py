"""The fake Linear's records of the wire: a request as it was seen (``LinearRequest``), a fault
by operation (``LinearFault``) and a token's leaky buckets (``Bucket``, ``Budget``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from tests.fakes.http import Fault, RecordedRequest

HOUR = 3600.0


@dataclass(frozen=True)
class LinearRequest(RecordedRequest):
    """One request as the fake Linear saw it (see ``tests/fakes/http.RecordedRequest``)."""

    user: str | None = None  # the token's user's email
    auth: str | None = None  # "api_key" | "oauth" | None (refused)
    operation_name: str | None = None
    operation: str | None = None  # "query" | "mutation"
    fields: tuple[str, ...] = ()  # the root fields asked for (``issues``, ``issueCreate``)
    variables: Mapping[str, Any] = field(default_factory=dict)
    complexity: int | None = None
    document: str | None = None
    codes: tuple[str, ...] = ()  # the ``extensions.code`` of each error answered


@dataclass
class LinearFault(Fault):
    """A ``Fault`` for the requests whose operation name or a root field matches
    ``operation`` (a regex, searched); None: any request on the path."""

    operation: str | None = None


@dataclass
class Bucket:
    """A leaky bucket: ``limit`` an hour, refilled continuously."""

    limit: float
    remaining: float
    stamp: float

    def refill(self, now: float) -> None:
        self.remaining = min(self.limit, self.remaining + (now - self.stamp) * self.limit / HOUR)
        self.stamp = now

    def reset_ms(self, now: float) -> int:
        """When the bucket is full again (epoch milliseconds)."""
        return round((now + (self.limit - self.remaining) * HOUR / self.limit) * 1000)


@dataclass
class Budget:
    requests: Bucket
    complexity: Bucket

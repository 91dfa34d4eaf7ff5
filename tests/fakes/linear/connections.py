"""Linear's connections: Relay cursor pagination over a filtered, ordered list.

- ``first``/``after`` page forward, ``last``/``before`` backward; 50 nodes when neither
  ``first`` nor ``last`` is given; at most 250 a page (``first: 251`` is refused, as are a
  negative count and ``first`` with ``last``).
- ``orderBy``: ``createdAt`` (the default) or ``updatedAt``, newest first (ties by id).
- Archived entities (``archivedAt`` set, trashed issues too) are left out unless
  ``includeArchived: true``.
- Cursors are opaque: the fake's name the last node's place in the order (its sort value and
  id), so a page after it stays right when nodes are added or move meanwhile; a cursor the
  fake did not make is refused.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from tests.fakes.linear.errors import invalid

DEFAULT_PAGE = 50
MAX_PAGE = 250


def _key(node: Any, order: str) -> tuple[int, str]:
    return (node.updated_at if order == "updatedAt" else node.created_at, node.id)


def encode(key: tuple[int, str]) -> str:
    return base64.urlsafe_b64encode(json.dumps(list(key)).encode()).decode().rstrip("=")


def decode(cursor: str) -> tuple[int, str]:
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        stamp, node_id = json.loads(base64.urlsafe_b64decode(padded.encode()))
        return int(stamp), str(node_id)
    except (ValueError, TypeError):
        raise invalid(
            "Argument Validation Error",
            f"the cursor {cursor!r} is not one this API gave",
        ) from None


def page_size(args: Mapping[str, Any]) -> int:
    first, last = args.get("first"), args.get("last")
    if first is not None and last is not None:
        raise invalid("Argument Validation Error", "Use either first or last, not both.")
    count = first if first is not None else last
    if count is None:
        return DEFAULT_PAGE
    if count < 0 or count > MAX_PAGE:
        which = "first" if first is not None else "last"
        raise invalid(
            "Argument Validation Error",
            f"{which} must be between 0 and {MAX_PAGE}, not {count}.",
        )
    return int(count)


def connection(
    nodes: Iterable[Any],
    args: Mapping[str, Any],
    keep: Callable[[Any], bool] = lambda _: True,
) -> dict[str, Any]:
    """The connection (``nodes``, ``edges``, ``pageInfo``) of ``nodes`` under the Relay
    arguments ``args`` (``first``, ``after``, ``last``, ``before``, ``orderBy``,
    ``includeArchived``); ``keep`` is the filter."""
    order = args.get("orderBy") or "createdAt"
    if order not in ("createdAt", "updatedAt"):
        raise invalid(
            "Argument Validation Error", f"orderBy must be createdAt or updatedAt, not {order}"
        )
    archived = bool(args.get("includeArchived"))
    kept = [
        n
        for n in nodes
        if (archived or (n.archived_at is None and not getattr(n, "trashed", False))) and keep(n)
    ]
    kept.sort(key=lambda n: _key(n, order), reverse=True)  # newest first
    size = page_size(args)
    after, before = args.get("after"), args.get("before")
    if after is not None:
        mark = decode(after)
        kept = [n for n in kept if _key(n, order) < mark]
    if before is not None:
        mark = decode(before)
        kept = [n for n in kept if _key(n, order) > mark]
    backward = args.get("last") is not None
    if backward:
        page = kept[-size:] if size else []
        more_before, more_after = len(kept) > len(page), before is not None
    else:
        page = kept[:size]
        more_after, more_before = len(kept) > len(page), after is not None
    cursors = [encode(_key(n, order)) for n in page]
    return {
        "nodes": page,
        "edges": [{"node": n, "cursor": c} for n, c in zip(page, cursors, strict=True)],
        "pageInfo": {
            "hasNextPage": more_after,
            "hasPreviousPage": more_before,
            "startCursor": cursors[0] if cursors else None,
            "endCursor": cursors[-1] if cursors else None,
        },
    }

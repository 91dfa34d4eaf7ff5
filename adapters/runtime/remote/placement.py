"""Where a remote run ran, as the head recorded it (``<state>/runs/<session>/remote.json``);
read by ``cpe status`` and the dashboard. No Ray."""

from __future__ import annotations

import json
from pathlib import Path

REMOTE_FILE = "remote.json"  # in the run's directory on the head: where it ran


def read_placement(state_dir: Path, session_id: str) -> dict[str, str] | None:
    """A remote run's node (``node_id``, ``node_address``, ``hostname``, ``namespace``,
    ``runtime``); None for a local run, or one not placed yet."""
    try:
        where = json.loads((state_dir / "runs" / session_id / REMOTE_FILE).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(where, dict):
        return None
    return {str(k): str(v) for k, v in where.items() if isinstance(v, str | int | float)}


def describe_node(where: dict[str, str] | None) -> str:
    """``<address>/<node id's first 8>``, as ``cpe status`` and the dashboard show a node."""
    if not where:
        return ""
    address = where.get("node_address") or where.get("hostname") or ""
    node_id = where.get("node_id", "")[:8]
    return f"{address}/{node_id}" if node_id else address

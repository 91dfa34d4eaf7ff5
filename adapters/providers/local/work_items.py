"""Work items in the local tracker: the reader (pollers, runtimes) and the writer (executor)."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence

from adapters.providers.local.db import Database, now
from domain.errors import NotFoundError, ProviderError
from domain.models import STATUSES, RevisionId, Status, WorkItem, WorkItemId

WORK_ITEM_KEYS = "work-item"


def row_id(entity: str, value: str) -> int:
    """The integer key behind a provider id; anything else cannot exist here."""
    if not value.isdecimal():
        raise NotFoundError(f"{entity} {value!r} does not exist")
    return int(value)


def require_work_item(conn: sqlite3.Connection, work_item_id: str) -> int:
    key = row_id("work item", work_item_id)
    if conn.execute("SELECT 1 FROM work_items WHERE id = ?", (key,)).fetchone() is None:
        raise NotFoundError(f"work item {work_item_id!r} does not exist")
    return key


class LocalWorkItemReader:
    """``WorkProviderReader`` over the tracker database."""

    def __init__(self, db: Database) -> None:
        self._db = db

    def list_work_items(self) -> Sequence[WorkItem]:
        """Every item, done ones included: a blocker's ``done`` is what unblocks its dependents."""
        with self._db.read() as conn:
            rows = conn.execute(
                "SELECT id, title, status, labels FROM work_items ORDER BY id"
            ).fetchall()
            blocker_rows = conn.execute(
                "SELECT work_item_id, blocked_by FROM work_item_blockers "
                "ORDER BY work_item_id, position"
            ).fetchall()
            revision_rows = conn.execute(
                "SELECT work_item_id, id, state FROM revisions "
                "WHERE work_item_id IS NOT NULL ORDER BY id"
            ).fetchall()
        blockers: dict[int, list[WorkItemId]] = {}
        for row in blocker_rows:
            blockers.setdefault(row["work_item_id"], []).append(WorkItemId(str(row["blocked_by"])))
        linked = _linked_revisions(revision_rows)
        return [
            WorkItem(
                id=WorkItemId(str(row["id"])),
                title=row["title"],
                status=row["status"],
                labels=tuple(json.loads(row["labels"])),
                blocked_by=tuple(blockers.get(row["id"], ())),
                linked_revision=linked.get(row["id"]),
            )
            for row in rows
        ]

    def get_work_item_body(self, work_item_id: WorkItemId) -> str:
        rows = self._db.query(
            "SELECT body FROM work_items WHERE id = ?", (row_id("work item", work_item_id),)
        )
        if not rows:
            raise NotFoundError(f"work item {work_item_id!r} does not exist")
        body: str = rows[0]["body"]
        return body


class LocalWorkItemWriter:
    """``WorkProviderWriter`` over the tracker database."""

    def __init__(self, db: Database) -> None:
        self._db = db

    def create_work_item(
        self,
        title: str,
        body: str,
        labels: Sequence[str] = (),
        blocked_by: Sequence[WorkItemId] = (),
        *,
        idempotency_key: str | None = None,
    ) -> WorkItemId:
        # The key lookup and the insert share one immediate transaction, so two racing retries
        # of the same write cannot both miss the key.
        with self._db.write() as conn:
            if idempotency_key is not None:
                seen = conn.execute(
                    "SELECT entity_id FROM idempotency_keys WHERE kind = ? AND key = ?",
                    (WORK_ITEM_KEYS, idempotency_key),
                ).fetchone()
                if seen is not None:
                    return WorkItemId(str(seen["entity_id"]))
            blockers = [require_work_item(conn, b) for b in dict.fromkeys(blocked_by)]
            stamp = now()
            cursor = conn.execute(
                "INSERT INTO work_items (title, body, status, labels, created_at, updated_at) "
                "VALUES (?, ?, 'pending', ?, ?, ?)",
                (title, body, _labels(labels), stamp, stamp),
            )
            key = cursor.lastrowid
            assert key is not None  # an INSERT always sets it
            conn.executemany(
                "INSERT INTO work_item_blockers (work_item_id, blocked_by, position) "
                "VALUES (?, ?, ?)",
                [(key, blocker, position) for position, blocker in enumerate(blockers)],
            )
            if idempotency_key is not None:
                conn.execute(
                    "INSERT INTO idempotency_keys (kind, key, entity_id, created_at) "
                    "VALUES (?, ?, ?, ?)",
                    (WORK_ITEM_KEYS, idempotency_key, key, stamp),
                )
        return WorkItemId(str(key))

    def update_work_item(
        self,
        work_item_id: WorkItemId,
        *,
        body: str | None = None,
        labels: Sequence[str] | None = None,
    ) -> None:
        with self._db.write() as conn:
            key = require_work_item(conn, work_item_id)
            if body is not None:
                conn.execute(
                    "UPDATE work_items SET body = ?, updated_at = ? WHERE id = ?",
                    (body, now(), key),
                )
            if labels is not None:
                conn.execute(
                    "UPDATE work_items SET labels = ?, updated_at = ? WHERE id = ?",
                    (_labels(labels), now(), key),
                )

    def close_work_item(self, work_item_id: WorkItemId) -> None:
        self.transition_status(work_item_id, "done")

    def transition_status(self, work_item_id: WorkItemId, to: Status) -> None:
        if to not in STATUSES:
            raise ProviderError(f"{to!r} is not a work item status", status=422)
        with self._db.write() as conn:
            key = require_work_item(conn, work_item_id)
            conn.execute(
                "UPDATE work_items SET status = ?, updated_at = ? WHERE id = ?", (to, now(), key)
            )


def _linked_revisions(rows: Sequence[sqlite3.Row]) -> dict[int, RevisionId]:
    """Each item's current revision: its newest open one, else its newest one."""
    linked: dict[int, RevisionId] = {}
    open_seen: set[int] = set()
    for row in rows:
        item = row["work_item_id"]
        if row["state"] == "open" or item not in open_seen:
            linked[item] = RevisionId(str(row["id"]))
        if row["state"] == "open":
            open_seen.add(item)
    return linked


def _labels(labels: Sequence[str]) -> str:
    return json.dumps(list(dict.fromkeys(labels)))

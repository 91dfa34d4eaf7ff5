"""The journal's records: its tables, the entry and intent records it gives back, and their
encoding, with what a record that does not read back says (damaged, or written by a newer cpe).

Events and commands are stored as their JSON (``EVENT_ADAPTER``, ``COMMAND_ADAPTER``): a
record is read back into the same pydantic model, and one that does not is a ``JournalError``
naming it and why (not JSON, a type this cpe does not know, fields that do not match it).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Literal, get_args

from pydantic import TypeAdapter

from domain.commands import COMMAND_ADAPTER, EngineCommand
from domain.errors import JournalError
from domain.events import EVENT_ADAPTER, EngineEvent

SCHEMA_VERSION = 1  # snapshots were added without a bump: an older cpe ignores their table
SCHEMA = """
CREATE TABLE IF NOT EXISTS events (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    at REAL NOT NULL,
    type TEXT NOT NULL,
    body TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS cursor (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    processed_seq INTEGER NOT NULL
);
INSERT OR IGNORE INTO cursor (id, processed_seq) VALUES (1, 0);
CREATE TABLE IF NOT EXISTS snapshots (
    seq INTEGER PRIMARY KEY,
    at REAL NOT NULL,
    state TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS intents (
    key TEXT PRIMARY KEY,
    command TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('pending', 'done', 'failed')),
    result TEXT,
    error TEXT,
    attempts INTEGER NOT NULL DEFAULT 0,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL
);
"""

IntentStatus = Literal["pending", "done", "failed"]
IntentRow = tuple[str, str, IntentStatus, str | None, str | None, int]
_EVENT_LIST: TypeAdapter[list[EngineEvent]] = TypeAdapter(list[EngineEvent])
_KNOWN_TYPES = frozenset(  # every event and command type this cpe reads
    member.model_fields["type"].default
    for union in (EngineEvent, EngineCommand)
    for member in get_args(get_args(union)[0])
)


@dataclass(frozen=True)
class JournalEntry:
    seq: int
    at: float  # when it was journaled (unix time)
    event: EngineEvent


@dataclass(frozen=True)
class Intent:
    key: str
    command: EngineCommand
    status: IntentStatus
    result: tuple[EngineEvent, ...]
    error: str | None
    attempts: int


def encode_events(events: list[EngineEvent]) -> str:
    """An intent's result events as stored."""
    return _EVENT_LIST.dump_json(events).decode()


def decode_event(path: str, seq: int, body: str) -> EngineEvent:
    try:
        return EVENT_ADAPTER.validate_json(body)
    except ValueError:  # pydantic's ValidationError: damaged, or a newer cpe's type
        raise JournalError(
            f"{path}: event {seq} cannot be read: {_why_unreadable(body)} (damaged, "
            "or written by a newer cpe)"
        ) from None


def decode_intent(path: str, row: IntentRow) -> Intent:
    key, command, status, result, error, attempts = row
    try:
        events = tuple(_EVENT_LIST.validate_json(result)) if result else ()
        parsed = COMMAND_ADAPTER.validate_json(command)
    except ValueError:
        raise JournalError(
            f"{path}: intent {key!r} cannot be read: {_why_unreadable(command)} "
            "(damaged, or written by a newer cpe)"
        ) from None
    return Intent(key, parsed, status, events, error, attempts)


def _why_unreadable(body: str) -> str:
    try:
        kind = json.loads(body).get("type")
    except (ValueError, AttributeError):
        return "not a JSON object"
    if not isinstance(kind, str) or kind not in _KNOWN_TYPES:
        return f"unknown type {kind!r}"
    return f"its fields do not match {kind}'s"

"""What the ``cpe`` subcommands share: ``fail`` (one line on stderr, an exit code), and the
engine's state as a read-only command reads it from the journal (``journal_state``,
``read_journal``), without an engine."""

from __future__ import annotations

import os
import sys
from datetime import UTC, datetime
from pathlib import Path

from actors.journal import Journal
from domain.events import ENGINE_LIFE_EVENTS, USER_EVENTS
from domain.models import EngineState
from domain.state import apply_event


def fail(message: str, code: int = os.EX_CONFIG) -> int:
    """One line on stderr (a journal or a terminal shows it whole), then ``code``."""
    print("cpe: " + " ".join(message.split()), file=sys.stderr)
    return code


def journal_state(state_dir: Path) -> EngineState:
    """The state after the events the engine processed, with a person's requests it has not
    processed yet applied too (journaled while no engine ran, the next one processes them
    first: a pause shows at once), and the engine's own starts and stops (its stop is its last
    event, which it never processes). Other unprocessed events are left for the engine to
    judge."""
    return read_journal(state_dir)[0]


def read_journal(state_dir: Path) -> tuple[EngineState, datetime | None]:
    """``journal_state``, and when the last event an engine journaled was written (a person's
    requests journaled while none ran left out; None: no journal)."""
    path = state_dir / "journal.sqlite3"
    if not path.exists():
        return EngineState(), None
    journal = Journal(path)
    try:
        state = journal.replay()
        processed = journal.processed_seq()
        last = next(iter(journal.entries(after=processed - 1, until=processed)), None)
        for entry in journal.entries(after=processed):
            if isinstance(entry.event, (*USER_EVENTS, *ENGINE_LIFE_EVENTS)):
                state = apply_event(state, entry.event)
            if not isinstance(entry.event, USER_EVENTS):
                last = entry
        return state, None if last is None else datetime.fromtimestamp(last.at, UTC)
    finally:
        journal.close()

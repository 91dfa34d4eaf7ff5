"""A journal with one row that cannot be read, for the tests of how cpe refuses it."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from actors.journal import Journal
from domain.events import StatusTransitioned


def journal_with_one_bad_row(path: Path, body: str) -> Path:
    """A journal at ``path`` whose one processed event's body is ``body`` (damaged JSON, a type
    no cpe knows, …); returns ``path``."""
    journal = Journal(path)
    seq = journal.append(StatusTransitioned(work_item_id="1", to="done"))
    journal.mark_processed(seq)
    journal.close()
    with sqlite3.connect(path) as db:
        db.execute("UPDATE events SET body = ? WHERE seq = ?", (body, seq))
    db.close()
    return path

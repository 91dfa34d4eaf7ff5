"""The journal's records (``actors/journal_records.py``): a row that does not read back is named,
with why."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from actors.journal import Journal
from domain.commands import TransitionStatus
from domain.errors import JournalError
from tests.support.journal import journal_with_one_bad_row


@pytest.mark.parametrize(
    ("body", "why"),
    [
        ("{not json", "not a JSON object"),
        ('["StatusTransitioned"]', "not a JSON object"),
        (
            '{"type": "EventFromTheFuture", "at": "2026-01-01T00:00:00Z"}',
            "unknown type 'EventFromTheFuture'",
        ),
        ('{"work_item_id": "1"}', "unknown type None"),
        ('{"type": 7}', "unknown type 7"),
        (
            '{"type": "StatusTransitioned", "work_item_id": "1", "to": "nowhere"}',
            "its fields do not match StatusTransitioned's",
        ),
    ],
    ids=["unparsable", "a list", "unknown type", "no type", "a number", "bad fields"],
)
def test_an_event_that_cannot_be_read_is_named_with_why(
    tmp_path: Path, body: str, why: str
) -> None:
    """The one line `cpe` prints (exit 65) says what is wrong with the row: damage, or a type
    only a newer cpe knows."""
    path = tmp_path / "j.sqlite3"
    journal_with_one_bad_row(path, body)
    journal = Journal(path)
    with pytest.raises(JournalError) as caught:
        journal.restore()
    assert str(caught.value) == (
        f"{path}: event 1 cannot be read: {why} (damaged, or written by a newer cpe)"
    )
    journal.close()


def test_an_intent_that_cannot_be_read_is_named_with_why(tmp_path: Path) -> None:
    path = tmp_path / "j.sqlite3"
    journal = Journal(path)
    journal.begin_intent("k", TransitionStatus(work_item_id="1", to="done"))
    with sqlite3.connect(path) as db:
        db.execute("UPDATE intents SET command = ? WHERE key = 'k'", ('{"type": "Teleport"}',))
    db.close()
    with pytest.raises(JournalError) as caught:
        journal.intents("pending")
    assert str(caught.value) == (
        f"{path}: intent 'k' cannot be read: unknown type 'Teleport' (damaged, or written by a "
        "newer cpe)"
    )
    journal.close()

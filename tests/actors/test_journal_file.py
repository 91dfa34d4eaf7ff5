"""The journal's file (``actors/journal_file.py``): a lost journal beside earlier agent runs is
refused, a damaged one is left to the journal to report."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from actors.journal import Journal
from actors.journal_file import check_journal
from domain.errors import JournalError
from domain.events import StatusTransitioned


def _state_with_earlier_runs(tmp_path: Path) -> Path:
    """A state directory where an earlier engine ran agents; its journal's path."""
    (tmp_path / "runs" / "planner-1").mkdir(parents=True)
    return tmp_path / "journal.sqlite3"


def _content(path: Path) -> bytes | None:
    return path.read_bytes() if path.exists() else None


@pytest.mark.parametrize("journal", ["missing", "empty", "without events", "of another program"])
def test_a_lost_journal_beside_earlier_agent_runs_is_refused_and_left_as_it_is(
    tmp_path: Path, journal: str
) -> None:
    """Starting afresh would plan the specs again and forget every attempt (`cpe run`: exit
    65); the check only reads."""
    path = _state_with_earlier_runs(tmp_path)
    if journal == "empty":
        path.write_bytes(b"")
    elif journal == "without events":
        Journal(path).close()
    elif journal == "of another program":
        with sqlite3.connect(path) as db:
            db.execute("CREATE TABLE notes (text TEXT)")
        db.close()
    before = _content(path)
    with pytest.raises(JournalError) as caught:
        check_journal(path)
    assert str(caught.value) == (
        f"{path}: the journal is missing or empty, but agent runs of an earlier engine are in "
        f"{tmp_path / 'runs'}; starting afresh would plan the specs again. Restore the journal, "
        "or start over deliberately with cpe run --new-journal"
    )
    assert _content(path) == before


@pytest.mark.parametrize("journal", ["closed", "open", "damaged"])
def test_a_journal_holding_events_or_damaged_passes_the_check(tmp_path: Path, journal: str) -> None:
    """A damaged journal is left to ``Journal`` to report (its own one line, exit 65)."""
    path = _state_with_earlier_runs(tmp_path)
    if journal == "damaged":
        path.write_bytes(b"this is not a sqlite database, " * 100)
        assert check_journal(path) is None
        return
    written = Journal(path)
    written.append(StatusTransitioned(work_item_id="1", to="done"))
    if journal == "closed":
        written.close()
    assert check_journal(path) is None
    if journal == "open":
        written.close()


def test_without_earlier_agent_runs_a_missing_journal_is_a_first_start(tmp_path: Path) -> None:
    assert check_journal(tmp_path / "state" / "journal.sqlite3") is None

"""The tracker database's schema migrations: a database made by an older cpe opens with every
row as it was, and gains what the new schema adds (a revision's work item kept as another
tracker's key, version 3; a pipeline run the merge queue waits on, version 4)."""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path

import pytest

from adapters.providers import ProviderRoles
from adapters.providers.local import LocalProvider
from adapters.providers.local.db import _MIGRATIONS, SCHEMA_VERSION, _statements
from adapters.providers.local.provider import DATABASE_NAME
from domain.errors import ProviderError
from domain.models import WorkItemId
from tests.adapters.providers.edits import BASE_FILES, EDITS
from tests.support.git import Repo, isolate_git, make_patch

# The scripts as cpe shipped them, by the version they reach: a database in the field ran exactly
# these (migrations are appended, never edited), and the old database below is made by version 2's.
SHIPPED = {
    2: "7661337db1eb7ec09264124fa584884d076fa767244fae5fa846abc99919461d",
    3: "63630dce7132d841eb131ec5af753fd7ce5f88eaa7f9a2aba1927d5c1e520527",
    4: "2fa5f57240f41e803abff0286b8ec50a982d71dfa2c2806a1f1ca30169b2b6b4",
}


def shipped_digest(version: int) -> str:
    return hashlib.sha256("".join(_MIGRATIONS[:version]).encode()).hexdigest()


def old_database(path: Path, head: str) -> None:
    """A version-2 database holding what the local tracker and forge wrote: two items (one
    blocking the other), a revision of item 1 with its review, its comment and its pipeline run,
    a baseline run, and the idempotency keys of all of it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(path)
    for script in _MIGRATIONS[:2]:
        for statement in _statements(script):
            conn.execute(statement)
    conn.execute("PRAGMA user_version = 2")
    at = "2026-01-02T03:04:05.000+00:00"
    conn.executemany(
        "INSERT INTO work_items (title, body, status, labels, created_at, updated_at) "
        "VALUES (?, ?, ?, ?, ?, ?)",
        [
            ("Answer", "Make it 42.", "in-review", '["feature"]', at, at),
            ("After", "Then this.", "pending", "[]", at, at),
        ],
    )
    conn.execute(
        "INSERT INTO work_item_blockers (work_item_id, blocked_by, position) VALUES (2, 1, 0)"
    )
    conn.execute(
        "INSERT INTO revisions (work_item_id, title, body, branch, head_sha, state, "
        "reviewed_sha, created_at, updated_at) "
        "VALUES (1, 'Answer', 'Made it 42.', 'cpe/1-answer', ?, 'open', ?, ?, ?)",
        (head, head, at, at),
    )
    conn.execute(
        "INSERT INTO reviews (revision_id, head_sha, author, state, body, created_at) "
        "VALUES (1, ?, 'cpe-reviewer', 'APPROVED', 'Fine.', ?)",
        (head, at),
    )
    conn.execute(
        "INSERT INTO review_comments (review_id, path, line, author, body) "
        "VALUES (1, 'a.txt', 1, 'cpe-reviewer', 'Nice line.')"
    )
    conn.execute(
        "INSERT INTO pipeline_runs (revision_id, head_sha, status, queued_at, finished_at) "
        "VALUES (1, ?, 'success', ?, ?)",
        (head, at, at),
    )
    conn.execute(
        "INSERT INTO baseline_runs (head_sha, command, status, queued_at) "
        "VALUES (?, 'pipeline', 'failure', ?)",
        (head, at),
    )
    conn.executemany(
        "INSERT INTO idempotency_keys (kind, key, entity_id, created_at) VALUES (?, ?, ?, ?)",
        [("work-item", "plan:1:a", 1, at), ("revision", "impl:1:1", 1, at)],
    )
    conn.commit()
    conn.close()


def dump(path: Path) -> dict[str, list[tuple[object, ...]]]:
    """Every row of every table of version 2, its columns as version 2 had them."""
    conn = sqlite3.connect(path)
    tables = [
        "work_items",
        "work_item_blockers",
        "revisions",
        "idempotency_keys",
        "reviews",
        "review_comments",
        "pipeline_runs",
        "baseline_runs",
    ]
    out = {}
    for table in tables:
        columns = [row[1] for row in conn.execute(f"PRAGMA table_info({table})")]
        kept = [c for c in columns if c not in ("work_item_key", "landing")]  # versions 3, 4
        out[table] = conn.execute(f"SELECT {', '.join(kept)} FROM {table} ORDER BY 1").fetchall()
    conn.close()
    return out


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Repo:
    isolate_git(monkeypatch)
    return Repo.create(tmp_path / "repo", BASE_FILES)


def revision_head(repo: Repo) -> str:
    """A revision's head as the old forge made it: a commit on main's head, on its branch."""
    head = repo.git("commit-tree", "main^{tree}", "-p", "main", "-m", "Answer")
    repo.git("update-ref", "refs/heads/cpe/1-answer", head)
    repo.git("update-ref", "refs/cpe/revisions/1", head)
    return head


@pytest.mark.parametrize("version", sorted(SHIPPED))
def test_the_shipped_migrations_are_not_edited(version: int) -> None:
    """A database in the field ran the shipped migrations as they were: an edit would leave it
    behind the schema this cpe assumes. Add a migration instead."""
    assert version <= SCHEMA_VERSION
    assert shipped_digest(version) == SHIPPED[version]


def test_an_old_database_keeps_every_row_and_works_as_before(repo: Repo, tmp_path: Path) -> None:
    path = tmp_path / "state" / DATABASE_NAME
    head = revision_head(repo)
    old_database(path, head)
    before = dump(path)
    with LocalProvider(repo.root, tmp_path / "state") as provider:
        assert provider.work_item_reader is not None
        assert provider.work_item_writer is not None
        assert provider.revision_reader is not None
        items = {i.id: i for i in provider.work_item_reader.list_work_items()}
        assert (items["1"].status, items["1"].labels, items["1"].linked_revision) == (
            "in-review",
            ("feature",),
            "1",
        )
        assert items["2"].blocked_by == ("1",)
        [revision] = provider.revision_reader.list_revisions()
        assert (revision.work_item_id, revision.reviewed_sha, revision.pipeline.status) == (
            "1",
            head,
            "success",
        )
        history = provider.revision_reader.get_review_history(revision.id)
        assert [(r.state, r.body) for r in history.reviews] == [("APPROVED", "Fine.")]
        assert [c.body for c in history.inline_comments] == ["Nice line."]
        # The keys written before the migration still find what they made.
        again = provider.work_item_writer.create_work_item(
            "Answer", "Make it 42.", idempotency_key="plan:1:a"
        )
        assert again == "1"
    assert dump(path) == before
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        assert conn.execute("PRAGMA foreign_key_check").fetchall() == []


def test_an_old_database_serves_another_trackers_revisions_beside_its_own(
    repo: Repo, tmp_path: Path
) -> None:
    """The same clone moved to a Jira tracker with the local forge: the old revision stays
    item 1's, the new one is PROJ-12's, and the local items gain nothing."""
    state = tmp_path / "state"
    old_database(state / DATABASE_NAME, revision_head(repo))
    patch = make_patch(repo.root, tmp_path / "patch", EDITS["modified"])
    with LocalProvider(repo.root, state, roles=ProviderRoles(work_items=False)) as forge:
        assert forge.revision_writer is not None
        assert forge.revision_reader is not None
        made = forge.revision_writer.create_from_patch(
            WorkItemId("PROJ-12"), "cpe/PROJ-12-answer", "Answer", "", patch
        )
        assert [(r.id, r.work_item_id) for r in forge.revision_reader.list_revisions()] == [
            ("1", "1"),
            (made.id, "PROJ-12"),
        ]
    with LocalProvider(repo.root, state, roles=ProviderRoles(revisions=False)) as tracker:
        assert tracker.work_item_reader is not None
        items = tracker.work_item_reader.list_work_items()
        assert [(i.id, i.linked_revision) for i in items] == [("1", "1"), ("2", None)]


def test_a_migration_that_fails_leaves_the_database_as_it_was(repo: Repo, tmp_path: Path) -> None:
    """Version 3 adds a column; a database where it cannot (the name taken by hand) is refused
    with SQLite's reason, still at version 2 with its rows."""
    path = tmp_path / "state" / DATABASE_NAME
    old_database(path, revision_head(repo))
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE INDEX revisions_work_item_key ON revisions(title)")
    before = dump(path)
    with pytest.raises(ProviderError, match="revisions_work_item_key already exists"):
        LocalProvider(repo.root, tmp_path / "state")
    assert dump(path) == before
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == 2
        columns = [row[1] for row in conn.execute("PRAGMA table_info(revisions)")]
        assert "work_item_key" not in columns

"""The local provider as the tracker alone (``ProviderRoles(revisions=False)``): the revisions
are another forge's (GitHub, GitLab), so it builds no revision store and no pipeline thread, and
needs no repository. (The local forge of another system's tracker:
test_local_foreign_tracker.py.)"""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from adapters.providers import ProviderRoles
from adapters.providers.local import LocalPipeline, LocalProvider
from tests.adapters.providers.edits import BASE_FILES
from tests.support.git import Repo, isolate_git

TRACKER = ProviderRoles(work_items=True, revisions=False)


def pipeline_threads() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name == "cpe-local-pipeline"]


def test_the_tracker_alone_makes_no_revision_store_nor_pipeline_thread(tmp_path: Path) -> None:
    before = pipeline_threads()
    pipeline = LocalPipeline(["true"], 60)
    # No repository at all: the tracker is the database in the state directory.
    with LocalProvider(
        tmp_path / "nowhere", tmp_path / "state", None, pipeline, roles=TRACKER
    ) as p:
        assert p.revision_reader is None
        assert p.revision_writer is None
        assert pipeline_threads() == before
        assert p.interfaces(spec_reader=None) is None  # type: ignore[arg-type]
        made = p.work_item_writer.create_work_item("Answer", "Make it 42.")
        p.work_item_writer.transition_status(made, "in-progress")
        items = p.work_item_reader.list_work_items()
        assert [(i.id, i.title, i.status, i.linked_revision) for i in items] == [
            (made, "Answer", "in-progress", None)
        ]
        assert p.work_item_reader.get_work_item_body(made) == "Make it 42."


def test_the_tracker_alone_and_the_whole_provider_share_the_items(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``cpe work add`` writes through the tracker alone; the same state directory read as the
    whole provider (local + local) has the item."""
    isolate_git(monkeypatch)
    repo = Repo.create(tmp_path / "repo", BASE_FILES)
    with LocalProvider(repo.root, tmp_path / "state", roles=TRACKER) as tracker:
        made = tracker.work_item_writer.create_work_item("Answer", "Make it 42.")
    with LocalProvider(repo.root, tmp_path / "state") as whole:
        assert [i.id for i in whole.work_item_reader.list_work_items()] == [made]
        assert whole.revision_reader is not None


def test_a_provider_serves_at_least_one_role() -> None:
    with pytest.raises(ValueError, match="work items, revisions or both"):
        ProviderRoles(work_items=False, revisions=False)

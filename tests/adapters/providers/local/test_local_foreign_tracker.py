"""The local forge of another system's tracker (``ProviderRoles(work_items=False)``: Jira or
Linear keeps the work items, the revisions are branches in the clone): a revision keeps its
item's key as that system names it (``PROJ-12``), never reads the local work items, and names
the item by its key in its text. The revision half of the provider contract runs on it with an
in-memory tracker whose items are keys."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path

import pytest

from adapters.providers import ProviderRoles
from adapters.providers.local import LocalPipeline, LocalProvider
from adapters.providers.local.revisions import LocalRevisionReader, LocalRevisionWriter
from domain.errors import ConflictError, NotFoundError
from domain.models import WorkItemId
from tests.adapters.providers.contract import ProviderHarness, RevisionContract
from tests.adapters.providers.edits import BASE_FILES, EDITS
from tests.adapters.providers.local.test_local_contract import LocalHarness
from tests.fakes.provider import FakeTracker, fake_provider
from tests.support.git import Repo, git, isolate_git, make_patch

FORGE = ProviderRoles(work_items=False, revisions=True)
_keys = itertools.count(1)


class ForeignHarness(LocalHarness):
    def __init__(self, repo: Repo, provider: LocalProvider, tracker: FakeTracker) -> None:
        super().__init__(repo, provider)
        self.tracker = tracker


class TestLocalForgeOfAForeignTracker(RevisionContract):
    """The contract's revisions on the local forge, its work items another system's (the
    in-memory fake's, which passes the work item half on its own)."""

    @pytest.fixture
    def harness(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[ForeignHarness]:
        isolate_git(monkeypatch)
        repo = Repo.create(tmp_path / "repo", BASE_FILES)
        tracker, ports = fake_provider()
        with LocalProvider(repo.root, tmp_path / "state", roles=FORGE) as provider:
            harness = ForeignHarness(repo, provider, tracker)
            harness.work_item_reader = ports.work_item_reader  # type: ignore[assignment]
            harness.work_item_writer = ports.work_item_writer  # type: ignore[assignment]
            yield harness

    def item(self, harness: object, title: str = "Do the thing") -> WorkItemId:
        """An item of the other tracker, named by a key as Jira names its issues."""
        assert isinstance(harness, ForeignHarness)
        key = f"PROJ-{next(_keys)}"
        harness.tracker.add_item(key, title=title)
        return WorkItemId(key)

    def test_create_from_patch_opens_a_revision_on_the_default_head(
        self, harness: ProviderHarness, tmp_path: Path
    ) -> None:
        """As the contract's, but the item is not linked by the tracker: the revision names it
        (the engine links an item to the open revision naming it)."""
        item_id = self.item(harness)
        base = self.default_head(harness)
        patch = self.patch(harness, tmp_path, EDITS["modified"])
        revision = harness.revision_writer.create_from_patch(
            item_id, f"cpe/{item_id}-do-the-thing", "Do the thing", "Summary", patch
        )
        assert (revision.state, revision.branch, revision.work_item_id) == (
            "open",
            f"cpe/{item_id}-do-the-thing",
            item_id,
        )
        assert git(harness.git_dir, "rev-parse", f"{revision.head_sha}^") == base
        assert git(harness.git_dir, "rev-parse", f"refs/heads/cpe/{item_id}-do-the-thing") == (
            revision.head_sha
        )
        [listed] = harness.revision_reader.list_revisions()
        assert (listed.id, listed.work_item_id) == (revision.id, item_id)
        assert self.default_head(harness) == base


# ------------------------------------------------------------------ the forge alone


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Repo:
    isolate_git(monkeypatch)
    return Repo.create(tmp_path / "repo", BASE_FILES)


@pytest.fixture
def forge(repo: Repo, tmp_path: Path) -> Iterator[LocalProvider]:
    with LocalProvider(repo.root, tmp_path / "state", roles=FORGE) as made:
        yield made


def ports(forge: LocalProvider) -> tuple[LocalRevisionReader, LocalRevisionWriter]:
    assert forge.revision_reader is not None
    assert forge.revision_writer is not None
    return forge.revision_reader, forge.revision_writer


def patch(repo: Repo, tmp_path: Path) -> str:
    scratch = tmp_path / f"patch-{len(list(tmp_path.glob('patch-*')))}"
    return make_patch(repo.root, scratch, EDITS["modified"])


def body_of(repo: Repo, branch: str) -> str:
    return repo.git("log", "-1", "--format=%B", f"refs/heads/{branch}")


def test_the_forge_of_another_tracker_has_no_work_item_ports(forge: LocalProvider) -> None:
    assert forge.work_item_reader is None
    assert forge.work_item_writer is None
    assert forge.interfaces(spec_reader=None) is None  # type: ignore[arg-type]
    assert ports(forge)[0].list_revisions() == []


def test_a_revision_keeps_the_items_key_and_names_it_by_that_key(
    forge: LocalProvider, repo: Repo, tmp_path: Path
) -> None:
    reader, writer = ports(forge)
    body = "Made it 42.\n\nWork item: #PROJ-12\nAgent session: s-1"
    revision = writer.create_from_patch(
        WorkItemId("PROJ-12"), "cpe/PROJ-12-answer", "Answer", body, patch(repo, tmp_path)
    )
    assert revision.work_item_id == "PROJ-12"
    assert [(r.id, r.work_item_id) for r in reader.list_revisions()] == [(revision.id, "PROJ-12")]
    message = body_of(repo, "cpe/PROJ-12-answer")
    # The key, not "#PROJ-12": a "#" names a number on a forge.
    assert "Work item: PROJ-12\nAgent session: s-1" in message
    assert "#PROJ-12" not in message


def test_a_body_without_the_work_item_line_gets_it(
    forge: LocalProvider, repo: Repo, tmp_path: Path
) -> None:
    writer = ports(forge)[1]
    writer.create_from_patch(
        WorkItemId("ENG-7"), "cpe/ENG-7-x", "X", "Just a summary.", patch(repo, tmp_path)
    )
    assert body_of(repo, "cpe/ENG-7-x").rstrip().endswith("Just a summary.\n\nWork item: ENG-7")


def test_a_numeric_key_is_the_other_trackers_never_a_local_item(repo: Repo, tmp_path: Path) -> None:
    """Local item #1 exists in the same database (made when the tracker was local): the other
    tracker's item "1" is not it, and it gains no revision."""
    state = tmp_path / "state"
    with LocalProvider(repo.root, state, roles=ProviderRoles(revisions=False)) as tracker:
        assert tracker.work_item_writer is not None
        local = tracker.work_item_writer.create_work_item("Local", "A local item.")
    assert local == "1"
    with LocalProvider(repo.root, state, roles=FORGE) as forge:
        made = ports(forge)[1].create_from_patch(
            WorkItemId("1"), "cpe/1-other", "Other", "", patch(repo, tmp_path)
        )
        assert made.work_item_id == "1"
    with LocalProvider(repo.root, state) as whole:
        assert whole.work_item_reader is not None
        [item] = whole.work_item_reader.list_work_items()
        assert (item.id, item.linked_revision) == ("1", None)


def test_an_item_that_is_no_key_is_not_found(
    forge: LocalProvider, repo: Repo, tmp_path: Path
) -> None:
    writer = ports(forge)[1]
    for bad in ("", "  ", "PROJ 12"):
        with pytest.raises(NotFoundError, match="expected the tracker's key"):
            writer.create_from_patch(WorkItemId(bad), "cpe/x", "X", "", patch(repo, tmp_path))
    assert ports(forge)[0].list_revisions() == []


def test_a_branch_carrying_another_items_revision_is_a_conflict(
    forge: LocalProvider, repo: Repo, tmp_path: Path
) -> None:
    writer = ports(forge)[1]
    first = writer.create_from_patch(
        WorkItemId("PROJ-1"), "cpe/shared", "One", "", patch(repo, tmp_path)
    )
    with pytest.raises(ConflictError, match=rf"#{first.id} of work item PROJ-1"):
        writer.create_from_patch(
            WorkItemId("PROJ-2"), "cpe/shared", "Two", "", patch(repo, tmp_path)
        )
    again = writer.create_from_patch(
        WorkItemId("PROJ-1"), "cpe/shared", "One", "", patch(repo, tmp_path)
    )
    assert again.id == first.id


def test_the_same_key_makes_one_revision(forge: LocalProvider, repo: Repo, tmp_path: Path) -> None:
    reader, writer = ports(forge)
    made = [
        writer.create_from_patch(
            WorkItemId("ENG-3"),
            "cpe/ENG-3-x",
            "X",
            "",
            patch(repo, tmp_path),
            idempotency_key="impl:ENG-3:1",
        )
        for _ in range(2)
    ]
    assert made[0].id == made[1].id
    assert len(reader.list_revisions()) == 1


def test_the_pipeline_runs_on_a_revision_of_another_trackers_item(
    repo: Repo, tmp_path: Path
) -> None:
    with LocalProvider(
        repo.root, tmp_path / "state", None, LocalPipeline(["true"], 60), roles=FORGE
    ) as forge:
        reader, writer = ports(forge)
        made = writer.create_from_patch(
            WorkItemId("PROJ-4"), "cpe/PROJ-4-x", "X", "", patch(repo, tmp_path)
        )
        assert forge.wait_for_pipelines(60)
        [revision] = reader.list_revisions()
        assert (revision.id, revision.pipeline.status) == (made.id, "success")
        assert writer.merge(made.id) == repo.git("rev-parse", "main")
        [merged] = reader.list_revisions()
        assert (merged.state, merged.work_item_id) == ("merged", "PROJ-4")

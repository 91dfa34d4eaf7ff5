"""The neutral text markers every Markdown forge writes: how a revision names its work item when
the tracker is the forge's own, and when it is another system."""

from __future__ import annotations

import pytest

from adapters.providers import ProviderRoles, markers
from domain.dispatch import branch_name
from domain.models import WorkItem, WorkItemId


def test_a_revision_of_the_forges_own_tracker_closes_its_issue() -> None:
    body = markers.pull_body("Adds a flag.", "12", "impl:12:1")
    assert "Closes #12" in body
    assert markers.linked_item(body, "someone/else", "cpe/") == "12"
    assert markers.pull_user_body(body) == "Adds a flag.\n\nCloses #12"


def test_a_revision_of_another_systems_item_names_it_without_closing_anything_here() -> None:
    body = markers.pull_body("Adds a flag.", "ENG-12", "impl:ENG-12:1", closing=False)
    assert "Closes" not in body
    assert "#" not in body.replace("<!--", "")
    assert markers.marked_work_item(body) == "ENG-12"
    assert markers.linked_item(body, "elsewhere", "cpe/", closing=False) == "ENG-12"
    assert markers.pull_user_body(body) == "Adds a flag."
    assert markers.strip_markers(body).count("ENG-12") == 1  # the visible line stays


def test_the_engines_work_item_line_links_nothing_of_the_forge_for_another_systems_item() -> None:
    """The engine writes "Work item: #3" into every revision's body; on a forge whose tracker is
    elsewhere "#3" would link the forge's own #3 (seen on GitHub: a pull request naming another
    pull request as its work item). The reference replaces it; the forge's own tracker keeps it."""
    body = "Adds a flag.\n\nWork item: #3\nAgent session: implementor-1"
    apart = markers.pull_body(body, "3", "impl:3:1", closing=False)
    assert "#3" not in apart.replace("<!--", "")
    assert "Agent session: implementor-1\n\nWork item: 3\n" in apart
    assert markers.strip_markers(apart).count("Work item:") == 1
    other = markers.pull_body("See Work item: #30.\nWork item: #30", "3", None, closing=False)
    assert "Work item: #30" in other  # another id's line is the author's, left as it is
    assert "Work item: #3\n" in markers.pull_body(body, "3", None)


def test_a_closing_reference_written_by_someone_names_no_item_of_another_tracker() -> None:
    # "Fixes #3" on a GitHub pull request names GitHub's issue 3, not the tracker's item 3.
    assert markers.linked_item("Fixes #3", "feature/x", "cpe/", closing=False) is None
    assert markers.linked_item("Fixes #3", "feature/x", "cpe/") == "3"


def test_the_branch_name_gives_a_numeric_id_or_an_upper_case_key() -> None:
    assert markers.linked_item(None, "cpe/7-add-flag", "cpe/", closing=False) == "7"
    assert markers.linked_item(None, "cpe/ENG-12-add-flag", "cpe/", closing=False) == "ENG-12"
    assert markers.linked_item(None, "cpe/add-12", "cpe/", closing=False) is None
    assert markers.linked_item(None, "main", "cpe/", closing=False) is None


def test_provider_roles_say_what_a_provider_serves() -> None:
    assert ProviderRoles().both
    assert ProviderRoles(work_items=False).foreign_tracker
    assert not ProviderRoles(revisions=False).foreign_tracker
    with pytest.raises(ValueError, match="work items, revisions or both"):
        ProviderRoles(work_items=False, revisions=False)


def test_a_blocker_in_a_nested_group_is_read_whole() -> None:
    text = "Blocked by group/sub/name#3, #4 and other/repo#5"
    assert markers.blocked_by(text, "acme/widgets") == ["group/sub/name#3", "4", "other/repo#5"]
    assert markers.is_foreign_blocker("group/sub/name#3")
    assert markers.is_foreign_blocker("other/repo#5")
    assert not markers.is_foreign_blocker("#3")
    assert not markers.is_foreign_blocker("name#3")


@pytest.mark.parametrize("item_id", ["7", "ENG-12", "PROJ-3"])
def test_the_branch_the_engine_names_gives_its_item_back(item_id: str) -> None:
    """``domain.dispatch.branch_name`` and the branch fallback of ``linked_item`` agree: a
    revision whose marker is gone is still its item's (a lower-cased key was not)."""
    item = WorkItem(id=WorkItemId(item_id), title="Greet a person: by name!", status="pending")
    branch = branch_name(item, "cpe/")
    assert markers.linked_item(None, branch, "cpe/") == item_id

"""A patch's changes as the Commits API's actions (``gitlab/patches.py``, ``actions_for``), as
``POST /projects/:id/repository/commits`` takes them (doc/api/commits.md): create, update,
delete, move (``previous_path``), chmod (``execute_filemode``), contents base64."""

from __future__ import annotations

import base64

import pytest

from adapters.providers.gitlab.patches import actions_for
from domain.errors import PatchError

OLD = "1" * 40
NEW = "2" * 40
BLOBS = {OLD: b"old\r\n", NEW: b"\x00\xffnew"}


def content(sha: str) -> bytes:
    return BLOBS[sha]


def encoded(sha: str) -> str:
    return base64.b64encode(BLOBS[sha]).decode()


def test_a_new_file_is_created_with_its_bytes_base64_encoded() -> None:
    actions = actions_for({"a.bin": ("100644", "blob", NEW)}, {}, {}, content)
    assert actions == [
        {"action": "create", "file_path": "a.bin", "content": encoded(NEW), "encoding": "base64"}
    ]


def test_a_new_executable_file_is_created_then_made_executable() -> None:
    actions = actions_for({"run.sh": ("100755", "blob", NEW)}, {}, {}, content)
    assert [a["action"] for a in actions] == ["create", "chmod"]
    assert actions[1] == {"action": "chmod", "file_path": "run.sh", "execute_filemode": True}


def test_a_changed_file_is_updated_and_an_unchanged_one_is_left_alone() -> None:
    actions = actions_for(
        {"a.txt": ("100644", "blob", NEW), "b.txt": ("100644", "blob", OLD)},
        {"a.txt": ("100644", OLD), "b.txt": ("100644", OLD)},
        {},
        content,
    )
    assert actions == [
        {"action": "update", "file_path": "a.txt", "content": encoded(NEW), "encoding": "base64"}
    ]


@pytest.mark.parametrize(
    ("before", "after", "executable"), [("100644", "100755", True), ("100755", "100644", False)]
)
def test_a_mode_change_alone_is_a_chmod(before: str, after: str, executable: bool) -> None:
    actions = actions_for({"run.sh": (after, "blob", OLD)}, {"run.sh": (before, OLD)}, {}, content)
    assert actions == [{"action": "chmod", "file_path": "run.sh", "execute_filemode": executable}]


def test_a_deleted_file_is_deleted_before_anything_is_written() -> None:
    """``a`` becomes a directory: the file goes first, or ``a/b`` could not be created."""
    actions = actions_for(
        {"a": None, "a/b": ("100644", "blob", NEW)}, {"a": ("100644", OLD)}, {}, content
    )
    assert [(a["action"], a["file_path"]) for a in actions] == [("delete", "a"), ("create", "a/b")]


def test_a_rename_is_a_move_carrying_new_bytes_only_when_they_changed() -> None:
    current = {"old.py": ("100644", OLD), "legacy.py": ("100644", OLD)}
    changes = {
        "old.py": None,
        "new.py": ("100644", "blob", OLD),
        "legacy.py": None,
        "modern.py": ("100644", "blob", NEW),
    }
    actions = actions_for(changes, current, {"new.py": "old.py", "modern.py": "legacy.py"}, content)
    assert actions == [
        {
            "action": "move",
            "file_path": "modern.py",
            "previous_path": "legacy.py",
            "content": encoded(NEW),
            "encoding": "base64",
        },
        {"action": "move", "file_path": "new.py", "previous_path": "old.py"},
    ]


def test_a_rename_the_parent_already_has_is_an_update_of_the_new_path() -> None:
    """Updating on top of a head that already carries the rename: nothing to move."""
    actions = actions_for(
        {"new.py": ("100644", "blob", NEW)},
        {"new.py": ("100644", OLD)},
        {"new.py": "old.py"},
        content,
    )
    assert [a["action"] for a in actions] == ["update"]


@pytest.mark.parametrize(
    ("mode", "kind"), [("120000", "a symbolic link"), ("160000", "a submodule")]
)
def test_what_is_no_regular_file_is_refused_naming_the_path(mode: str, kind: str) -> None:
    with pytest.raises(PatchError, match=f"link.txt {kind}"):
        actions_for({"link.txt": (mode, "blob", NEW)}, {}, {}, content)


def test_a_symbolic_link_may_be_deleted() -> None:
    actions = actions_for({"link": None}, {"link": ("120000", OLD)}, {}, content)
    assert actions == [{"action": "delete", "file_path": "link"}]


def test_nothing_changed_is_no_action() -> None:
    assert actions_for({}, {"a.txt": ("100644", OLD)}, {}, content) == []

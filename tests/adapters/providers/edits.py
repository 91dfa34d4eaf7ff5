"""The repository every provider contract test starts from, and the edits its patches make:
one per kind of change a patch must carry (added, modified, deleted, renamed, renamed with
changes, binary, mode-changed, CRLF)."""

from __future__ import annotations

from collections.abc import Callable

from tests.support.git import Content, Repo

OLD_MODULE = "".join(
    f"CONSTANT_{i} = {i}  # a line long enough to be recognised\n" for i in range(20)
)

BASE_FILES: dict[str, Content] = {
    "README.md": "# Sample project\n",
    "src/app.py": "def answer():\n    return 41\n",
    "src/old_name.py": OLD_MODULE,
    "src/legacy.py": OLD_MODULE.replace("CONSTANT", "LEGACY"),
    "docs/obsolete.txt": "nobody reads this any more\n",
    "assets/logo.bin": bytes(range(256)) * 4,
    "scripts/run.sh": "#!/bin/sh\necho run\n",
    "data/windows.txt": b"one\r\ntwo\r\nthree\r\n",
}

Edit = Callable[[Repo], None]


def _renamed_with_changes(repo: Repo) -> None:
    repo.move("src/legacy.py", "src/modern.py")
    text = (repo.root / "src/modern.py").read_text()
    repo.write("src/modern.py", text.replace("LEGACY_7 = 7", "LEGACY_7 = 'seven'"))


def _binary(repo: Repo) -> None:
    repo.write("assets/logo.bin", bytes(reversed(range(256))) * 4)
    repo.write("assets/new.bin", b"\x00\xff" * 300)


EDITS: dict[str, Edit] = {
    "added": lambda r: r.write("src/added.py", "print('new')\n"),
    "modified": lambda r: r.write("src/app.py", "def answer():\n    return 42\n"),
    "deleted": lambda r: r.remove("docs/obsolete.txt"),
    "renamed": lambda r: r.move("src/old_name.py", "src/new_name.py"),
    "renamed-with-changes": _renamed_with_changes,
    "binary": _binary,
    "mode-changed": lambda r: r.make_executable("scripts/run.sh"),
    "crlf": lambda r: r.write("data/windows.txt", b"one\r\nTWO\r\nthree\r\n"),
}


def every_edit(repo: Repo) -> None:
    for edit in EDITS.values():
        edit(repo)

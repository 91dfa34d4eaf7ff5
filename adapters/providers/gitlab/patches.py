"""A patch turned into the Commits API's actions: one commit on GitLab, without a clone or a push.

The patch is applied to a stand-in of its base (``adapters/providers/patches.py``: the touched
paths' modes and blobs at the base, asked of GitLab, in a throwaway repository; three-way when
the base has moved under the patch). What the result differs in becomes actions:

- a path the commit's parent lacks: ``create``; one it has with other bytes: ``update``; one
  the result lacks: ``delete``; a rename the patch makes (``rename from``/``rename to``):
  ``move``, with the new bytes when they changed;
- an executable bit that differs: ``chmod`` (``execute_filemode``), after the write;
- contents always go base64-encoded, so binary files, CRLF line ends and non-UTF-8 text arrive
  byte for byte.

The parent is the base itself (a new branch, or a branch rewritten on it), or another commit
``onto`` (the revision's head, for an update on top of it): then the paths that commit changed
since the base are staged too, and the actions are what turns ``onto`` into ``base + patch`` on
every path either touched. GitLab writes regular files only: a patch that makes a symbolic link
or a submodule, or changes one, is refused (``PatchError``) rather than written wrongly.
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Mapping

from adapters.providers.gitlab.api import Json
from adapters.providers.gitlab.commits import Repository
from adapters.providers.patches import applied_patch, renames
from adapters.providers.stand_ins import Change, Entry, stand_in, tree_changes
from domain.errors import PatchError

_FILE_MODES = frozenset({"100644", "100755"})
_KINDS = {"120000": "a symbolic link", "160000": "a submodule", "040000": "a directory"}


def _content(data: bytes) -> Json:
    return {"content": base64.b64encode(data).decode("ascii"), "encoding": "base64"}


def _writable(path: str, mode: str) -> None:
    if mode not in _FILE_MODES:
        kind = _KINDS.get(mode, f"an entry of mode {mode}")
        raise PatchError(
            f"the patch makes {path} {kind}: GitLab's Commits API writes regular files only"
        )


def actions_for(
    changes: Mapping[str, Change],
    current: Mapping[str, Entry],
    moved: Mapping[str, str],
    content: Callable[[str], bytes],
) -> list[Json]:
    """The actions that turn a commit holding ``current`` (path -> mode and blob, for the
    paths concerned) into one where ``changes`` hold; ``moved`` (new path -> old path) are the
    renames the patch makes, ``content(sha)`` a new blob's bytes."""
    moves = {
        new: old
        for new, old in moved.items()
        if changes.get(new) is not None
        and new not in current
        and old in current
        and old in changes
        and changes[old] is None
    }
    deletes: list[Json] = []
    writes: list[Json] = []
    modes: list[Json] = []
    for path, change in sorted(changes.items()):
        before = current.get(path)
        if change is None:
            if before is not None and path not in moves.values():
                if before[0] == "160000":
                    _writable(path, before[0])  # a submodule is no file to delete
                deletes.append({"action": "delete", "file_path": path})
            continue
        mode, _kind, sha = change
        _writable(path, mode)
        action: Json | None
        if path in moves:
            before = current[moves[path]]
            action = {"action": "move", "file_path": path, "previous_path": moves[path]}
        elif before is None:
            action = {"action": "create", "file_path": path}
        else:
            _writable(path, before[0])
            action = {"action": "update", "file_path": path} if sha != before[1] else None
        if action is not None:
            if before is None or sha != before[1]:
                action.update(_content(content(sha)))
            writes.append(action)
        old_mode = before[0] if before is not None else "100644"
        if old_mode != mode:
            modes.append(
                {"action": "chmod", "file_path": path, "execute_filemode": mode == "100755"}
            )
    return deletes + writes + modes


class ActionBuilder:
    def __init__(self, repository: Repository) -> None:
        self._repository = repository

    def actions(self, base: str, patch: str, *, onto: str | None = None) -> list[Json]:
        """The actions that make a commit on ``onto`` (default: ``base``) hold ``base`` with
        ``patch`` applied; empty when it already does. ``PatchError`` when the patch does not
        apply to ``base``."""
        repository = self._repository
        also = (
            sorted({p for names in repository.changed_names(base, onto) for p in names})
            if onto is not None and onto != base
            else []
        )
        with applied_patch(
            patch,
            lambda path: repository.tree_entry(base, path),
            repository.blob,
            also=also,
            prefix="cpe-gitlab-patch-",
        ) as done:
            if onto is None or onto == base:
                return actions_for(done.changes, done.known, renames(patch), done.content)
            paths = set(done.known) | set(done.changes) | set(also)
            current = {p: e for p in paths if (e := repository.tree_entry(onto, p)) is not None}
            parent = stand_in(done.repo, current, repository.blob, message="stand-in head")
            changes = tree_changes(done.repo, parent, done.tree)
            return actions_for(changes, current, renames(patch), done.content)

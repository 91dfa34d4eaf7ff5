"""Where a revision conflicts with the default branch on GitLab: the files, and the hunks.

GitLab says that a merge request conflicts (``detailed_merge_status: conflict``, a rebase's
``merge_error``) but not where. The files are found without a clone: two comparisons give the
paths each side changed since their merge base, and those both changed are merged here from
stand-ins (``adapters.providers.stand_ins.conflicts_of``: ``git merge-tree`` on the paths as they
are in the merge base and in each head, blobs fetched by id), which names the conflicting files
with their hunks; when that cannot tell, the paths both sides changed, or failing those the
files the merge request changes.
"""

from __future__ import annotations

from adapters.providers.gitlab.api import GitLabApi
from adapters.providers.gitlab.commits import Repository
from adapters.providers.stand_ins import Side, conflicts_of
from domain.errors import ConflictError


class ConflictFinder:
    def __init__(self, api: GitLabApi, repository: Repository, default_branch: str) -> None:
        self._api = api
        self._repository = repository
        self._default = default_branch

    def error(self, iid: int, head: str, branch: str, base: str) -> ConflictError:
        """The conflict of merging ``base`` (the default branch's head) into ``head`` (revision
        ``iid``'s, on ``branch``) as the error the implementor is sent back with."""
        repository = self._repository
        where = f"revision !{iid} conflicts with {self._default} (at {base[:12]})"
        merge_base = repository.merge_base(head, base)
        found = (
            conflicts_of(
                merge_base,
                Side(head, branch, repository.changed_names(base, head)),
                Side(base, self._default, repository.changed_names(head, base)),
                entry=repository.tree_entry,
                blob=repository.blob,
                prefix="cpe-gitlab-conflict-",
            )
            if merge_base is not None
            else None
        )
        if found is not None and found.exact:
            return ConflictError(
                f"{where} in: {', '.join(found.files)}", files=found.files, detail=found.detail
            )
        if found is not None and found.files:
            return ConflictError(
                f"{where}; GitLab names no file, these both sides changed: "
                + ", ".join(found.files),
                files=found.files,
            )
        files = self.changed_files(iid)
        return ConflictError(
            f"{where}; GitLab names no file, the revision changes: {', '.join(files)}",
            files=files,
        )

    def changed_files(self, iid: int) -> tuple[str, ...]:
        """The paths merge request ``iid`` changes."""
        return tuple(
            str(d.get("new_path"))
            for d in self._api.all_pages(
                f"list the diffs of !{iid}", f"/merge_requests/{iid}/diffs"
            )
        )

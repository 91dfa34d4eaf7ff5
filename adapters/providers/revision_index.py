"""What a forge's index of its pull or merge requests answers the same way on every forge.

``find_revision``: before a revision is created, the one a create made already (it carries the
idempotency key), else the open one from the same branch, else the open one for the same work
item; the caller decides what each means. ``linked_revisions``: each work item's revision, its
newest open one, else its newest. Both read the index as a mapping from a revision's number
(GitHub's pull request number, GitLab's merge request iid) to its view.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Literal, Protocol, TypeVar

from adapters.providers import markers
from domain.models import RevisionId

Found = Literal["key", "branch", "work item", ""]


class RevisionView(Protocol):
    @property
    def branch(self) -> str: ...

    @property
    def state(self) -> str: ...

    @property
    def work_item(self) -> str | None: ...


V = TypeVar("V", bound=RevisionView)


def find_revision(
    views: Mapping[int, V],
    text: Callable[[V], str],
    *,
    key: str | None,
    branch: str,
    work_item: str,
) -> tuple[V | None, Found]:
    """The revision whose ``text`` carries ``key``, else the open one from ``branch``, else
    the open one for ``work_item`` (the lowest number first) — and which of the three it was."""
    ordered = [views[n] for n in sorted(views)]
    if key is not None:
        for view in ordered:
            if markers.has_key(text(view), key):
                return view, "key"
    for view in ordered:
        if view.state == "open" and view.branch == branch:
            return view, "branch"
    for view in ordered:
        if view.state == "open" and view.work_item == work_item:
            return view, "work item"
    return None, ""


def linked_revisions(views: Mapping[int, RevisionView]) -> dict[str, RevisionId]:
    """Each work item's revision: its newest open one, else its newest one."""
    linked: dict[str, RevisionId] = {}
    has_open: set[str] = set()
    for number in sorted(views):
        view = views[number]
        item = view.work_item
        if item is None or (item in has_open and view.state != "open"):
            continue
        linked[item] = RevisionId(str(number))
        if view.state == "open":
            has_open.add(item)
    return linked

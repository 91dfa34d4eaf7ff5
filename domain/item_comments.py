"""What cpe says on a work item, as a comment in its tracker, after a write of its own.

Only a tracker that takes comments is told (``domain.ports.WorkItemCommenter``: Linear's and
Jira's writers); the others show the same things by themselves (a pull request that closes its
issue links to it). Three things are said, each once (keyed by its write): the revision opened
for the item, the item sent to ``needs-refinement`` or ``blocked`` with the reason, and the
revision merged. Pure: the command and the events its write returned are all it reads.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from domain.commands import CreateRevision, EngineCommand, MergeRevision, TransitionStatus
from domain.events import EngineEvent, RevisionCreated, RevisionMerged
from domain.models import WorkItemId, item_ref

# Statuses a person is told about: cpe stopped on the item and says why.
SAID: frozenset[str] = frozenset({"needs-refinement", "blocked"})
MAX_REASON = 1_000  # characters of a reason: a comment is a note, not a log


class ItemComment(NamedTuple):
    work_item_id: WorkItemId
    body: str


def item_comment(
    command: EngineCommand, events: Sequence[EngineEvent], why: str | None = None
) -> ItemComment | None:
    """The comment a successful write deserves on its item, or None; ``why``: the words of a
    status change (its reason, or how the engine explains it)."""
    match command:
        case CreateRevision(work_item_id=wid):
            for event in events:
                if isinstance(event, RevisionCreated):
                    revision = event.revision
                    return ItemComment(
                        wid,
                        f"cpe opened revision {revision.id} for this item, on branch "
                        f"`{revision.branch}`: {_line(revision.title)}",
                    )
        case TransitionStatus(work_item_id=wid, to=to) if to in SAID:
            return ItemComment(wid, f"cpe set this item to {to}{_why(wid, to, why)}")
        case MergeRevision(work_item_id=wid, revision_id=rid):
            for event in events:
                if isinstance(event, RevisionMerged):
                    landed = f" as {event.merge_sha[:12]}" if event.merge_sha else ""
                    return ItemComment(wid, f"cpe merged revision {rid}{landed}.")
    return None


def _why(work_item_id: WorkItemId, to: str, why: str | None) -> str:
    """The reason, without the head the log's explanation starts with ("ENG-9 in-progress →
    blocked: ..."): on the item itself it only repeats the item and the status."""
    if not why:
        return "."
    text = _line(why)
    head = f"{item_ref(work_item_id)} "
    source, arrow, rest = text.removeprefix(head).partition(f" → {to}")
    if text.startswith(head) and arrow and " " not in source and rest[:2] in ("", ": "):
        text = rest[2:]
        if not text:
            return "." if source == "unknown" else f" (it was {source})."
    return f": {text[:MAX_REASON]}"


def _line(text: str) -> str:
    return " ".join(text.split())

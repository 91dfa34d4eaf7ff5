"""What the state keeps of what the pollers observe: work items, revisions and pipelines.

The provider may leave out what the engine made (the item's link to its revision, the head
the engine last reviewed): the state keeps it (``merge_observed_*``, the pollers use them too).
"""

from __future__ import annotations

from domain.models import EngineState, Revision, Status, WorkItem
from domain.state.edits import replace, reset_attempts, update_work_item, with_key, without_key

UNBLOCKED_BY_A_PERSON: frozenset[Status] = frozenset({"pending", "needs-refinement"})


def merge_observed_work_item(known: WorkItem | None, item: WorkItem) -> WorkItem:
    """What the state holds after observing ``item``: some providers do not show the link to
    the revision on the item; the engine made the link, so it is kept."""
    if known is not None and item.linked_revision is None and known.linked_revision is not None:
        return item.model_copy(update={"linked_revision": known.linked_revision})
    return item


def merge_observed_revision(known: Revision | None, revision: Revision) -> Revision:
    """What the state holds after observing ``revision``: the head the engine last reviewed is
    kept when the provider does not report it."""
    if known is not None and revision.reviewed_sha is None and known.reviewed_sha is not None:
        return revision.model_copy(update={"reviewed_sha": known.reviewed_sha})
    return revision


def observe_work_item(state: EngineState, item: WorkItem) -> EngineState:
    known = state.work_items.get(item.id)
    item = merge_observed_work_item(known, item)
    state = replace(state, work_items=with_key(state.work_items, item.id, item))
    if known is not None and known.status == "blocked" and item.status in UNBLOCKED_BY_A_PERSON:
        # A person unblocked it on the provider: they are asking for fresh attempts.
        state = reset_attempts(state, item.id)
    return state


def pipeline_seen(state: EngineState, status: str) -> EngineState:
    if state.pipelines_seen or status == "none":
        return state
    return replace(state, pipelines_seen=True)


def observe_revision(state: EngineState, revision: Revision) -> EngineState:
    state = pipeline_seen(state, revision.pipeline.status)
    revision = merge_observed_revision(state.revisions.get(revision.id), revision)
    state = replace(state, revisions=with_key(state.revisions, revision.id, revision))
    wait = state.merge_waits.get(revision.id)
    if wait is not None and (revision.state != "open" or revision.head_sha != wait.head_sha):
        # Merged or closed on the provider, or a new head (reviewed again before any merge).
        state = replace(state, merge_waits=without_key(state.merge_waits, revision.id))
    failure = state.landing_failures.get(revision.id)
    if failure is not None and (revision.state != "open" or revision.head_sha != failure.head_sha):
        failures = without_key(state.landing_failures, revision.id)
        state = replace(state, landing_failures=failures)
    wid = revision.work_item_id
    item = state.work_items.get(wid) if wid is not None else None
    if item is not None and item.linked_revision is None and revision.state == "open":
        state = update_work_item(state, item.id, linked_revision=revision.id)
    return state

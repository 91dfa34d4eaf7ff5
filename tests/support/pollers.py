"""A revision poller on its own (no actor, no engine), for the tests of polling."""

from __future__ import annotations

from collections.abc import Callable

from actors.pollers import REVISIONS, Enqueue, Poller, make_poller
from domain.models import EngineState, Revision
from domain.ports import RevisionProviderReader


def revision_poller(
    reader: RevisionProviderReader,
    get_state: Callable[[], EngineState],
    enqueue: Enqueue,
    interval: float,
) -> Poller[Revision]:
    return make_poller(
        REVISIONS,
        reader,
        reader.list_revisions,
        get_state=get_state,
        enqueue=enqueue,
        interval=interval,
    )

"""What a person may ask of the engine, and the user events each request becomes.

The requests are ``cpe work retry|cancel|set-status``, ``cpe pause`` and ``cpe resume`` and the
dashboard's actions; the same models are the control socket's wire format. ``accept`` judges a
request against the engine state: it returns the events to queue and one line saying what they
do, or raises ``RequestRefused`` saying what is wrong (an unknown item, a status that does not
allow it) and what would be accepted. A refused request changes nothing. A request that is
already satisfied (pausing a paused engine) is accepted with no event.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, Literal

from pydantic import Field, TypeAdapter

from domain.dispatch import free_slots
from domain.errors import DomainError
from domain.events import (
    DispatchDue,
    EngineEvent,
    UserCancelledRun,
    UserPausedDispatch,
    UserRequestedImplementorRun,
    UserResumedDispatch,
    UserTransitionedStatus,
)
from domain.models import AgentRole, EngineState, Frozen, Status, WorkItem, WorkItemId, item_ref
from domain.selectors import runs_for_work_item

RETRYABLE: tuple[Status, ...] = ("blocked", "needs-refinement", "pending")


class Retry(Frozen):
    """An implementor run now, whatever the item's attempts and blockers (``cpe work retry``)."""

    op: Literal["retry"] = "retry"
    work_item_id: WorkItemId


class Cancel(Frozen):
    """Cancel the item's active runs; the item goes to ``blocked`` (``cpe work cancel``)."""

    op: Literal["cancel"] = "cancel"
    work_item_id: WorkItemId


class SetStatus(Frozen):
    op: Literal["set-status"] = "set-status"
    work_item_id: WorkItemId
    to: Status


class Pause(Frozen):
    op: Literal["pause"] = "pause"
    reason: str = Field(default="", max_length=500)


class Resume(Frozen):
    op: Literal["resume"] = "resume"


UserRequest = Annotated[Retry | Cancel | SetStatus | Pause | Resume, Field(discriminator="op")]
REQUEST_ADAPTER: TypeAdapter[UserRequest] = TypeAdapter(UserRequest)

RefusalKind = Literal["not-found", "conflict", "invalid"]


class RequestRefused(DomainError):
    """A request the state does not allow: ``kind`` says which way (an unknown item is
    ``not-found``, a status or a pause that forbids it ``conflict``, a malformed request
    ``invalid``); the message names what was wrong and what would be accepted."""

    def __init__(self, kind: RefusalKind, message: str):
        self.kind: RefusalKind = kind
        super().__init__(message)


@dataclass(frozen=True)
class Accepted:
    events: tuple[EngineEvent, ...]
    message: str


def accept(
    request: UserRequest,
    state: EngineState,
    *,
    at: datetime,
    dispatch_paused: str | None,
    max_concurrent: Mapping[AgentRole, int],
) -> Accepted:
    """The events ``request`` becomes against ``state``, or ``RequestRefused``.
    ``dispatch_paused`` is why no run may start now (a person's pause or the breaker's), None
    when one may; ``max_concurrent`` the implementor slots."""
    match request:
        case Retry(work_item_id=wid):
            return _retry(_item(state, wid), state, at, dispatch_paused, max_concurrent)
        case Cancel(work_item_id=wid):
            return _cancel(_item(state, wid), state, at)
        case SetStatus(work_item_id=wid, to=to):
            return _set_status(_item(state, wid), to, state, at)
        case Pause(reason=reason):
            if state.manual_pause is not None:
                return Accepted((), f"dispatch is already paused ({describe_pause(state)})")
            text = " ".join(reason.split())
            return Accepted(
                (UserPausedDispatch(reason=text, at=at),),
                "dispatch paused: no agent run starts until cpe resume; runs under way go on",
            )
        case Resume():
            held = any(
                q.rejected_until is not None and q.rejected_until > at for q in state.quota.values()
            )  # a spent usage window: the person says capacity was added
            if state.manual_pause is None and dispatch_paused is None and not held:
                return Accepted((), "dispatch is not paused: nothing to resume")
            return Accepted((UserResumedDispatch(at=at),), "dispatch resumed")
    raise RequestRefused("invalid", f"unknown request {request!r}")  # pragma: no cover


def describe_pause(state: EngineState) -> str:
    """A person's pause in words: ``by a person since 2026-01-02 03:04 UTC: deploy freeze``."""
    pause = state.manual_pause
    if pause is None:
        return "not paused by a person"
    since = f" since {pause.at.strftime('%Y-%m-%d %H:%M:%S UTC')}" if pause.at else ""
    why = f": {pause.reason}" if pause.reason else ""
    return f"by a person{since}{why}"


def _item(state: EngineState, wid: WorkItemId) -> WorkItem:
    item = state.work_items.get(wid)
    if item is None:
        known = ", ".join(f"{item_ref(i)}" for i in list(state.work_items)[:20]) or "none yet"
        raise RequestRefused(
            "not-found", f"unknown work item {wid!r}; expected one cpe work list shows ({known})"
        )
    return item


def _in_flight(state: EngineState, item: WorkItem) -> str | None:
    runs = [run for run in runs_for_work_item(state, item.id) if run.in_flight]
    return ", ".join(f"{r.role} {r.session_id} ({r.status})" for r in runs) or None


def _retry(
    item: WorkItem,
    state: EngineState,
    at: datetime,
    dispatch_paused: str | None,
    max_concurrent: Mapping[AgentRole, int],
) -> Accepted:
    if item.status == "approved":
        return _merge_again(item, state, at)
    if item.status not in RETRYABLE:
        raise RequestRefused(
            "conflict",
            f"{item_ref(item.id)} is {item.status}; a retry takes an item that is "
            f"{', '.join(RETRYABLE)} "
            "(or approved: its merge is asked again)",
        )
    running = _in_flight(state, item)
    if running:
        raise RequestRefused("conflict", f"{item_ref(item.id)} has a run in flight: {running}")
    if dispatch_paused:
        raise RequestRefused(
            "conflict",
            f"{dispatch_paused}; resume dispatch (cpe resume) to retry {item_ref(item.id)}",
        )
    if free_slots(state, "implementor", max_concurrent) <= 0:
        limit = max_concurrent.get("implementor", 1)
        raise RequestRefused(
            "conflict",
            f"no implementor slot is free ({limit} of {limit} running, [workflow] "
            f"max_concurrent); retry {item_ref(item.id)} when one ends",
        )
    attempts = state.attempts.get(item.id, 0)
    reset = f"; its {attempts} attempt(s) start again from zero" if attempts else ""
    return Accepted(
        (UserRequestedImplementorRun(work_item_id=item.id, at=at),),
        f"{item_ref(item.id)} {item.title!r}: an implementor run is requested ({item.status} → "
        f"in-progress){reset}",
    )


def _merge_again(item: WorkItem, state: EngineState, at: datetime) -> Accepted:
    """An approved item: its landing is asked for again now (a merge the provider held, a
    checkout that was in the way), instead of at the next poll."""
    held = [wait for wait in state.merge_waits.values() if wait.work_item_id == item.id]
    why = f" (held: {' '.join(held[0].reason.split())[:200]})" if held else ""
    return Accepted(
        (DispatchDue(at=at),),
        f"{item_ref(item.id)} {item.title!r}: its merge is asked again now{why}",
    )


def _cancel(item: WorkItem, state: EngineState, at: datetime) -> Accepted:
    active = [run for run in runs_for_work_item(state, item.id) if run.is_active]
    if not active:
        raise RequestRefused(
            "conflict",
            f"{item_ref(item.id)} has no active agent run (it is {item.status}); expected an item "
            "cpe status lists under active agent runs",
        )
    events: tuple[EngineEvent, ...] = tuple(
        UserCancelledRun(session_id=run.session_id, at=at) for run in active
    )
    runs = ", ".join(f"{run.role} run {run.session_id}" for run in active)
    return Accepted(events, f"{item_ref(item.id)}: cancelling {runs}; the item goes to blocked")


def _set_status(item: WorkItem, to: Status, state: EngineState, at: datetime) -> Accepted:
    if to == item.status:
        return Accepted((), f"{item_ref(item.id)} is already {to}: nothing to do")
    running = _in_flight(state, item)
    if running:
        raise RequestRefused(
            "conflict",
            f"{item_ref(item.id)} has a run in flight ({running}); cancel it first "
            f"(cpe work cancel {item.id})",
        )
    return Accepted(
        (UserTransitionedStatus(work_item_id=item.id, to=to, at=at),),
        f"{item_ref(item.id)} {item.title!r}: {item.status} → {to}",
    )

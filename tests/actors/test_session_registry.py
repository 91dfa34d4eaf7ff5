"""The session registry on its own: the runs the guards count, a cancel that comes before its
session can take it, and the shutdown's close, cancel-all and wait."""

from __future__ import annotations

import threading

from actors.session_registry import SessionManager
from domain.models import (
    ImplementorStartParams,
    PlannerStartParams,
    ReviewerStartParams,
    SessionId,
)

PLANNER = PlannerStartParams(session_id=SessionId("p"), spec_paths=("a.md",))
IMPLEMENTOR = ImplementorStartParams(session_id=SessionId("i"), work_item_id="1", branch_name="b")
REVIEWER = ReviewerStartParams(session_id=SessionId("r"), work_item_id="1", revision_id="r1")


def test_the_registry_gives_the_runs_under_way_for_the_guards() -> None:
    """What ``domain.admission.concurrency_full`` counts (its words: tests/domain/
    test_admission.py): every run added and not ended, in order, with its parameters."""
    sessions = SessionManager()
    assert sessions.running() == []
    assert sessions.add(SessionId("p"), PLANNER)
    assert sessions.add(SessionId("i"), IMPLEMENTOR)
    assert sessions.running() == [PLANNER, IMPLEMENTOR]
    assert sessions.active() == ["p", "i"]
    assert sessions.active("implementor") == ["i"]
    assert len(sessions) == 2
    sessions.ended(SessionId("p"))
    assert sessions.running() == [IMPLEMENTOR]


def test_a_cancel_before_the_session_attaches_is_delivered_when_it_does() -> None:
    sessions = SessionManager()
    sessions.add(SessionId("i"), IMPLEMENTOR)
    assert sessions.cancel(SessionId("i"), "a person asked")
    got: list[tuple[str | None, bool]] = []
    sessions.attach(SessionId("i"), lambda reason, infra: got.append((reason, infra)))
    assert got == [("a person asked", False)]
    # attached: a cancel goes straight to the session's canceller
    assert sessions.cancel(SessionId("i"))
    assert sessions.cancel(SessionId("i"), "the model API is down", infrastructure=True)
    assert got == [("a person asked", False), (None, False), ("the model API is down", True)]


def test_an_infrastructure_cancel_before_the_session_attaches_keeps_its_class() -> None:
    sessions = SessionManager()
    sessions.add(SessionId("i"), IMPLEMENTOR)
    assert sessions.cancel(SessionId("i"), "the model API is down", infrastructure=True)
    got: list[tuple[str | None, bool]] = []
    sessions.attach(SessionId("i"), lambda reason, infra: got.append((reason, infra)))
    assert got == [("the model API is down", True)]


def test_a_session_attached_without_a_cancel_waiting_is_not_cancelled() -> None:
    sessions = SessionManager()
    sessions.add(SessionId("i"), IMPLEMENTOR)
    got: list[str | None] = []
    sessions.attach(SessionId("i"), lambda reason, _: got.append(reason))
    sessions.attach(SessionId("gone"), lambda reason, _: got.append(reason))  # unknown
    assert got == []
    assert not sessions.cancel(SessionId("gone"))


def test_shutdown_closes_cancels_every_run_and_waits_for_them_to_end() -> None:
    sessions = SessionManager()
    cancelled: list[str] = []
    for sid, params in (("p", PLANNER), ("i", IMPLEMENTOR)):
        sessions.add(SessionId(sid), params)
        sessions.attach(SessionId(sid), lambda reason, infra, sid=sid: cancelled.append(sid))
    sessions.close()
    assert not sessions.add(SessionId("r"), REVIEWER)  # no new run once closed
    assert sessions.active() == ["p", "i"]
    assert sessions.cancel_all() == 2
    assert cancelled == ["p", "i"]
    assert not sessions.wait_all_ended(0.05)

    def end(sid: str) -> None:
        sessions.ended(SessionId(sid))
        sessions.delivered(SessionId(sid))

    ender = threading.Thread(target=lambda: [end(s) for s in "pi"])
    ender.start()
    assert sessions.wait_all_ended(30)
    ender.join(30)
    assert sessions.active() == []


def test_the_end_of_a_session_it_does_not_know_changes_nothing() -> None:
    sessions = SessionManager()
    sessions.add(SessionId("i"), IMPLEMENTOR)
    sessions.ended(SessionId("gone"))
    sessions.ended(SessionId("i"))
    sessions.ended(SessionId("i"))  # twice: the second is nothing
    assert sessions.active() == []


def test_a_stop_waits_for_an_ended_runs_terminal_event_to_be_queued() -> None:
    """The slot is free at once (a new run of the item may start), but a stop's drain begins
    only once the terminal event is in the queue: else the stop could find the queue empty,
    end, and leave that event to the next start."""
    sessions = SessionManager()
    sessions.add(SessionId("i"), IMPLEMENTOR)
    sessions.ended(SessionId("i"))
    assert sessions.active() == []
    assert sessions.running() == []
    assert not sessions.wait_all_ended(0)
    sessions.delivered(SessionId("i"))
    assert sessions.wait_all_ended(0)
    sessions.ended(SessionId("gone"))  # never added: nothing to wait for
    assert sessions.wait_all_ended(0)

"""Binding and running the seven handlers: their order, one snapshot, a command kept once."""

from __future__ import annotations

from domain.commands import TransitionStatus
from domain.events import WorkItemChanged
from domain.handlers import HANDLER_FUNCTIONS, create_handlers, run_handlers
from tests.domain.builders import item, state
from tests.domain.handlers.support import transitions


def test_create_handlers_returns_the_seven_handlers_in_order() -> None:
    handlers = create_handlers()
    assert [h.name for h in handlers] == [
        "plan",
        "apply_plan",
        "dispatch",
        "implementor_done",
        "revision",
        "review_done",
        "recovery",
    ]
    assert len(HANDLER_FUNCTIONS) == 7


def test_run_handlers_gives_every_handler_the_same_snapshot() -> None:
    snapshot = state(item("1"))
    seen: list[object] = []

    def spy(name: str):
        def handler(event, s):
            seen.append(s)
            return [TransitionStatus(work_item_id=name, to="done")]

        return handler

    event = WorkItemChanged(work_item=item("1"))
    commands = run_handlers([spy("a"), spy("b")], event, snapshot)
    assert seen == [snapshot, snapshot]
    assert all(s is snapshot for s in seen)
    assert transitions(commands) == [("a", "done"), ("b", "done")]


def test_run_handlers_keeps_a_command_two_handlers_emit_once() -> None:
    same = TransitionStatus(work_item_id="1", to="done")
    commands = run_handlers(
        [lambda e, s: [same], lambda e, s: [same]], WorkItemChanged(work_item=item()), state()
    )
    assert commands == [same]

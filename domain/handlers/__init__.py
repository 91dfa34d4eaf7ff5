"""The seven handlers: pure ``(event, state) -> list[EngineCommand]``.

Each handler sees the event and one snapshot taken after the event was applied; it never sees
another handler's commands (S002-03). ``run_handlers`` runs them in order and collects their
commands. Options come from configuration through ``create_handlers(options)``.

1. plan — specs whose blob differs from the last planned one → one planner run for all of
   them, unless a planner is in flight.
2. apply plan — a planner result → ``ApplyPlan``.
3. dispatch — an unblocked pending or a needs-refinement item with no run in flight →
   implementor run (and a user's request); the request itself → ``in-progress``.
4. implementor done — a patch → create or update the revision; anything else → the item's
   next status.
5. revision — a delivered revision → in-review; a green head not yet reviewed → reviewer run;
   a red pipeline → needs-refinement, unless it fails only where the default branch's
   pipeline fails too (reviewed then, never merged automatically); merged → done; closed →
   blocked.
6. review done — a reviewer result for the current head → ``PostReview`` (a stale one is
   dropped and the new head reviewed); a posted review → approved (and merged when
   ``auto_merge``) or needs-refinement.
7. recovery and failures — in-progress with nothing in flight (seen on a poll, or just moved
   there after its run already ended) → pending, or where its last run says; a failed run →
   pending or blocked by attempts; user cancel and user status.

They live by family: ``planning`` (1, 2), ``implementing`` (3, 4), ``reviewing`` (5, 6),
``recovery`` (7); their options are ``options.HandlerOptions``. This module binds and runs them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from domain.commands import EngineCommand
from domain.events import EngineEvent
from domain.handlers.implementing import dispatch, implementor_done
from domain.handlers.options import HandlerOptions
from domain.handlers.planning import apply_plan, plan
from domain.handlers.recovery import recovery
from domain.handlers.reviewing import review_done, revision
from domain.models import EngineState

HandlerFn = Callable[[EngineEvent, EngineState, HandlerOptions], list[EngineCommand]]


@dataclass(frozen=True)
class Handler:
    """A handler bound to its options; call it as ``handler(event, state)``."""

    name: str
    fn: HandlerFn
    options: HandlerOptions

    def __call__(self, event: EngineEvent, state: EngineState) -> list[EngineCommand]:
        return self.fn(event, state, self.options)


HANDLER_FUNCTIONS: tuple[HandlerFn, ...] = (
    plan,
    apply_plan,
    dispatch,
    implementor_done,
    revision,
    review_done,
    recovery,
)


def create_handlers(options: HandlerOptions | None = None) -> tuple[Handler, ...]:
    """The seven handlers, in order, bound to ``options``."""
    bound = options or HandlerOptions()
    return tuple(Handler(fn.__name__, fn, bound) for fn in HANDLER_FUNCTIONS)


def run_handlers(
    handlers: Sequence[Callable[[EngineEvent, EngineState], list[EngineCommand]]],
    event: EngineEvent,
    state: EngineState,
) -> list[EngineCommand]:
    """Every handler's commands for ``event`` against the one ``state`` snapshot, in handler
    order; a command two handlers both emit is kept once."""
    commands: list[EngineCommand] = []
    for handler in handlers:
        for command in handler(event, state):
            if command not in commands:
                commands.append(command)
    return commands

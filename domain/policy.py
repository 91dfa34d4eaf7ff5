"""Policy: which commands the executor may carry out.

``Policy.check(command, state)`` answers ``Allowed`` or ``Rejected(reason)``; a rejected command
becomes a ``CommandRejected`` event and nothing is attempted. The default allows everything.
Concurrency guards are not policy: they live in the executor, the only component that knows
which sessions it started.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, Protocol

from domain.commands import EngineCommand
from domain.models import EngineState, Frozen


class Allowed(Frozen):
    verdict: Literal["allowed"] = "allowed"


class Rejected(Frozen):
    verdict: Literal["rejected"] = "rejected"
    reason: str


Decision = Allowed | Rejected

ALLOWED = Allowed()


class Policy(Protocol):
    def check(self, command: EngineCommand, state: EngineState) -> Decision: ...


class AllowAll:
    """The default policy: every command is allowed."""

    def check(self, command: EngineCommand, state: EngineState) -> Decision:
        return ALLOWED


class DenyCommands:
    """Rejects every command whose type is listed (``MergeRevision``: a person merges)."""

    def __init__(self, command_types: Sequence[str], reason: str = "denied by policy"):
        self.command_types = frozenset(command_types)
        self.reason = reason

    def check(self, command: EngineCommand, state: EngineState) -> Decision:
        if command.type in self.command_types:
            return Rejected(reason=f"{command.type}: {self.reason}")
        return ALLOWED


class AllOf:
    """Allowed only when every policy allows; the first rejection wins."""

    def __init__(self, *policies: Policy):
        self.policies = policies

    def check(self, command: EngineCommand, state: EngineState) -> Decision:
        for policy in self.policies:
            decision = policy.check(command, state)
            if isinstance(decision, Rejected):
                return decision
        return ALLOWED


DEFAULT_POLICY: Policy = AllowAll()
